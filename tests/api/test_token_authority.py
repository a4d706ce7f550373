"""Who may hold, issue, list and revoke API tokens, tried as a hostile tenant admin would.

Each test here answers one finding of the access-control review: a tenant admin who
reaches provider staff or a second tenant's users through their tokens, a write-only token
that mints an all-scopes token, tokens that never expire, and tokens that outlive the
membership that granted them."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken, Membership
from tests.factories import MembershipFactory, StaffFactory


@pytest.fixture
def staff_member(world):
    """A provider staff account that (by an operator's slip, before the rule existed) also
    holds an admin membership in alpha: it must stay out of alpha's admin's reach."""
    staff = StaffFactory(username="ops-engineer")
    Membership.objects.create(user=staff, tenant=world.alpha.tenant, role=Role.ADMIN)
    return staff


@pytest.fixture
def two_tenant_user(world):
    """A viewer of alpha who is also beta's admin."""
    user = world.alpha.members[Role.VIEWER]
    MembershipFactory(user=user, tenant=world.beta.tenant, role=Role.ADMIN)
    return user


def test_a_tenant_admin_cannot_issue_a_token_for_provider_staff(world, client_for, staff_member):
    admin = client_for(world.alpha.members[Role.ADMIN])
    response = admin.post(
        "/api/v1/api-tokens/",
        {"scopes": ["read", "write", "audit"], "user": staff_member.username},
        format="json",
    )
    assert response.status_code == 400
    assert "members whose tokens you manage" in response.json()["error"]["fields"]["user"][0]
    assert not ApiToken.objects.filter(user=staff_member).exists()


def test_a_tenant_admin_neither_lists_nor_revokes_staff_tokens(world, client_for, staff_member):
    staff_token = tokens.issue_token(user=staff_member, scopes=["read", "write"]).token
    admin = client_for(world.alpha.members[Role.ADMIN])
    listed = admin.get("/api/v1/api-tokens/").json()["results"]
    assert staff_token.pk not in {row["id"] for row in listed}
    assert admin.get(f"/api/v1/api-tokens/{staff_token.pk}/").status_code == 404
    assert admin.post(f"/api/v1/api-tokens/{staff_token.pk}/revoke/").status_code == 404
    staff_token.refresh_from_db()
    assert staff_token.revoked_at is None


def test_a_tenant_admin_cannot_reach_a_user_who_also_belongs_to_another_tenant(
    world, client_for, token_client, two_tenant_user
):
    admin = client_for(world.alpha.members[Role.ADMIN])
    issued = admin.post(
        "/api/v1/api-tokens/", {"scopes": ["read"], "user": two_tenant_user.username}, format="json"
    )
    assert issued.status_code == 400
    # Their own token for beta is invisible and unrevokable for alpha's admin...
    theirs = tokens.issue_token(
        user=two_tenant_user, scopes=["read"], tenant=world.beta.tenant
    ).token
    listed = admin.get("/api/v1/api-tokens/").json()["results"]
    assert theirs.pk not in {row["id"] for row in listed}
    assert admin.post(f"/api/v1/api-tokens/{theirs.pk}/revoke/").status_code == 404
    # ...their token for alpha is alpha's: its admin sees and revokes it.
    in_alpha = tokens.issue_token(
        user=two_tenant_user, scopes=["read"], tenant=world.alpha.tenant
    ).token
    listed = admin.get("/api/v1/api-tokens/").json()["results"]
    assert in_alpha.pk in {row["id"] for row in listed}
    assert admin.post(f"/api/v1/api-tokens/{in_alpha.pk}/revoke/").status_code == 200
    # Alpha's admin still manages alpha-only members.
    auditor = world.alpha.members[Role.AUDITOR]
    ok = admin.post(
        "/api/v1/api-tokens/", {"scopes": ["read"], "user": auditor.username}, format="json"
    )
    assert ok.status_code == 201


def test_a_write_only_token_cannot_mint_a_token_with_more_scopes(world, token_client):
    write_only = tokens.issue_token(user=world.alpha.members[Role.ADMIN], scopes=["write"])
    client = token_client(write_only.secret)
    response = client.post(
        "/api/v1/api-tokens/", {"scopes": ["read", "write", "audit"]}, format="json"
    )
    assert response.status_code == 400
    assert "cannot carry the read, audit scope(s)" in response.json()["error"]["message"]
    # Within its own scopes it may, and the new token dies no later than its parent.
    same = client.post("/api/v1/api-tokens/", {"scopes": ["write"]}, format="json")
    assert same.status_code == 201
    child = ApiToken.objects.get(pk=same.json()["id"])
    assert child.expires_at <= write_only.token.expires_at
    later = write_only.token.expires_at + timedelta(days=1)
    longer = client.post(
        "/api/v1/api-tokens/",
        {"scopes": ["write"], "expires_at": later.isoformat()},
        format="json",
    )
    assert longer.status_code == 400


def test_a_token_for_a_viewer_holds_no_more_than_a_viewer_may(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])
    response = admin.post(
        "/api/v1/api-tokens/",
        {"scopes": ["read", "write"], "user": world.alpha.members[Role.VIEWER].username},
        format="json",
    )
    assert response.status_code == 400
    assert "it may hold only read" in response.json()["error"]["message"]


def test_every_token_expires_by_default_and_within_the_maximum(world, settings):
    settings.API_TOKEN_DEFAULT_DAYS, settings.API_TOKEN_MAX_DAYS = 90, 365
    admin = world.alpha.members[Role.ADMIN]
    now = timezone.now()
    default = tokens.issue_token(user=admin, scopes=["read"], now=now).token
    assert default.expires_at == now + timedelta(days=90)
    with pytest.raises(ValidationError, match="expire at the latest"):
        tokens.issue_token(user=admin, scopes=["read"], expires_at=now + timedelta(days=366))
    ceiling = tokens.issue_token(
        user=admin, scopes=["read"], expires_at=now + timedelta(days=365), now=now
    )
    assert ceiling.token.expires_at == now + timedelta(days=365)


def test_deactivating_a_user_revokes_their_tokens(world):
    viewer = world.alpha.members[Role.VIEWER]
    token = tokens.issue_token(user=viewer, scopes=["read"]).token
    viewer.is_active = False
    viewer.save()
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_removing_a_membership_revokes_the_members_tokens(world, token_client):
    auditor = world.alpha.members[Role.AUDITOR]
    issued = tokens.issue_token(user=auditor, scopes=["read", "audit"])
    Membership.objects.get(user=auditor, tenant=world.alpha.tenant).delete()
    response = token_client(issued.secret).get("/api/v1/leases/")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_provider_staff_cannot_be_made_a_tenant_member(world):
    membership = Membership(user=world.staff, tenant=world.alpha.tenant, role=Role.VIEWER)
    with pytest.raises(ValidationError, match="staff cannot be members of a tenant"):
        membership.full_clean()
