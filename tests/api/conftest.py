"""A small world for API tests: two tenants (alpha, beta), each with an admin, a viewer and
an auditor, an active lease on two nodes, probe runs, an incident and an invoice; provider
staff; a user who belongs to no tenant."""

from dataclasses import dataclass, field
from typing import Any

import pytest
import zstandard
from django.core.cache import cache
from rest_framework.test import APIClient

from accounts import services as tokens
from accounts.choices import Role
from benchmarks.models import RawOutput
from billing import invoicing
from incidents.models import Incident
from leases import services
from leases.choices import LeaseStatus
from tests.factories import (
    MembershipFactory,
    NicPortFactory,
    NodeFactory,
    StaffFactory,
    SwitchFactory,
    TenantFactory,
    UserFactory,
    at,
    make_lease,
    make_run,
)


@dataclass
class Side:
    tenant: Any
    members: dict[str, Any] = field(default_factory=dict)  # role -> user
    lease: Any = None
    nodes: list[Any] = field(default_factory=list)
    runs: list[Any] = field(default_factory=list)
    incident: Any = None
    invoice: Any = None
    evidence: Any = None
    dispute: Any = None
    token: Any = None  # an ApiToken of the admin


@dataclass
class World:
    alpha: Side
    beta: Side
    staff: Any
    outsider: Any


# Valid 统一社会信用代码 (tests/leases/test_uscc.py works their check characters by hand).
TAX_IDS = {"alpha": "91110108551385082Q", "beta": "9144030000000000G0"}


def build_side(slug: str) -> Side:
    tenant = TenantFactory(slug=slug, name=slug.title(), tax_id=TAX_IDS.get(slug, ""))
    side = Side(tenant=tenant)
    for role in Role.values:
        side.members[role] = MembershipFactory(
            tenant=tenant, role=role, user__username=f"{slug}-{role}"
        ).user
    leaf = SwitchFactory(fabric__site__code=f"site-{slug}", fabric__site__name=f"Site {slug}")
    side.nodes = [NodeFactory(leaf_switch=leaf, hostname=f"{slug}-n{i}") for i in (1, 2)]
    for node in side.nodes:
        NicPortFactory(node=node)
    side.lease = make_lease(tenant=tenant, nodes=side.nodes, reference=f"{slug.upper()}-1")
    services.transition_lease(lease=side.lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01 00:00"))
    side.runs = [
        make_run(
            side.lease,
            slot=at(f"2026-11-02 {hour:02d}:00"),
            nodes=side.nodes,
            measured_bps=98 * 10**9,  # at or above 95% of 100 Gbps: a pass
            verdict="pass",
            target=f"{slug}-n1>{slug}-n2",
        )
        for hour in range(3)
    ]
    side.runs[0].raw_output = f"iperf3 output of {slug}\n"
    side.runs[0].save(update_fields=["raw_sha256"])
    # An insider rewrote the stored text afterwards and left the run's hash as it was.
    RawOutput.objects.filter(sha256=side.runs[0].raw_sha256).update(
        data=zstandard.ZstdCompressor().compress(f"raw output of {slug}\n".encode())
    )
    side.incident = Incident.objects.create(
        lease=side.lease,
        kind="throughput",
        target=side.runs[0].target,
        pattern="ring",
        opened_at=side.runs[0].slot_at,
        rule=side.runs[0].rule,
        terms=side.runs[0].terms,
    )
    side.incident.runs.set(side.runs[:2])
    side.invoice = invoicing.draft_invoice(
        tenant=tenant, period="2026-11", now=at("2026-12-02 00:00")
    )
    side.token = tokens.issue_token(
        user=side.members[Role.ADMIN], scopes=["read", "write", "audit"], name="ci"
    ).token
    return side


def build_world() -> World:
    return World(
        alpha=build_side("alpha"),
        beta=build_side("beta"),
        staff=StaffFactory(username="provider"),
        outsider=UserFactory(username="outsider"),
    )


@pytest.fixture
def world(db) -> World:
    return build_world()


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client_for():
    """client_for(user) is an APIClient logged in as user (None: anonymous)."""

    def make(user: Any | None) -> APIClient:
        client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture
def token_client():
    """token_client(secret) sends Authorization: Bearer <secret>."""

    def make(secret: str, keyword: str = "Bearer") -> APIClient:
        client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
        client.credentials(HTTP_AUTHORIZATION=f"{keyword} {secret}")
        return client

    return make
