"""API tokens page: list, create (the whole token shown once, in that response only),
revoke; the token shown works as a Bearer token on the API and stops working when revoked."""

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken
from leases import services
from leases.choices import LeaseStatus
from tests.factories import MembershipFactory, NodeFactory, at, make_lease
from tests.portal.support import client_for

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r"gpl_[0-9a-f]{8}_[A-Za-z0-9_-]{43}")


def api_get(secret: str, path: str = "/api/v1/leases/"):
    return Client(HTTP_ACCEPT_LANGUAGE="en").get(path, HTTP_AUTHORIZATION=f"Bearer {secret}")


@pytest.fixture
def admin():
    return MembershipFactory(role=Role.ADMIN)


@pytest.fixture
def lease(admin):
    lease = make_lease(tenant=admin.tenant, reference="ZY-2026-301", nodes=[NodeFactory()])
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))


def create(client, **fields):
    data = {"name": "ci", "scopes": ["read"]}
    data.update(fields)
    return client.post("/tokens/", data)


def test_a_created_token_is_shown_once_and_authenticates_on_the_api(admin, lease):
    client = client_for(admin.user)
    response = create(client, name="nightly report", scopes=["read", "audit"])
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    secrets = set(TOKEN.findall(page))
    assert len(secrets) == 1
    secret = secrets.pop()
    token = ApiToken.objects.get()
    assert token.user == admin.user and token.name == "nightly report"
    assert token.scopes == ["read", "audit"]
    assert secret.startswith(f"gpl_{token.prefix}_") and token.matches(secret)

    answer = api_get(secret)
    assert answer.status_code == 200
    assert "ZY-2026-301" in answer.content.decode()

    # Not kept anywhere the user could fetch it again: not in the session, not on the page.
    assert secret not in repr(dict(client.session.items()))
    later = client.get("/tokens/").content.decode()
    assert secret not in later and not TOKEN.search(later)
    assert f"gpl_{token.prefix}_…" in later
    assert "nightly report" in later and "read, audit" in later


def test_a_revoked_token_stops_working(admin, lease):
    client = client_for(admin.user)
    secret = TOKEN.search(create(client).content.decode()).group(0)
    token = ApiToken.objects.get()
    assert api_get(secret).status_code == 200
    response = client.post(f"/tokens/{token.pk}/revoke/")
    assert response.status_code == 302 and response["Location"] == "/tokens/"
    token.refresh_from_db()
    assert token.revoked_at is not None
    answer = api_get(secret)
    assert answer.status_code == 401
    assert "This API token was revoked" in answer.content.decode()
    page = client.get("/tokens/").content.decode()
    assert 'data-state="revoked"' in page
    assert f"/tokens/{token.pk}/revoke/" not in page  # nothing left to revoke


def test_revoke_is_post_only(admin):
    issued = tokens.issue_token(user=admin.user, scopes=["read"])
    assert client_for(admin.user).get(f"/tokens/{issued.token.pk}/revoke/").status_code == 405


def test_another_tenants_token_cannot_be_revoked_or_seen(admin):
    stranger = MembershipFactory(role=Role.ADMIN)
    theirs = tokens.issue_token(user=stranger.user, scopes=["read"]).token
    client = client_for(admin.user)
    assert client.post(f"/tokens/{theirs.pk}/revoke/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    assert theirs.prefix not in client.get("/tokens/").content.decode()


def test_a_tenant_admin_sees_and_revokes_the_members_tokens(admin):
    viewer = MembershipFactory(tenant=admin.tenant, role=Role.VIEWER)
    theirs = tokens.issue_token(
        user=viewer.user, scopes=["read"], expires_at=timezone.now() + timedelta(days=30)
    ).token
    client = client_for(admin.user)
    page = client.get("/tokens/").content.decode()
    assert theirs.prefix in page and viewer.user.username in page
    assert client.post(f"/tokens/{theirs.pk}/revoke/").status_code == 302
    theirs.refresh_from_db()
    assert theirs.revoked_at is not None


def test_a_viewer_sees_only_their_own_tokens_and_cannot_create_one(admin):
    viewer = MembershipFactory(tenant=admin.tenant, role=Role.VIEWER)
    own = tokens.issue_token(user=viewer.user, scopes=["read"]).token
    admins = tokens.issue_token(user=admin.user, scopes=["read"]).token
    client = client_for(viewer.user)
    page = client.get("/tokens/").content.decode()
    assert own.prefix in page and admins.prefix not in page
    assert "Only a tenant admin, an auditor or provider staff can create tokens." in page
    assert create(client).status_code == 403
    assert ApiToken.objects.count() == 2
    # Their own token they may revoke (as in the API); the admin's is not theirs to see.
    assert client.post(f"/tokens/{admins.pk}/revoke/").status_code == 404
    assert client.post(f"/tokens/{own.pk}/revoke/").status_code == 302


def test_a_token_needs_a_scope_and_a_future_expiry(admin):
    client = client_for(admin.user)
    response = create(client, scopes=[])
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    response = create(client, expires_at="2020-01-01T00:00")
    assert response.status_code == 400
    assert "A token must expire in the future." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_expiry_is_read_in_the_tenants_time_zone(admin):
    # 08:00 on a day about 200 days ahead, on Shanghai's clock (within the 365-day maximum).
    day = (timezone.now() + timedelta(days=200)).astimezone(ZoneInfo("Asia/Shanghai"))
    create(client_for(admin.user), expires_at=f"{day:%Y-%m-%d}T08:00")
    assert ApiToken.objects.get().expires_at == at(f"{day:%Y-%m-%d} 08:00")


def test_an_expiry_beyond_the_maximum_is_refused_in_a_sentence(admin):
    response = create(client_for(admin.user), expires_at="2099-01-01T08:00")
    assert response.status_code == 400
    assert "A token may expire at the latest at" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_member_of_two_tenants_chooses_the_tenant_the_token_acts_for(admin, lease):
    """The holder is an admin of the lease's tenant and a viewer of another: without a
    tenant the form refuses; with the other tenant's slug the token acts for it alone, with
    the viewer's scopes, and reads none of the first tenant's leases."""
    other = MembershipFactory(user=admin.user, role=Role.VIEWER, tenant__slug="other-co")
    client = client_for(admin.user)
    refused = create(client)
    assert refused.status_code == 400
    assert "This field is required." in refused.content.decode()
    made = create(client, tenant="other-co")
    assert made.status_code == 200
    token = ApiToken.objects.get()
    assert (token.tenant, token.role, token.issuer) == (other.tenant, Role.VIEWER, admin.user)
    (secret,) = set(TOKEN.findall(made.content.decode()))
    assert api_get(secret).json()["results"] == []  # the lease is the first tenant's
    assert create(client, tenant="other-co", scopes=["write"]).status_code == 400  # a viewer
