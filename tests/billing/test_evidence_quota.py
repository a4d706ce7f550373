"""Evidence a lease may hold (billing.evidence): EVIDENCE_MAX_PER_LEASE pieces and
EVIDENCE_MAX_BYTES_PER_LEASE bytes of raw output in all; one more is a 400 with the reason,
through the API and the portal's form. The raw output is the published iperf 3.14 sample
(tests/benchmarks/fixtures/iperf3/SOURCES.md): 6,393 bytes."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.choices import Role
from billing.models import Evidence
from leases import services
from leases.choices import LeaseStatus
from tests.benchmarks.parsers import fixture_text
from tests.factories import MembershipFactory, NodeFactory, make_lease

pytestmark = pytest.mark.django_db

IPERF3 = fixture_text("iperf3", "tcp_3.14_macos.json")


@pytest.fixture
def admin():
    return MembershipFactory(role=Role.ADMIN).user


def leased(admin, reference):  # type: ignore[no-untyped-def]
    tenant = admin.memberships.get().tenant
    nodes = [NodeFactory(hostname=f"{reference.lower()}-{n}") for n in (1, 2)]
    lease = make_lease(tenant=tenant, reference=reference, nodes=nodes)
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def post(api, lease):  # type: ignore[no-untyped-def]
    hostnames = [f"{lease.reference.lower()}-{n}" for n in (1, 2)]
    body = {
        "tool": "iperf3",
        "raw_output": IPERF3,
        "nodes": hostnames,
        "measured_at": "2026-11-10T09:00:00+08:00",
    }
    return api.post(f"/api/v1/leases/{lease.pk}/evidence/", body, format="json")


@pytest.fixture
def api(admin):
    client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    client.force_authenticate(admin)
    return client


def test_a_lease_holds_at_most_so_many_pieces_of_evidence(settings, admin, api):
    settings.EVIDENCE_MAX_PER_LEASE = 2
    lease = leased(admin, "QT-1")
    assert [post(api, lease).status_code for _ in range(2)] == [201, 201]
    refused = post(api, lease)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "Lease QT-1 has reached its evidence quota (2); ask your provider to raise it."
    )
    assert Evidence.objects.filter(lease=lease).count() == 2
    # Another lease of the same tenant has its own quota.
    assert post(api, leased(admin, "QT-2")).status_code == 201


def test_a_lease_holds_at_most_so_many_bytes_of_evidence(settings, admin, api):
    settings.EVIDENCE_MAX_BYTES_PER_LEASE = 2 * 6393 + 100  # 12,886
    lease = leased(admin, "QT-3")
    assert [post(api, lease).status_code for _ in range(2)] == [201, 201]  # 12,786 bytes
    refused = post(api, lease)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["fields"] == {
        "raw_output": [
            "This output (6393 bytes) would take the evidence of lease QT-3 to 19179 bytes, "
            "over its quota of 12886 bytes; ask your provider to raise it."
        ]
    }


def test_the_portal_form_says_why_evidence_is_refused(settings, admin):
    settings.EVIDENCE_MAX_PER_LEASE = 1
    lease = leased(admin, "QT-4")
    browser = Client(HTTP_ACCEPT_LANGUAGE="en")
    browser.force_login(admin)
    form = {"tool": "iperf3", "nodes": ["qt-4-1", "qt-4-2"], "raw_output": IPERF3}
    url = f"/leases/{lease.pk}/evidence/new/"
    assert browser.post(url, form).status_code == 302
    page = browser.post(url, form)
    assert page.status_code == 400
    assert "Lease QT-4 has reached its evidence quota (1)" in page.content.decode()
