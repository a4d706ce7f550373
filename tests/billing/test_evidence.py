"""Customer evidence (parsed by the probes' parsers, judged by their verdicts) and disputes
(opened by the tenant, decided by the provider, credited on the next invoice).

The raw outputs are the published tool outputs under tests/benchmarks/fixtures/ (sources
in each folder's SOURCES.md)."""

from decimal import Decimal as D
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from accounts.choices import Role
from billing import evidence, invoicing
from billing import services as services_billing
from billing.choices import LineKind
from billing.models import DisputeEvent, DisputeState
from leases import services
from leases.choices import LeaseStatus
from tests.factories import MembershipFactory, NodeFactory, StaffFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent.parent / "benchmarks" / "fixtures"
NOVEMBER = "2026-11"
MEASURED = at("2026-11-10 09:00")


def fixture(tool: str, name: str) -> str:
    return (FIXTURES / tool / name).read_text()


def leased(hostnames=("gz-h800-01", "gz-h800-02"), **terms):  # type: ignore[no-untyped-def]
    nodes = [NodeFactory(hostname=name) if name else NodeFactory() for name in hostnames]
    lease = make_lease(nodes=nodes, **terms)
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def member(lease, role=Role.ADMIN):  # type: ignore[no-untyped-def]
    return MembershipFactory(tenant=lease.tenant, role=role).user


def submit(lease, user, raw, *, tool="iperf3", nodes=("gz-h800-01", "gz-h800-02")):  # type: ignore[no-untyped-def]
    return evidence.submit_evidence(
        lease=lease,
        user=user,
        tool=tool,
        raw_output=raw,
        nodes=list(nodes),
        measured_at=MEASURED,
        now=at("2026-11-10 10:00"),
    )


# --------------------------------------------------------------------------------------
# Evidence
# --------------------------------------------------------------------------------------


def test_iperf3_evidence_is_parsed_and_judged_against_the_terms_then_in_force():
    # iperf 3.14 TCP, received 204,737,447 bit/s; contracted 0.2 Gbps at 95%: 190 Mbit/s.
    lease = leased(contracted_bandwidth_gbps=D("0.2"))
    raw = fixture("iperf3", "tcp_3.14_macos.json")
    item = submit(lease, member(lease), raw)
    assert item.measured_bps == 204_737_447
    assert item.parsed["protocol"] == "tcp"
    assert (item.verdict, item.terms.version) == ("pass", 1)
    assert item.rule == "throughput >= 95% of 0.2 Gbps contracted (terms v1)"
    assert sorted(item.nodes.values_list("hostname", flat=True)) == ["gz-h800-01", "gz-h800-02"]
    assert len(item.raw_sha256) == 64


def test_the_same_output_fails_a_100_gbps_contract_with_the_figure_in_the_reason():
    lease = leased()
    item = submit(lease, member(lease), fixture("iperf3", "tcp_3.14_macos.json"))
    assert item.verdict == "fail"
    assert item.verdict_reason.startswith("measured 204.7 Mbit/s")


def test_ping_evidence_is_judged_against_the_latency_ceiling():
    lease = leased(latency_ceiling_us=D("100"))
    item = submit(
        lease, member(lease), fixture("ping", "iputils_20221126_loopback.txt"), tool="ping"
    )
    assert item.latency_us is not None
    assert item.verdict == "pass"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "tcp_3.9_stored_truncated.json",
            "Unparsable iperf3 output: iperf3 JSON is truncated or invalid",
        ),
        (
            "error_no_route_3.0.11.json",
            "The run itself failed: iperf3 reported an error: error - unable to connect to "
            "server: No route to host",
        ),
        (
            "tcp_3.9_receiver_zero.json",
            "Unparsable iperf3 output: iperf3 TCP receiver reported 0 bytes",
        ),
    ],
)
def test_unparsable_evidence_is_refused_with_the_parsers_reason(name, reason):
    lease = leased()
    with pytest.raises(ValidationError) as refused:
        submit(lease, member(lease), fixture("iperf3", name))
    assert refused.value.message_dict["raw_output"][0].startswith(reason)
    assert not lease.evidence.exists()


def test_evidence_must_name_two_of_the_leases_nodes():
    lease = leased()
    other = NodeFactory(hostname="sz-a100-09")
    raw = fixture("iperf3", "tcp_3.14_macos.json")
    user = member(lease)
    with pytest.raises(ValidationError) as refused:
        submit(lease, user, raw, nodes=("gz-h800-01", other.hostname))
    assert refused.value.message_dict["nodes"] == [
        f"sz-a100-09 was not a node of lease {lease.reference} at 2026-11-10 09:00."
    ]
    with pytest.raises(ValidationError, match="name exactly two"):
        submit(lease, user, raw, nodes=("gz-h800-01",))


def test_only_a_tenant_admin_or_the_provider_submits_evidence():
    lease = leased()
    raw = fixture("iperf3", "tcp_3.14_macos.json")
    for role in (Role.VIEWER, Role.AUDITOR):
        with pytest.raises(PermissionDenied):
            submit(lease, member(lease, role), raw)
    with pytest.raises(PermissionDenied):
        submit(lease, member(leased((None, None))), raw)  # another tenant's admin
    assert submit(lease, StaffFactory(), raw).pk


def test_evidence_from_the_future_or_before_the_terms_is_refused():
    lease = leased()
    raw = fixture("iperf3", "tcp_3.14_macos.json")
    user = member(lease)
    with pytest.raises(ValidationError, match="from the future"):
        evidence.submit_evidence(
            lease=lease,
            user=user,
            tool="iperf3",
            raw_output=raw,
            nodes=["gz-h800-01", "gz-h800-02"],
            measured_at=at("2026-11-11 09:00"),
            now=at("2026-11-10 09:00"),
        )
    with pytest.raises(ValidationError, match="No terms"):
        evidence.submit_evidence(
            lease=lease,
            user=user,
            tool="iperf3",
            raw_output=raw,
            nodes=["gz-h800-01", "gz-h800-02"],
            measured_at=at("2026-10-01 09:00"),
            now=at("2026-11-10 09:00"),
        )


# --------------------------------------------------------------------------------------
# Disputes
# --------------------------------------------------------------------------------------


@pytest.fixture
def disputed():  # type: ignore[no-untyped-def]
    lease = leased()
    admin = member(lease)
    run = make_run(lease, slot=at("2026-11-05 10:00"), verdict="fail", measured_bps=40 * 10**9)
    proof = submit(lease, admin, fixture("iperf3", "tcp_3.14_macos.json"))
    dispute = evidence.open_dispute(
        lease=lease,
        user=admin,
        reason="Our own job saturated the link during the probe.",
        probe_run=run,
        evidence=[proof],
        now=at("2026-11-10 11:00"),
    )
    return dispute


def test_a_tenant_admin_opens_a_dispute_on_a_run_with_evidence(disputed):
    assert disputed.state == DisputeState.OPEN
    assert list(disputed.evidence.all()) == [disputed.lease.evidence.get()]
    (event,) = disputed.events.all()
    assert (event.action, event.reason) == (
        DisputeEvent.Action.OPENED,
        "Our own job saturated the link during the probe.",
    )
    assert event.detail["probe_run"] == disputed.probe_run_id


def test_a_dispute_must_be_about_something_of_its_own_lease(disputed):
    lease = disputed.lease
    admin = member(lease)
    with pytest.raises(ValidationError, match="name one"):
        evidence.open_dispute(lease=lease, user=admin, reason="wrong")
    elsewhere = make_run(leased((None, None)))
    with pytest.raises(ValidationError) as refused:
        evidence.open_dispute(lease=lease, user=admin, reason="wrong", probe_run=elsewhere)
    assert "probe_run" in refused.value.message_dict
    with pytest.raises(PermissionDenied):
        evidence.open_dispute(
            lease=lease, user=member(lease, Role.VIEWER), reason="x", probe_run=disputed.probe_run
        )


def test_only_staff_decide_and_a_decided_dispute_stays_decided(disputed):
    with pytest.raises(PermissionDenied):
        evidence.accept_dispute(dispute=disputed, user=member(disputed.lease), reason="mine")
    with pytest.raises(ValidationError, match="reason"):
        evidence.reject_dispute(dispute=disputed, user=StaffFactory(), reason="  ")
    rejected = evidence.reject_dispute(
        dispute=disputed,
        user=StaffFactory(),
        reason="The probe ran at 10:00; your job started at 11:30.",
        now=at("2026-11-12 09:00"),
    )
    assert rejected.state == DisputeState.REJECTED
    with pytest.raises(ValidationError, match="already rejected"):
        evidence.accept_dispute(dispute=disputed, user=StaffFactory(), reason="changed my mind")
    assert [e.action for e in disputed.events.all()] == ["opened", "rejected"]


@pytest.mark.parametrize("credit", ["-1", "1.001", "abc"])
def test_a_credit_must_be_cny_to_the_fen(disputed, credit):
    with pytest.raises(ValidationError) as refused:
        evidence.accept_dispute(
            dispute=disputed, user=StaffFactory(), reason="ok", credit_cny=credit
        )
    assert "credit_cny" in refused.value.message_dict


def test_an_accepted_dispute_is_a_credit_line_on_the_next_draft_once(disputed):
    tenant = disputed.lease.tenant
    accepted = evidence.accept_dispute(
        dispute=disputed,
        user=StaffFactory(),
        reason="Confirmed: the probe overlapped a switch upgrade.",
        credit_cny="500.00",
        now=at("2026-11-15 09:00"),
    )
    assert (accepted.credit_cny, accepted.credit_period) == (D("500.00"), NOVEMBER)
    assert accepted.events.last().detail == {"credit_cny": "500.00", "credit_period": NOVEMBER}

    november = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER, now=at("2026-12-01 02:00"))
    (line,) = november.lines.filter(kind=LineKind.ADJUSTMENT)
    assert line.amount == D("-500.00")
    assert line.lease == disputed.lease
    assert line.detail["dispute"] == disputed.pk
    # 2 x 45,000.00 rent + 6,000.00 fee - 500.00 credit = 95,500.00; 6% tax 5,730.00.
    assert (november.subtotal, november.tax, november.total) == (
        D("95500.00"),
        D("5730.00"),
        D("101230.00"),
    )
    again = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER, now=at("2026-12-01 03:00"))
    assert again.lines.filter(kind=LineKind.ADJUSTMENT).count() == 1
    # The dispute's run was never ingested: issued by force, as a finance team may.
    services_billing.issue_invoice(
        invoice=again, now=at("2026-12-01 04:00"), force=True, reason="run not ingested"
    )
    december = invoicing.draft_invoice(tenant=tenant, period="2026-12", now=at("2026-12-02 00:00"))
    assert not december.lines.filter(kind=LineKind.ADJUSTMENT).exists()


def test_a_dispute_accepted_after_its_month_was_issued_goes_on_the_next_month(disputed):
    tenant = disputed.lease.tenant
    services_billing.issue_invoice(
        invoice=invoicing.draft_invoice(tenant=tenant, period=NOVEMBER, now=at("2026-12-01 01:00")),
        now=at("2026-12-01 01:30"),
        force=True,
        reason="run not ingested",
    )
    # Accepted on 30 November after the (early) finalisation: December's invoice carries it.
    accepted = evidence.accept_dispute(
        dispute=disputed,
        user=StaffFactory(),
        reason="ok",
        credit_cny="10.00",
        now=at("2026-11-30 23:00"),
    )
    assert accepted.credit_period == "2026-12"
