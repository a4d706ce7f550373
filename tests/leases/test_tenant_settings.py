"""leases.tenant_settings: the one home of a tenant's own writes to its contacts and
webhook. Only an active tenant admin who is not provider staff writes, each value is
checked by its model field, and each change is recorded (who, when, which fields; never a
value). A staff correction in the admin is recorded the same way."""

import json
from datetime import timedelta

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError

from accounts.choices import Role
from common.querysets import acting_for
from gpulease_verify import webhooks
from leases import tenant_settings
from leases.models import Tenant, TenantSettingsEvent
from leases.models.tenants import validate_phone
from tests.factories import MembershipFactory, StaffFactory, TenantFactory, at

pytestmark = pytest.mark.django_db

NOW = at("2026-11-20 12:00")


@pytest.fixture
def admin():
    return MembershipFactory(
        role=Role.ADMIN,
        tenant__slug="zhiyuan",
        tenant__contact_email="noc@zhiyuan.example.cn",
        user__username="zy-admin",
    )


def contacts(**values):  # type: ignore[no-untyped-def]
    return {"contact_name": "", "contact_email": "", "contact_phone": "", **values}


def test_changed_contacts_are_stored_and_recorded_by_name_only(admin):
    tenant = admin.tenant

    changed = tenant_settings.change_contacts(
        tenant=tenant,
        user=admin.user,
        now=NOW,
        **contacts(contact_name=" 王工 ", contact_email="noc@zhiyuan.example.cn"),
    )

    # The e-mail was already that: only the name changed (stripped).
    assert changed == ["contact_name"]
    stored = Tenant.objects.get(pk=tenant.pk)
    assert stored.contact_name == "王工" and tenant.contact_name == "王工"
    event = TenantSettingsEvent.objects.get()
    assert (event.tenant, event.actor, event.actor_username, event.at, event.fields) == (
        tenant,
        admin.user,
        "zy-admin",
        NOW,
        ["contact_name"],
    )
    again = tenant_settings.change_contacts(
        tenant=tenant,
        user=admin.user,
        **contacts(contact_name="王工", contact_email="noc@zhiyuan.example.cn"),
    )
    assert again == [] and TenantSettingsEvent.objects.count() == 1


def test_every_bad_value_is_refused_by_field_and_nothing_is_stored(admin):
    with pytest.raises(ValidationError) as refused:
        tenant_settings.change_contacts(
            tenant=admin.tenant,
            user=admin.user,
            contact_name="王\x00工",
            contact_email="noc@",
            contact_phone="12",
        )

    errors = refused.value.message_dict
    assert errors["contact_name"] == ["Control characters are not allowed here."]
    assert errors["contact_email"] == ["Enter a valid email address."]
    assert errors["contact_phone"][0].startswith("A phone number is digits")
    assert Tenant.objects.get(pk=admin.tenant.pk).contact_email == "noc@zhiyuan.example.cn"
    assert not TenantSettingsEvent.objects.exists()


@pytest.mark.parametrize(
    ("phone", "valid"),
    [
        ("+86 755 8888 0000", True),
        ("0755-88880000", True),
        ("(0755) 8888-0000 转 801", True),
        ("+86 20 1234 5678 ext. 12", True),
        ("13800138000", True),
        ("1234", False),  # four digits: 5 is the least
        ("++86 755 8888", False),
        ("phone me", False),
        ("0755 8888 0000; drop", False),
        ("\uff10\uff17\uff15\uff15\uff18\uff18\uff18\uff18", False),  # full-width digits
    ],
)
def test_phone_numbers(phone, valid):
    if valid:
        validate_phone(phone)
    else:
        with pytest.raises(ValidationError):
            validate_phone(phone)


def test_the_webhook_url_is_checked_by_the_egress_rules(admin):
    with pytest.raises(ValidationError) as refused:
        tenant_settings.set_webhook_url(
            tenant=admin.tenant, user=admin.user, url="http://192.168.1.10/hook"
        )
    assert refused.value.message_dict == {
        "webhook_url": [
            "192.168.1.10 is a private address (RFC 1918); "
            "webhooks are sent only to public addresses."
        ]
    }
    with pytest.raises(ValidationError) as refused:
        tenant_settings.set_webhook_url(tenant=admin.tenant, user=admin.user, url="ftp://x")
    assert refused.value.message_dict == {
        "webhook_url": [
            "Enter a valid URL.",
            "only http and https URLs are allowed, not 'ftp'; "
            "webhooks are sent only to public addresses.",
        ]
    }

    url = "https://93.184.215.14/hooks/gpulease"
    assert tenant_settings.set_webhook_url(tenant=admin.tenant, user=admin.user, url=url) == [
        "webhook_url"
    ]
    assert tenant_settings.set_webhook_url(tenant=admin.tenant, user=admin.user, url="") == [
        "webhook_url"
    ]
    assert Tenant.objects.get(pk=admin.tenant.pk).webhook_url == ""


def test_a_rotated_secret_is_new_valid_and_never_recorded(admin):
    before = Tenant.objects.get(pk=admin.tenant.pk).webhook_secret

    secret = tenant_settings.rotate_webhook_secret(tenant=admin.tenant, user=admin.user)

    assert secret != before
    assert len(webhooks.secret_key(secret)) == webhooks.SECRET_BYTES
    assert Tenant.objects.get(pk=admin.tenant.pk).webhook_secret == secret
    event = TenantSettingsEvent.objects.get()
    assert event.fields == ["webhook_secret"]
    rows = json.dumps(list(TenantSettingsEvent.objects.values()), default=str)
    assert secret not in rows and before not in rows


WRITES = [
    lambda tenant, user: tenant_settings.change_contacts(
        tenant=tenant, user=user, **contacts(contact_name="x")
    ),
    lambda tenant, user: tenant_settings.set_webhook_url(
        tenant=tenant, user=user, url="https://93.184.215.14/x"
    ),
    lambda tenant, user: tenant_settings.rotate_webhook_secret(tenant=tenant, user=user),
]


@pytest.mark.parametrize("write", WRITES)
def test_only_an_admin_of_the_tenant_writes(admin, write):
    tenant = admin.tenant
    before = Tenant.objects.filter(pk=tenant.pk).values().get()
    viewer = MembershipFactory(tenant=tenant, role=Role.VIEWER).user
    auditor = MembershipFactory(tenant=tenant, role=Role.AUDITOR).user
    other_admin = MembershipFactory(role=Role.ADMIN).user
    for user in (viewer, auditor, other_admin):
        with pytest.raises(PermissionDenied, match="Only an admin of the tenant"):
            write(tenant, user)
    with pytest.raises(PermissionDenied, match="Provider staff never act as a tenant user"):
        write(tenant, StaffFactory())
    # An admin of two tenants acting through a token of the other one.
    MembershipFactory(tenant=TenantFactory(slug="beta"), user=admin.user, role=Role.ADMIN)
    acting_for(admin.user, Tenant.objects.get(slug="beta").pk)
    with pytest.raises(PermissionDenied):
        write(tenant, admin.user)
    admin.user.is_active = False
    acting_for(admin.user, None)
    with pytest.raises(PermissionDenied):
        write(tenant, admin.user)
    after = Tenant.objects.filter(pk=tenant.pk).values().get()
    assert after == before
    assert not TenantSettingsEvent.objects.exists()


def test_a_staff_correction_in_the_admin_is_recorded(admin, client):
    staff = StaffFactory(username="ops-li")
    tenant = admin.tenant
    client.force_login(staff)
    change_url = f"/admin/leases/tenant/{tenant.pk}/change/"
    form = client.get(change_url).context["adminform"].form
    data = {
        name: value
        for name, value in form.initial.items()
        if value is not None and name in form.fields
    }
    data.update(
        contact_email="ops@zhiyuan.example.cn",
        # What the browser sends for a field with a callable default (show_hidden_initial).
        **{"initial-webhook_secret": form.initial["webhook_secret"]},
        **{
            f"{prefix}-{key}": value
            for prefix in ("memberships", "settings_events")
            for key, value in {
                "TOTAL_FORMS": "0",
                "INITIAL_FORMS": "0",
                "MIN_NUM_FORMS": "0",
                "MAX_NUM_FORMS": "1000",
            }.items()
        },
    )
    response = client.post(change_url, data)

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Tenant.objects.get(pk=tenant.pk).contact_email == "ops@zhiyuan.example.cn"
    event = TenantSettingsEvent.objects.get()
    assert (event.actor, event.actor_username, event.fields) == (
        staff,
        "ops-li",
        ["contact_email"],
    )


def test_a_secret_replaced_in_the_admin_keeps_the_old_one_signing_for_the_overlap(
    admin, client, settings
):
    """A superuser (who holds leases.view_webhook_secret) types a new secret in the admin:
    it is in force at once and the old one signs beside it for the overlap, as after a
    rotation from the portal; the record names the secret, never its value."""
    settings.WEBHOOK_SECRET_OVERLAP_HOURS = 2
    tenant = admin.tenant
    old = tenant.webhook_secret
    typed = webhooks.new_secret()
    client.force_login(StaffFactory(username="ops-wang", is_superuser=True))
    change_url = f"/admin/leases/tenant/{tenant.pk}/change/"
    form = client.get(change_url).context["adminform"].form
    data = {
        name: value
        for name, value in form.initial.items()
        if value is not None and name in form.fields
    }
    data.update(
        webhook_secret=typed,
        **{"initial-webhook_secret": form.initial["webhook_secret"]},
        **{
            f"{prefix}-{key}": value
            for prefix in ("memberships", "settings_events")
            for key, value in {
                "TOTAL_FORMS": "0",
                "INITIAL_FORMS": "0",
                "MIN_NUM_FORMS": "0",
                "MAX_NUM_FORMS": "1000",
            }.items()
        },
    )
    with time_machine.travel(NOW, tick=False):
        response = client.post(change_url, data)

    assert response.status_code == 302, response.context["adminform"].form.errors
    tenant.refresh_from_db()
    assert tenant.signing_secrets(NOW + timedelta(minutes=119)) == [typed, old]
    assert tenant.signing_secrets(NOW + timedelta(hours=2)) == [typed]
    assert TenantSettingsEvent.objects.get().fields == ["webhook_secret"]
    page = client.get(change_url).content.decode()
    assert old not in page  # the replaced secret is no field of the admin form
