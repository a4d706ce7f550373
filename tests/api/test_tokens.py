"""API tokens: shown once, stored hashed with a visible prefix; expiry and revocation
answer 401 with the reason; scopes narrow what a token may do."""

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_token_is_shown_once_and_stored_only_as_its_hash(world):
    issued = tokens.issue_token(user=world.alpha.members[Role.VIEWER], scopes=["read"])
    mark, prefix, secret = issued.secret.split("_", 2)
    assert mark == "gpl" and len(prefix) == 8 and len(secret) >= 40
    row = ApiToken.objects.get(pk=issued.token.pk)
    assert row.prefix == prefix
    assert row.secret_hash == hashlib.sha256(issued.secret.encode()).hexdigest()
    stored = [str(getattr(row, f.attname)) for f in ApiToken._meta.concrete_fields]
    assert not any(secret in value for value in stored)


@pytest.mark.parametrize("keyword", ["Bearer", "Token", "bearer"])
def test_a_token_authenticates_with_bearer_or_token(world, token_client, keyword):
    issued = tokens.issue_token(user=world.alpha.members[Role.VIEWER], scopes=["read"])
    response = token_client(issued.secret, keyword).get("/api/v1/leases/")
    assert response.status_code == 200
    assert [row["reference"] for row in response.json()["results"]] == ["ALPHA-1"]
    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda secret: secret[:-2] + "xx", "Unknown API token."),
        (lambda secret: "gpl_00000000_" + secret.split("_", 2)[2], "Unknown API token."),
        (lambda secret: "not-a-token", "malformed"),
        (lambda secret: secret + " extra", "Authorization header"),
    ],
)
def test_a_wrong_token_answers_401_with_the_reason(world, token_client, mangle, reason):
    issued = tokens.issue_token(user=world.alpha.members[Role.VIEWER], scopes=["read"])
    response = token_client(mangle(issued.secret)).get("/api/v1/leases/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    error = response.json()["error"]
    assert error["code"] == "authentication_failed"
    assert reason in error["message"]


def test_an_expired_token_answers_401(world, token_client):
    issued = tokens.issue_token(
        user=world.alpha.members[Role.VIEWER],
        scopes=["read"],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    ApiToken.objects.filter(pk=issued.token.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = token_client(issued.secret).get("/api/v1/leases/")
    assert response.status_code == 401
    assert "expired" in response.json()["error"]["message"]


def test_a_revoked_token_answers_401_and_revocation_is_through_the_api(world, token_client):
    viewer = world.alpha.members[Role.VIEWER]
    issued = tokens.issue_token(user=viewer, scopes=["read"])
    client = token_client(issued.secret)
    assert client.get("/api/v1/leases/").status_code == 200
    admin = token_client(
        tokens.issue_token(user=world.alpha.members[Role.ADMIN], scopes=["read", "write"]).secret
    )
    revoked = admin.post(f"/api/v1/api-tokens/{issued.token.pk}/revoke/")
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked"
    response = client.get("/api/v1/leases/")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_an_inactive_users_token_answers_401(world, token_client):
    viewer = world.alpha.members[Role.VIEWER]
    issued = tokens.issue_token(user=viewer, scopes=["read"])
    viewer.is_active = False
    viewer.save()
    assert token_client(issued.secret).get("/api/v1/leases/").status_code == 401


def test_scopes_limit_a_token_beyond_the_role(world, token_client):
    admin = world.alpha.members[Role.ADMIN]
    lease = world.alpha.lease
    read_only = token_client(tokens.issue_token(user=admin, scopes=["read"]).secret)
    assert read_only.get(f"/api/v1/leases/{lease.pk}/").status_code == 200
    refused = read_only.post(f"/api/v1/leases/{lease.pk}/run-now/", {}, format="json")
    assert refused.status_code == 403
    assert "write scope" in refused.json()["error"]["message"]
    audit_only = token_client(tokens.issue_token(user=admin, scopes=["audit"]).secret)
    response = audit_only.get("/api/v1/leases/")
    assert response.status_code == 403
    assert "read scope" in response.json()["error"]["message"]
    writer = token_client(tokens.issue_token(user=admin, scopes=["read", "write"]).secret)
    assert (
        writer.post(
            f"/api/v1/leases/{lease.pk}/run-now/", {"kinds": ["link"]}, format="json"
        ).status_code
        == 202
    )


def test_creating_a_token_through_the_api_shows_it_once(world, client_for, token_client):
    admin = client_for(world.alpha.members[Role.ADMIN])
    response = admin.post(
        "/api/v1/api-tokens/",
        {"name": "finance", "scopes": ["read", "audit"], "user": "alpha-auditor"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["token"].startswith(f"gpl_{body['prefix']}_")
    assert body["user"] == "alpha-auditor" and body["scopes"] == ["read", "audit"]
    again = admin.get(f"/api/v1/api-tokens/{body['id']}/").json()
    assert "token" not in again and again["prefix"] == body["prefix"]
    listed = admin.get("/api/v1/api-tokens/", {"prefix": body["prefix"]}).json()["results"]
    assert [row["id"] for row in listed] == [body["id"]]
    assert token_client(body["token"]).get("/api/v1/invoices/").status_code == 200


def test_a_tenant_admin_cannot_issue_tokens_to_another_tenants_users(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])
    other = admin.post(
        "/api/v1/api-tokens/", {"scopes": ["read"], "user": "beta-viewer"}, format="json"
    )
    nobody = admin.post(
        "/api/v1/api-tokens/", {"scopes": ["read"], "user": "no-such-user"}, format="json"
    )
    assert other.status_code == nobody.status_code == 400
    # The same sentence for "not yours" and "does not exist": nothing leaks.
    assert other.json()["error"]["fields"]["user"][0].replace("beta-viewer", "X") == (
        nobody.json()["error"]["fields"]["user"][0].replace("no-such-user", "X")
    )


def test_viewers_and_auditors_cannot_issue_tokens(world, client_for):
    for role in (Role.VIEWER, Role.AUDITOR):
        response = client_for(world.alpha.members[role]).post(
            "/api/v1/api-tokens/", {"scopes": ["read"]}, format="json"
        )
        assert response.status_code == 403


def test_create_api_token_prints_the_token_once(world, token_client):
    out, err = StringIO(), StringIO()
    call_command(
        "create_api_token",
        "alpha-auditor",
        "--scopes",
        "read,audit",
        "--name",
        "script",
        "--expires-days",
        "30",
        stdout=out,
        stderr=err,
    )
    secret = out.getvalue().strip()
    assert secret.startswith("gpl_") and "\n" not in secret
    token = ApiToken.objects.get(prefix=secret.split("_")[1])
    assert token.scopes == ["read", "audit"] and token.name == "script"
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    assert secret not in err.getvalue()
    assert token_client(secret).get("/api/v1/leases/").status_code == 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nobody", "--scopes", "read"], "No user"),
        (["alpha-admin", "--scopes", "read,root"], "Unknown scope"),
        (["alpha-admin", "--scopes", ","], "at least one scope"),
        (["alpha-admin", "--expires-days", "0"], "--expires-days"),
    ],
)
def test_create_api_token_refuses_bad_input(world, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("create_api_token", *args, stdout=StringIO(), stderr=StringIO())
