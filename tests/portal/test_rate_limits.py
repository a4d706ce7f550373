"""The portal's request budgets (portal.middleware) on Redis, as in production: pages per
signed-in user, and the audit bundle (built and signed on demand) tighter, one budget with
the API's bundle route. Past one: 429, Retry-After and a page in the visitor's language."""

import pytest
from rest_framework.test import APIClient

from accounts import services as tokens
from accounts.choices import Role
from billing.ingest import ingest_all
from leases import services
from leases.choices import LeaseStatus
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run
from tests.portal.support import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def auditor():
    return MembershipFactory(role=Role.AUDITOR, user__username="rl-auditor")


@pytest.fixture
def lease(auditor):
    lease = make_lease(
        tenant=auditor.tenant,
        reference="RL-2026-1",
        starts_at=at("2026-10-01 00:00"),
        nodes=NodeFactory.create_batch(2),
    )
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-10-01"))
    make_run(lease, slot=at("2026-10-10 00:00"), measured_bps=98 * 10**9)
    ingest_all(notify=False)
    return lease


def test_portal_pages_have_a_budget_per_user(redis_cache, settings, auditor, lease):
    settings.PORTAL_RATE_LIMIT = "5/min"
    browser = client_for(auditor.user)
    statuses = [browser.get(f"/leases/{lease.pk}/").status_code for _ in range(6)]
    assert statuses == [200] * 5 + [429]
    refused = browser.get("/")
    assert refused.status_code == 429
    assert 55 <= int(refused["Retry-After"]) <= 60
    assert "Too many requests" in refused.content.decode()
    # In Chinese for a Chinese reader; the budget is the user's, whatever the language.
    chinese = client_for(auditor.user, language="zh-hans").get("/")
    assert chinese.status_code == 429
    assert "请求过多" in chinese.content.decode() and "秒后重试" in chinese.content.decode()
    # Another user from the same address has their own.
    colleague = MembershipFactory(tenant=auditor.tenant, role=Role.VIEWER).user
    assert client_for(colleague).get("/").status_code == 200


def test_anonymous_portal_requests_have_a_budget_per_address(redis_cache, settings):
    settings.PORTAL_RATE_LIMIT = "3/min"
    statuses = [
        APIClient(REMOTE_ADDR="198.51.100.7").get("/accounts/login/").status_code for _ in range(4)
    ]
    assert statuses == [200] * 3 + [429]
    assert APIClient(REMOTE_ADDR="198.51.100.8").get("/accounts/login/").status_code == 200


def test_the_audit_bundle_has_a_tighter_budget_shared_with_the_api(
    redis_cache, settings, auditor, lease
):
    settings.AUDIT_BUNDLE_RATE_LIMIT = "2/hour"
    browser = client_for(auditor.user)
    url = f"/leases/{lease.pk}/audit/2026-10.json"
    assert [browser.get(url).status_code for _ in range(3)] == [200, 200, 429]
    refused = browser.get(url)
    assert 3540 <= int(refused["Retry-After"]) <= 3600  # when the first of the two ages out
    page = refused.content.decode()
    assert "each user may download only a limited number per hour" in page
    # Other pages are another budget ...
    assert browser.get(f"/leases/{lease.pk}/sla/").status_code == 200
    # ... and a token of the same user does not buy more bundles from the API.
    secret = tokens.issue_token(user=auditor.user, scopes=["read", "audit"]).secret
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en", HTTP_AUTHORIZATION=f"Bearer {secret}")
    answer = api.get(f"/api/v1/leases/{lease.pk}/audit/", {"period": "2026-10"})
    assert answer.status_code == 429
    assert answer.json()["error"]["code"] == "throttled"
    assert 3540 <= int(answer["Retry-After"]) <= 3600
    # Another auditor of the tenant still downloads.
    other = MembershipFactory(tenant=auditor.tenant, role=Role.AUDITOR).user
    assert client_for(other).get(url).status_code == 200


def test_an_api_client_is_held_to_the_bundle_budget_too(redis_cache, settings, auditor, lease):
    settings.AUDIT_BUNDLE_RATE_LIMIT = "1/hour"
    secret = tokens.issue_token(user=auditor.user, scopes=["read", "audit"]).secret
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en", HTTP_AUTHORIZATION=f"Bearer {secret}")
    path = f"/api/v1/leases/{lease.pk}/audit/"
    assert [api.get(path, {"period": "2026-10"}).status_code for _ in range(2)] == [200, 429]
    assert api.get(f"/api/v1/leases/{lease.pk}/").status_code == 200  # other routes: not this one
