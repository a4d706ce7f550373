"""Auditors in the portal: their own audit-scoped token (the API's issuing rules), each
month's signed audit bundle and the chain checkpoint to download, with the command that
verifies them. Another tenant's lease is a 404 on every new route; a viewer gets 403."""

import json
import re
from datetime import timedelta

import pytest
from django.test import Client

from accounts.choices import Role
from accounts.models import ApiToken
from billing import audit, checkpoints
from billing.ingest import ingest_all
from leases import services
from leases.choices import LeaseStatus
from tests.factories import MembershipFactory, NodeFactory, StaffFactory, at, make_lease, make_run
from tests.portal.support import NOW, client_for

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r"gpl_[0-9a-f]{8}_[A-Za-z0-9_-]{43}")


@pytest.fixture
def auditor():
    return MembershipFactory(role=Role.AUDITOR, user__username="zy-auditor")


@pytest.fixture
def lease(auditor):
    lease = make_lease(
        tenant=auditor.tenant,
        reference="ZY-2026-701",
        starts_at=at("2026-10-01 00:00"),
        nodes=NodeFactory.create_batch(2),
    )
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-10-01"))
    for day in range(3):
        make_run(lease, slot=at("2026-10-10 00:00") + timedelta(days=day), measured_bps=98 * 10**9)
        make_run(lease, slot=at("2026-11-10 00:00") + timedelta(days=day), measured_bps=97 * 10**9)
    ingest_all(notify=False)
    return lease


# --- tokens ---------------------------------------------------------------------------


def create(client, **fields):  # type: ignore[no-untyped-def]
    data = {"name": "audit script", "scopes": ["read", "audit"]}
    data.update(fields)
    return client.post("/tokens/", data)


def test_an_auditor_creates_an_audit_token_shown_once_that_reads_bundles(auditor, lease):
    client = client_for(auditor.user)
    form = client.get("/tokens/").content.decode()
    # Only what the role allows is offered, audit ticked.
    assert 'value="read"' in form and 'value="audit"' in form and 'value="write"' not in form
    assert "Your roles allow a token these scopes: read, audit." in form
    response = create(client)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    [secret] = set(TOKEN.findall(response.content.decode()))
    token = ApiToken.objects.get()
    assert token.user == auditor.user and token.scopes == ["read", "audit"]
    # The default expiry: API_TOKEN_DEFAULT_DAYS (90) from issue.
    assert timedelta(days=89) < token.expires_at - token.created_at <= timedelta(days=90)
    api = Client(HTTP_ACCEPT_LANGUAGE="en", HTTP_AUTHORIZATION=f"Bearer {secret}")
    bundle = api.get(f"/api/v1/leases/{lease.pk}/audit/", {"period": "2026-10"})
    assert bundle.status_code == 200
    assert bundle.json()["bundle"]["lease"]["reference"] == "ZY-2026-701"
    assert not TOKEN.search(client.get("/tokens/").content.decode())  # shown once


def test_an_auditors_token_never_carries_write_nor_outlives_the_maximum(auditor):
    client = client_for(auditor.user)
    refused = create(client, scopes=["read", "write"])
    assert refused.status_code == 400
    assert (
        "A token cannot carry the write scope(s): it may hold only read, audit."
        in refused.content.decode()
    )
    late = create(client, expires_at="2099-01-01T08:00")
    assert late.status_code == 400
    assert "A token may expire at the latest at" in late.content.decode()
    assert not ApiToken.objects.exists()


def test_a_viewer_still_cannot_create_a_token(auditor):
    viewer = MembershipFactory(tenant=auditor.tenant, role=Role.VIEWER)
    assert create(client_for(viewer.user), scopes=["read"]).status_code == 403
    assert not ApiToken.objects.exists()


# --- downloads ------------------------------------------------------------------------


def test_the_sla_page_offers_the_months_bundle_and_checkpoint_with_the_verify_command(
    auditor, lease
):
    checkpoints.create_checkpoint(lease=lease, period="2026-10", now=at("2026-11-01 01:00"))
    html = client_for(auditor.user).get(f"/leases/{lease.pk}/sla/?period=2026-10").content.decode()
    fingerprint = audit.published_key_info()["fingerprint"]
    assert fingerprint.startswith("sha256:")
    assert f"gpulease-verify ZY-2026-701-2026-10-audit.json --fingerprint {fingerprint}" in html
    assert f'href="/leases/{lease.pk}/audit/2026-10.json"' in html  # the month's
    assert f'href="/leases/{lease.pk}/audit/2026-11.json"' in html  # a history row's
    assert f'href="/leases/{lease.pk}/checkpoint.json?period=2026-10"' in html
    assert f'href="/leases/{lease.pk}/checkpoint.json"' in html  # the latest


def test_the_downloaded_bundle_verifies_against_the_published_key(auditor, lease):
    response = client_for(auditor.user).get(f"/leases/{lease.pk}/audit/2026-10.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert 'filename="ZY-2026-701-2026-10-audit.json"' in response["Content-Disposition"]
    document = json.loads(response.content)
    bundle = document["bundle"]
    assert bundle["period"]["period"] == "2026-10"
    assert len([run for run in bundle["runs"] if run.get("in_period", True)]) >= 3
    assert bundle["generated_at"].startswith("2026-11-20T04:00:00")  # the pinned clock
    published = audit.published_key_info()
    assert audit.verify(document, fingerprint=published["fingerprint"]) == []


def test_the_checkpoint_download_is_the_latest_or_the_months(auditor, lease):
    client = client_for(auditor.user)
    assert client.get(f"/leases/{lease.pk}/checkpoint.json").status_code == 404  # none yet
    checkpoints.create_checkpoint(lease=lease, period="2026-10", now=at("2026-11-01 01:00"))
    latest = client.get(f"/leases/{lease.pk}/checkpoint.json")
    assert latest.status_code == 200
    assert 'filename="ZY-2026-701-2026-10-checkpoint.json"' in latest["Content-Disposition"]
    document = json.loads(latest.content)
    assert document["checkpoint"]["period"] == "2026-10"
    assert document["checkpoint"]["lease"] == "ZY-2026-701"
    same = client.get(f"/leases/{lease.pk}/checkpoint.json", {"period": "2026-10"})
    assert json.loads(same.content) == document
    assert (
        client.get(f"/leases/{lease.pk}/checkpoint.json", {"period": "2026-09"}).status_code == 404
    )


def test_viewers_get_403_and_other_tenants_404_on_every_download(auditor, lease):
    checkpoints.create_checkpoint(lease=lease, period="2026-10", now=at("2026-11-01 01:00"))
    urls = [f"/leases/{lease.pk}/audit/2026-10.json", f"/leases/{lease.pk}/checkpoint.json"]
    viewer = client_for(MembershipFactory(tenant=auditor.tenant, role=Role.VIEWER).user)
    stranger = client_for(MembershipFactory(role=Role.AUDITOR).user)
    admin = client_for(MembershipFactory(tenant=auditor.tenant, role=Role.ADMIN).user)
    staff = client_for(StaffFactory())
    for url in urls:
        assert viewer.get(url).status_code == 403, url
        assert stranger.get(url).status_code == 404, url
        assert admin.get(url).status_code == 200, url
        assert staff.get(url).status_code == 200, url
        assert client_for(auditor.user).post(url).status_code == 405, url
    assert stranger.get(f"/leases/{lease.pk}/sla/").status_code == 404
    viewer_page = viewer.get(f"/leases/{lease.pk}/sla/").content.decode()
    assert "gpulease-verify" not in viewer_page.split("Month by month")[0]
    assert "/audit/" not in viewer_page and "checkpoint.json" not in viewer_page


def test_an_open_month_has_a_bundle_too(auditor, lease):
    """The current month (the clock is 2026-11-20) is open: its bundle holds what there is."""
    response = client_for(auditor.user).get(f"/leases/{lease.pk}/audit/2026-11.json")
    assert response.status_code == 200
    assert NOW.strftime("%Y-%m") == json.loads(response.content)["bundle"]["period"]["period"]
