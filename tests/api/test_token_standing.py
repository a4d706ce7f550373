"""Tokens follow the standing of who holds and who issued them, and provider staff never act
as a tenant (issue 30, item 1): each finding of the red team, replayed over the API."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIRequestFactory

from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken, Membership
from api.authentication import ApiTokenAuthentication
from leases.models import TermsAmendment
from leases.services import propose_retroactive_amendment
from tests.factories import MembershipFactory, at

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"


def references(response) -> set[str]:  # type: ignore[no-untyped-def]
    return {row["reference"] for row in response.json()["results"]}


def test_staff_cannot_mint_a_token_for_a_tenant_user(world, client_for):
    staff = client_for(world.staff)
    admin = world.alpha.members[Role.ADMIN]
    response = staff.post(
        "/api/v1/api-tokens/", {"scopes": ["read", "write"], "user": admin.username}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["error"]["message"] == (
        "Provider staff cannot issue a token for alpha-admin: it would act as a user of the "
        "tenant, and only the tenant's own admins issue those."
    )
    assert not ApiToken.objects.filter(user=admin, issuer=world.staff).exists()
    # Their own token acts for the provider, for no tenant.
    own = staff.post("/api/v1/api-tokens/", {"scopes": ["read"]}, format="json")
    assert own.status_code == 201
    assert (own.json()["tenant"], own.json()["role"], own.json()["issuer"]) == (
        None,
        "",
        "provider",
    )


def test_staff_with_a_tenant_admin_membership_cannot_acknowledge(world, client_for):
    """A staff account with an admin membership made without Membership.clean (legacy
    data) is still refused: 403, and the amendment stays pending."""
    Membership.objects.create(user=world.staff, tenant=world.alpha.tenant, role=Role.ADMIN)
    amendment = propose_retroactive_amendment(
        lease=world.alpha.lease,
        effective_from=at("2026-11-10 00:00"),
        changes={"credit_cap_percent": "0"},
        reason="Cap waived.",
    )
    response = client_for(world.staff).post(
        f"/api/v1/terms-amendments/{amendment.pk}/acknowledge/", {"reason": "ok"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["error"]["message"].endswith(
        "Provider staff never act as a tenant user."
    )
    amendment.refresh_from_db()
    assert amendment.status == TermsAmendment.Status.PENDING


def test_staff_cannot_open_a_dispute(world, client_for):
    body = {"lease": world.alpha.lease.pk, "reason": "ours", "probe_run": world.alpha.runs[1].pk}
    response = client_for(world.staff).post("/api/v1/disputes/", body, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == (
        "Only a tenant admin of Alpha can open a dispute on lease ALPHA-1. Provider staff "
        "never act as a tenant user."
    )
    admin = client_for(world.alpha.members[Role.ADMIN])
    assert admin.post("/api/v1/disputes/", body, format="json").status_code == 201


def test_a_kept_token_dies_when_its_holder_moves_tenant(world, token_client):
    viewer = world.alpha.members[Role.VIEWER]
    kept = tokens.issue_token(user=viewer, scopes=["read"]).secret
    assert references(token_client(kept).get(LEASES)) == {"ALPHA-1"}
    membership = Membership.objects.get(user=viewer)
    membership.tenant = world.beta.tenant  # staff move the membership in the admin
    membership.save()
    response = token_client(kept).get(LEASES)
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_a_kept_token_dies_when_its_holder_becomes_staff(world, token_client):
    viewer = world.alpha.members[Role.VIEWER]
    kept = tokens.issue_token(user=viewer, scopes=["read"]).secret
    viewer.is_staff = True
    viewer.save()
    response = token_client(kept).get(LEASES)
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_the_request_check_catches_what_no_signal_saw(world, token_client):
    """Standing changed by raw UPDATEs (no signals): the next request refuses the token with
    the reason, and revokes it."""
    viewer = world.alpha.members[Role.VIEWER]
    issued = tokens.issue_token(user=viewer, scopes=["read"])
    get_user_model().objects.filter(pk=viewer.pk).update(is_staff=True)
    response = token_client(issued.secret).get(LEASES)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == (
        "This API token no longer holds: its holder alpha-viewer has become provider staff "
        "since it was issued. It is revoked now."
    )
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is not None

    auditor = world.alpha.members[Role.AUDITOR]
    moved = tokens.issue_token(user=auditor, scopes=["read"])
    Membership.objects.filter(user=auditor).update(tenant=world.beta.tenant)
    response = token_client(moved.secret).get(LEASES)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == (
        "This API token no longer holds: its holder alpha-auditor is no longer auditor of "
        "alpha. It is revoked now."
    )


def test_a_token_minted_by_an_admin_dies_with_the_admins_standing(world, token_client):
    admin, viewer = world.alpha.members[Role.ADMIN], world.alpha.members[Role.VIEWER]
    minted = tokens.issue_token(user=viewer, scopes=["read"], issuer=admin)
    assert (minted.token.issuer, minted.token.tenant, minted.token.role) == (
        admin,
        world.alpha.tenant,
        Role.VIEWER,
    )
    Membership.objects.filter(user=admin).update(role=Role.VIEWER)  # no signal: raw update
    response = token_client(minted.secret).get(LEASES)
    assert response.status_code == 401
    assert (
        "alpha-admin, who issued it, may no longer issue it"
        in (response.json()["error"]["message"])
    )
    # Through the admin (the signal): demoting a second admin revokes what they minted.
    second = MembershipFactory(tenant=world.alpha.tenant, role=Role.ADMIN)
    theirs = tokens.issue_token(user=viewer, scopes=["read"], issuer=second.user).token
    second.role = Role.VIEWER
    second.save()
    theirs.refresh_from_db()
    assert theirs.revoked_at is not None


def test_a_token_acts_for_its_tenant_only_when_the_holder_joins_another(world, token_client):
    viewer = world.alpha.members[Role.VIEWER]
    kept = tokens.issue_token(user=viewer, scopes=["read"]).secret
    MembershipFactory(user=viewer, tenant=world.beta.tenant, role=Role.ADMIN)
    client = token_client(kept)
    assert references(client.get(LEASES)) == {"ALPHA-1"}
    assert client.get(f"{LEASES}{world.beta.lease.pk}/").status_code == 404
    assert client.get(f"/api/v1/invoices/{world.beta.invoice.pk}/").status_code == 404


def test_a_tenant_admin_sees_and_revokes_every_token_of_the_tenant(world, client_for):
    """Even a token the admin did not mint, of a member who also belongs elsewhere."""
    viewer = world.alpha.members[Role.VIEWER]
    MembershipFactory(user=viewer, tenant=world.beta.tenant, role=Role.VIEWER)
    theirs = tokens.issue_token(user=viewer, scopes=["read"], tenant=world.alpha.tenant).token
    admin = client_for(world.alpha.members[Role.ADMIN])
    listed = admin.get("/api/v1/api-tokens/", {"tenant": "alpha"}).json()["results"]
    row = next(row for row in listed if row["id"] == theirs.pk)
    assert (row["user"], row["issuer"], row["tenant"], row["role"]) == (
        "alpha-viewer",
        "alpha-viewer",
        "alpha",
        "viewer",
    )
    assert admin.post(f"/api/v1/api-tokens/{theirs.pk}/revoke/").json()["state"] == "revoked"


def test_the_standing_check_costs_no_query_of_its_own(world):
    """Finding the token and checking its standing is one query (the touch of last_used_at
    is skipped within its minute)."""
    issued = tokens.issue_token(user=world.alpha.members[Role.VIEWER], scopes=["read"])
    request = APIRequestFactory().get(LEASES, HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    ApiTokenAuthentication().authenticate(request)  # the first use writes last_used_at
    with CaptureQueriesContext(connection) as queries:
        user, token = ApiTokenAuthentication().authenticate(request)
    assert (user, token) == (world.alpha.members[Role.VIEWER], issued.token)
    assert len(queries) == 1
