"""The tenant settings page (/settings/): every member reads the contacts and the webhook,
only a tenant admin changes them (recorded with who and when), provider staff get a 404,
another tenant's settings are out of reach, and a rotated signing secret is shown once
and signs the deliveries from then on (checked by a real receiver on loopback)."""

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_network

import pytest
import time_machine
from django.utils.html import escape

from accounts.choices import Role
from gpulease_verify import webhooks
from incidents import notifications
from leases import tenant_settings
from leases.models import Tenant, TenantSettingsEvent
from leases.models.tenants import MASKED_SECRET
from tests.factories import MembershipFactory, StaffFactory, TenantFactory
from tests.portal.support import NOW, client_for

pytestmark = pytest.mark.django_db

URL = "/settings/"
PUBLIC_HOOK = "https://93.184.215.14:8443/hooks/gpulease"
OLD_SECRET = webhooks.secret_from_key(b"k" * 32)


@pytest.fixture
def tenant():
    return TenantFactory(
        name="深圳智元",
        slug="zhiyuan",
        contact_name="王工",
        contact_email="noc@zhiyuan.example.cn",
        contact_phone="+86 755 8888 0000",
        webhook_secret=OLD_SECRET,
    )


def member(tenant, role, username):  # type: ignore[no-untyped-def]
    return MembershipFactory(tenant=tenant, role=role, user__username=username).user


@pytest.fixture
def admin(tenant):
    return member(tenant, Role.ADMIN, "zy-admin")


def snapshot(tenant) -> dict:  # type: ignore[no-untyped-def]
    fields = ("contact_name", "contact_email", "contact_phone", "webhook_url", "webhook_secret")
    return Tenant.objects.filter(pk=tenant.pk).values(*fields).get()


# --- an admin changes each setting ---------------------------------------------------


def test_an_admin_changes_the_contacts_and_the_change_is_recorded(tenant, admin):
    response = client_for(admin).post(
        URL,
        {
            "tenant": "zhiyuan",
            "action": "contacts",
            "contact_name": "李运维",
            "contact_email": "ops@zhiyuan.example.cn",
            "contact_phone": "0755-88880000 转 801",
        },
    )

    assert response.status_code == 200
    text = response.content.decode()
    assert "Saved: contact name, contact email, contact phone." in text
    tenant.refresh_from_db()
    assert (tenant.contact_name, tenant.contact_email, tenant.contact_phone) == (
        "李运维",
        "ops@zhiyuan.example.cn",
        "0755-88880000 转 801",
    )
    event = TenantSettingsEvent.objects.get()
    assert event.tenant == tenant and event.actor == admin
    assert event.actor_username == "zy-admin" and event.at == NOW
    assert event.fields == ["contact_name", "contact_email", "contact_phone"]
    # The page lists it: NOW is 2026-11-20 12:00 in Asia/Shanghai.
    assert "<td>2026-11-20 12:00</td><td>zy-admin</td>" in text


def test_saving_the_same_contacts_again_changes_and_records_nothing(tenant, admin):
    data = {
        "tenant": "zhiyuan",
        "action": "contacts",
        "contact_name": "王工",
        "contact_email": "noc@zhiyuan.example.cn",
        "contact_phone": "+86 755 8888 0000",
    }
    response = client_for(admin).post(URL, data)

    assert response.status_code == 200
    assert "Nothing changed." in response.content.decode()
    assert not TenantSettingsEvent.objects.exists()


def test_an_admin_sets_then_clears_the_webhook_url(tenant, admin):
    client = client_for(admin)
    data = {"tenant": "zhiyuan", "action": "webhook", "webhook_url": PUBLIC_HOOK}
    assert client.post(URL, data).status_code == 200
    tenant.refresh_from_db()
    assert tenant.webhook_url == PUBLIC_HOOK

    response = client.post(URL, {**data, "webhook_url": ""})
    assert response.status_code == 200
    assert "Saved: incident webhook URL." in response.content.decode()
    tenant.refresh_from_db()
    assert tenant.webhook_url == ""
    recorded = list(TenantSettingsEvent.objects.order_by("pk").values_list("fields", "actor"))
    assert recorded == [(["webhook_url"], admin.pk), (["webhook_url"], admin.pk)]


def test_a_bad_email_or_phone_is_refused_on_the_form_with_what_was_typed_kept(tenant, admin):
    before = snapshot(tenant)
    response = client_for(admin).post(
        URL,
        {
            "tenant": "zhiyuan",
            "action": "contacts",
            "contact_name": "李运维",
            "contact_email": "ops at zhiyuan",
            "contact_phone": "call me",
        },
    )

    assert response.status_code == 400
    text = response.content.decode()
    assert "Enter a valid email address." in text  # Django's validate_email
    assert escape("A phone number is digits, spaces, + - ( ) and at least 5 digits") in text
    assert 'value="ops at zhiyuan"' in text and 'value="call me"' in text
    assert 'value="李运维"' in text
    assert snapshot(tenant) == before
    assert not TenantSettingsEvent.objects.exists()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.0.0.5/hook", "10.0.0.5 is a private address (RFC 1918)"),
        ("http://127.0.0.1:8080/hook", "127.0.0.1 is a loopback address"),
        ("http://169.254.169.254/latest/", "169.254.169.254 is a cloud metadata service"),
    ],
)
def test_an_internal_webhook_url_is_refused_with_the_egress_reason(tenant, admin, url, reason):
    before = snapshot(tenant)
    response = client_for(admin).post(
        URL, {"tenant": "zhiyuan", "action": "webhook", "webhook_url": url}
    )

    assert response.status_code == 400
    text = response.content.decode()
    assert escape(f"{reason}; webhooks are sent only to public addresses.") in text
    assert f'value="{url}"' in text  # what was typed stays in the field
    assert snapshot(tenant) == before
    assert not TenantSettingsEvent.objects.exists()


# --- the secret -------------------------------------------------------------------------


def test_a_rotated_secret_is_shown_once_then_only_masked(tenant, admin):
    client = client_for(admin)
    refused = client.post(URL, {"tenant": "zhiyuan", "action": "rotate"})
    assert refused.status_code == 400
    assert "Tick the confirmation to rotate the secret." in refused.content.decode()
    assert snapshot(tenant)["webhook_secret"] == OLD_SECRET

    response = client.post(URL, {"tenant": "zhiyuan", "action": "rotate", "confirm": "on"})

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    tenant.refresh_from_db()
    new = tenant.webhook_secret
    assert new != OLD_SECRET and new.startswith("whsec_")
    assert len(webhooks.secret_key(new)) == webhooks.SECRET_BYTES
    assert f'<code id="new-secret">{new}</code>' in response.content.decode()

    again = client.get(URL).content.decode()
    assert new not in again and OLD_SECRET not in again
    assert f'<code id="masked-secret">{MASKED_SECRET}</code>' in again
    event = TenantSettingsEvent.objects.get()
    assert event.fields == ["webhook_secret"] and event.actor == admin
    assert new not in json.dumps(list(TenantSettingsEvent.objects.values()), default=str)


# --- who may ----------------------------------------------------------------------------

ACTIONS = [
    {"action": "contacts", "contact_name": "x", "contact_email": "x@example.cn"},
    {"action": "webhook", "webhook_url": PUBLIC_HOOK},
    {"action": "rotate", "confirm": "on"},
    {"action": "test"},
]


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AUDITOR])
def test_a_viewer_or_auditor_reads_but_may_not_change_anything(tenant, role):
    client = client_for(member(tenant, role, "zy-reader"))
    page = client.get(URL)
    assert page.status_code == 200
    text = page.content.decode()
    assert "noc@zhiyuan.example.cn" in text and "+86 755 8888 0000" in text
    assert "Only an admin of the tenant changes these settings." in text
    assert 'name="action"' not in text  # no forms that write
    assert OLD_SECRET not in text and MASKED_SECRET in text

    before = snapshot(tenant)
    for data in ACTIONS:
        response = client.post(URL, {"tenant": "zhiyuan", **data})
        assert response.status_code == 403, data
    assert snapshot(tenant) == before
    assert not TenantSettingsEvent.objects.exists()


def test_the_page_does_not_exist_for_provider_staff(tenant):
    staff = client_for(StaffFactory())
    assert staff.get(URL).status_code == 404
    assert staff.get(URL, {"tenant": "zhiyuan"}).status_code == 404
    before = snapshot(tenant)
    for data in ACTIONS:
        assert staff.post(URL, {"tenant": "zhiyuan", **data}).status_code == 404
    assert snapshot(tenant) == before
    assert "/settings/" not in staff.get("/").content.decode()  # no link in the nav


def test_another_tenants_settings_are_out_of_reach(tenant, admin):
    other = TenantFactory(
        slug="beta", contact_email="secret-ops@beta.example.cn", webhook_secret=OLD_SECRET
    )
    client = client_for(admin)
    assert client.get(URL, {"tenant": "beta"}).status_code == 404
    before = snapshot(other)
    for data in ACTIONS:
        assert client.post(URL, {"tenant": "beta", **data}).status_code == 404
    assert snapshot(other) == before
    assert "secret-ops@beta.example.cn" not in client.get(URL).content.decode()
    assert not TenantSettingsEvent.objects.exists()


def test_a_member_of_two_tenants_picks_one_and_is_admin_only_where_the_role_says(tenant):
    user = member(tenant, Role.VIEWER, "two-hats")
    second = TenantFactory(name="广州云算", slug="yunsuan", contact_email="ops@yunsuan.example.cn")
    MembershipFactory(tenant=second, user=user, role=Role.ADMIN)
    client = client_for(user)

    first = client.get(URL).content.decode()  # the first tenant by slug: yunsuan
    assert "广州云算" in first and "ops@yunsuan.example.cn" in first
    assert '<option value="zhiyuan">深圳智元</option>' in first
    chosen = client.get(URL, {"tenant": "zhiyuan"}).content.decode()
    assert "noc@zhiyuan.example.cn" in chosen and 'name="action"' not in chosen

    data = {"action": "contacts", "contact_name": "陈", "contact_email": "c@example.cn"}
    assert client.post(URL, {"tenant": "zhiyuan", **data}).status_code == 403
    assert client.post(URL, {"tenant": "yunsuan", **data}).status_code == 200
    second.refresh_from_db()
    tenant.refresh_from_db()
    assert (second.contact_name, tenant.contact_name) == ("陈", "王工")


def test_the_nav_links_the_page_for_a_member(admin):
    assert 'href="/settings/"' in client_for(admin).get("/").content.decode()


# --- a test delivery to a real receiver -------------------------------------------------


@dataclass
class Receiver:
    url: str = ""
    deliveries: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    status: int = 200


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    """A webhook receiver on loopback, which the provider allows for this test."""
    settings.WEBHOOK_ALLOWED_NETWORKS = [ip_network("127.0.0.0/8")]
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.deliveries.append((dict(self.headers.items()), body))
            self.send_response(got.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    got.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/gpulease"
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_after_rotation_both_secrets_sign_for_the_overlap_then_the_new_one_only(
    tenant, admin, receiver, settings
):
    """Rotated at 12:00 on 20 November (Shanghai) with a 24-hour overlap: a delivery at
    11:59 the next day carries two signatures, so a receiver still holding the old secret
    verifies, and so does one switched to the new; from 12:00 on 21 November only the new
    secret signs. The legacy header is the new secret's alone."""
    settings.WEBHOOK_SECRET_OVERLAP_HOURS = 24
    client = client_for(admin)
    data = {"tenant": "zhiyuan", "action": "webhook", "webhook_url": receiver.url}
    with time_machine.travel(NOW, tick=False):
        assert client.post(URL, data).status_code == 200
        rotated = client.post(URL, {"tenant": "zhiyuan", "action": "rotate", "confirm": "on"})
    tenant.refresh_from_db()
    new = tenant.webhook_secret
    assert new in rotated.content.decode()
    overlap = "The replaced secret also signs every delivery until 2026-11-21 12:00 (Asia/Shanghai)"
    assert overlap in rotated.content.decode()
    assert tenant.previous_webhook_secret not in client.get(URL).content.decode()

    for instant in (NOW + timedelta(hours=23, minutes=59), NOW + timedelta(hours=24)):
        with time_machine.travel(instant, tick=False):
            response = client.post(URL, {"tenant": "zhiyuan", "action": "test"})
            page = client.get(URL).content.decode()
        assert response.status_code == 200
        assert "The test delivery was taken" in response.content.decode()
        headers, body = receiver.deliveries[-1]
        assert json.loads(body) == {
            "event": "webhook.test",
            "tenant": "zhiyuan",
            "sent_at": json.loads(body)["sent_at"],
        }
        assert headers["X-Gpulease-Event"] == "webhook.test"
        now = instant.timestamp()
        msg_id = webhooks.verify(secret=new, body=body, headers=headers, now=now)
        assert msg_id == headers["webhook-id"]
        legacy = notifications.legacy_signature(body=body, secret=new)
        assert headers["X-Gpulease-Signature"] == legacy
        if instant < NOW + timedelta(hours=24):
            assert len(headers["webhook-signature"].split(" ")) == 2
            assert webhooks.verify(secret=OLD_SECRET, body=body, headers=headers, now=now)
            assert overlap in page
        else:
            assert len(headers["webhook-signature"].split(" ")) == 1
            with pytest.raises(webhooks.WebhookRefused, match="no signature matches"):
                webhooks.verify(secret=OLD_SECRET, body=body, headers=headers, now=now)
            assert "The replaced secret" not in page
    # A test delivery changes no setting: the URL and the rotation are the two records,
    # and the replaced secret is never named in them.
    assert [e.fields for e in TenantSettingsEvent.objects.order_by("pk")] == [
        ["webhook_url"],
        ["webhook_secret"],
    ]


def test_a_second_rotation_inside_the_overlap_drops_the_oldest_secret(tenant, admin):
    """Rotated at 12:00 and again at 13:00: the middle secret signs beside the newest until
    13:00 the next day; the first one no longer signs at all."""
    tenant_settings.rotate_webhook_secret(tenant=tenant, user=admin, now=NOW)
    middle = tenant.webhook_secret
    later = NOW + timedelta(hours=1)
    newest = tenant_settings.rotate_webhook_secret(tenant=tenant, user=admin, now=later)
    tenant.refresh_from_db()
    assert tenant.signing_secrets(later) == [newest, middle]
    assert OLD_SECRET not in tenant.signing_secrets(later)
    assert tenant.previous_webhook_secret_until == later + timedelta(hours=24)
    assert tenant.signing_secrets(later + timedelta(hours=24)) == [newest]


def test_a_failed_test_delivery_says_why(tenant, admin, receiver):
    Tenant.objects.filter(pk=tenant.pk).update(webhook_url=receiver.url)
    receiver.status = 500

    response = client_for(admin).post(URL, {"tenant": "zhiyuan", "action": "test"})

    assert response.status_code == 200
    text = response.content.decode()
    assert "The test delivery failed" in text
    assert f"{receiver.url} answered HTTP 500" in text
    assert len(receiver.deliveries) == 1
