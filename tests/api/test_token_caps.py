"""Each API token has its own request budget, so the active tokens a tenant and a user may
hold are capped (API_TOKENS_PER_TENANT, API_TOKENS_PER_USER): one more is a 400 with the
reason, in the API and on the portal; a revoked or expired token frees its place."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.choices import Role
from accounts.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _caps(settings):
    settings.API_TOKENS_PER_TENANT = 4
    settings.API_TOKENS_PER_USER = 2


def issue(client, **body):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/api-tokens/", {"scopes": ["read"], **body}, format="json")


def test_a_user_may_hold_only_so_many_active_tokens(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])  # holds the world's "ci" token
    assert issue(admin).status_code == 201
    refused = issue(admin)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "alpha-admin already holds 2 active API tokens, the most one user may hold: "
        "revoke one they no longer use first."
    )
    # An expired token holds no place, nor does a revoked one.
    ApiToken.objects.filter(pk=world.alpha.token.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert issue(admin).status_code == 201
    mine = ApiToken.objects.filter(user=world.alpha.members[Role.ADMIN], revoked_at=None)
    assert admin.post(f"/api/v1/api-tokens/{mine.latest('pk').pk}/revoke/").status_code == 200
    assert issue(admin).status_code == 201


def test_a_tenant_may_hold_only_so_many_active_tokens(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])
    for role in (Role.VIEWER, Role.AUDITOR, Role.ADMIN):  # with "ci": 4, the tenant's cap
        assert issue(admin, user=world.alpha.members[role].username).status_code == 201
    refused = issue(admin, user=world.alpha.members[Role.VIEWER].username)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "alpha already has 4 active API tokens, the most a tenant may hold: revoke one it "
        "no longer uses first."
    )
    assert ApiToken.objects.filter(tenant=world.alpha.tenant).count() == 4
    # Another tenant's cap is its own.
    assert issue(client_for(world.beta.members[Role.ADMIN])).status_code == 201


def test_the_portal_refuses_a_token_beyond_the_cap_with_the_reason(world, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    browser = Client(HTTP_ACCEPT_LANGUAGE="en")
    browser.force_login(world.alpha.members[Role.ADMIN])
    assert browser.post("/tokens/", {"name": "laptop", "scopes": ["read"]}).status_code == 200
    page = browser.post("/tokens/", {"name": "one more", "scopes": ["read"]})
    assert page.status_code == 400
    assert "alpha-admin already holds 2 active API tokens" in page.content.decode()
