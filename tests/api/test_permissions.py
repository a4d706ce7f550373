"""The role matrix: for each endpoint, what provider staff, a tenant admin, a viewer, an
auditor, a user of no tenant and an anonymous caller get, on the tenant's own objects."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

pytestmark = pytest.mark.django_db

WHO = ("staff", "admin", "viewer", "auditor", "outsider", "anonymous")


@dataclass(frozen=True)
class Row:
    method: str
    url: Callable[[Any], str]
    expect: tuple[int, int, int, int, int, int]  # in the order of WHO
    body: Callable[[Any], dict[str, Any]] = lambda world: {}


def lease_url(suffix: str = "") -> Callable[[Any], str]:
    return lambda world: f"/api/v1/leases/{world.alpha.lease.pk}/{suffix}"


def new_lease(world: Any) -> dict[str, Any]:
    return {
        "tenant": "alpha",
        "reference": "ALPHA-NEW",
        "starts_at": "2027-01-01T00:00:00+08:00",
        "terms": {
            "contracted_bandwidth_gbps": "100",
            "technology": "roce",
            "billing_mode": "monthly",
            "node_rent_per_month": "45000.00",
        },
    }


MATRIX = {
    "tenants list": Row("get", lambda w: "/api/v1/tenants/", (200, 200, 200, 200, 200, 401)),
    "tenant detail": Row(
        "get", lambda w: f"/api/v1/tenants/{w.alpha.tenant.pk}/", (200, 200, 200, 200, 404, 401)
    ),
    "sites list": Row("get", lambda w: "/api/v1/sites/", (200, 200, 200, 200, 200, 401)),
    "site create": Row(
        "post",
        lambda w: "/api/v1/sites/",
        (201, 403, 403, 403, 403, 401),
        lambda w: {"name": "Foshan", "code": "fs-1", "city": "Foshan"},
    ),
    "fabric detail": Row(
        "get",
        lambda w: f"/api/v1/fabrics/{w.alpha.nodes[0].leaf_switch.fabric_id}/",
        (200, 200, 200, 200, 404, 401),
    ),
    "fabric update": Row(
        "patch",
        lambda w: f"/api/v1/fabrics/{w.alpha.nodes[0].leaf_switch.fabric_id}/",
        (200, 403, 403, 403, 404, 401),
        lambda w: {"adaptive_routing": True},
    ),
    "node detail": Row(
        "get", lambda w: f"/api/v1/nodes/{w.alpha.nodes[0].pk}/", (200, 200, 200, 200, 404, 401)
    ),
    "leases list": Row("get", lambda w: "/api/v1/leases/", (200, 200, 200, 200, 200, 401)),
    "lease detail": Row("get", lease_url(), (200, 200, 200, 200, 404, 401)),
    "lease create": Row(
        "post", lambda w: "/api/v1/leases/", (201, 403, 403, 403, 403, 401), new_lease
    ),
    # Staff passes the permission; the service then refuses: an active lease cannot be
    # cancelled (400 with its sentence).
    "lease cancel": Row("post", lease_url("cancel/"), (400, 403, 403, 403, 404, 401)),
    "lease run-now": Row(
        "post",
        lease_url("run-now/"),
        (202, 202, 403, 403, 404, 401),
        lambda w: {"kinds": ["link"]},
    ),
    "lease sla": Row(
        "get",
        lambda w: f"/api/v1/leases/{w.alpha.lease.pk}/sla/?period=2026-11",
        (200, 200, 200, 200, 404, 401),
    ),
    "probe runs list": Row("get", lambda w: "/api/v1/probe-runs/", (200, 200, 200, 200, 200, 401)),
    "probe run raw": Row(
        "get",
        lambda w: f"/api/v1/probe-runs/{w.alpha.runs[0].pk}/raw/",
        (200, 200, 200, 200, 404, 401),
    ),
    "incident detail": Row(
        "get",
        lambda w: f"/api/v1/incidents/{w.alpha.incident.pk}/",
        (200, 200, 200, 200, 404, 401),
    ),
    "invoice detail": Row(
        "get",
        lambda w: f"/api/v1/invoices/{w.alpha.invoice.pk}/",
        (200, 200, 200, 200, 404, 401),
    ),
    "token create": Row(
        "post",
        lambda w: "/api/v1/api-tokens/",
        (201, 201, 403, 403, 403, 401),
        lambda w: {"scopes": ["read"]},
    ),
    # The admin's token: only its owner, the tenant's admins and staff can see it.
    "token detail": Row(
        "get",
        lambda w: f"/api/v1/api-tokens/{w.alpha.token.pk}/",
        (200, 200, 404, 404, 404, 401),
    ),
    "token revoke": Row(
        "post",
        lambda w: f"/api/v1/api-tokens/{w.alpha.token.pk}/revoke/",
        (200, 200, 404, 404, 404, 401),
    ),
}


def _who(world: Any, name: str) -> Any:
    if name == "staff":
        return world.staff
    if name == "outsider":
        return world.outsider
    if name == "anonymous":
        return None
    return world.alpha.members[name]


@pytest.mark.parametrize("endpoint", MATRIX)
def test_role_matrix(world, client_for, endpoint):
    row = MATRIX[endpoint]
    got = {}
    # Refusals first, so that an allowed write does not change what the others see.
    order = sorted(range(len(WHO)), key=lambda i: row.expect[i] < 300)
    for index in order:
        client = client_for(_who(world, WHO[index]))
        response = getattr(client, row.method)(row.url(world), row.body(world), format="json")
        got[WHO[index]] = response.status_code
        if response.status_code >= 400:
            assert set(response.json()) == {"error"}, response.content
    assert got == dict(zip(WHO, row.expect, strict=True))


def test_an_auditor_reads_everything_of_their_tenant_but_writes_nothing(world, client_for):
    auditor = client_for(world.alpha.members["auditor"])
    for url in ("/api/v1/leases/", "/api/v1/invoices/", "/api/v1/incidents/"):
        assert auditor.get(url).json()["count"] == 1
    response = auditor.post(f"/api/v1/leases/{world.alpha.lease.pk}/end/")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
