"""Invoices computed by hand. Each test writes its arithmetic in comments; the measurements
are HourlyRollup and TrafficSample rows created directly, standing for the probes.

A 30-day month is 2,592,000 s (November 2026 in Asia/Shanghai and in UTC alike)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

import pytest
from django.core.exceptions import ValidationError

from benchmarks.choices import Pattern, RunState, Tool, Trigger, Verdict
from benchmarks.models import ProbeRun
from billing import invoicing
from billing import services as services_billing
from billing.choices import InvoiceStatus, LineKind
from billing.ingest import ingest_all
from billing.models import HourlyRollup, Invoice, TrafficSample
from leases import services
from leases.choices import BillingMode, LeaseStatus, ProbeKind
from tests.factories import NodeFactory, TenantFactory, amend_acknowledged, at, make_lease

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
OCTOBER = "2026-10"
MONTH_S = 30 * 86_400  # 2,592,000


def active_lease(*, tenant=None, nodes=1, starts_at=None, ends_at=None, **terms):  # type: ignore[no-untyped-def]
    lease = make_lease(
        tenant=tenant,
        nodes=NodeFactory.create_batch(nodes),
        starts_at=starts_at or at("2026-11-01 00:00"),
        ends_at=ends_at,
        **terms,
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def lines_of(invoice: Invoice, kind: str | None = None) -> list:
    lines = invoice.lines.order_by("position")
    return list(lines.filter(kind=kind) if kind else lines)


def amounts(invoice: Invoice) -> list[tuple[str, D]]:
    return [(line.kind, line.amount) for line in lines_of(invoice)]


def throughput(lease, hour: datetime, *, passed: int, failed: int = 0, unknown: int = 0):  # type: ignore[no-untyped-def]
    return HourlyRollup.objects.create(
        lease=lease,
        kind=ProbeKind.THROUGHPUT,
        hour=hour,
        passed=passed,
        failed=failed,
        unknown=unknown,
    )


def sample(lease, slot: datetime, *, tx_bytes: int, seconds: int = 300):  # type: ignore[no-untyped-def]
    return TrafficSample.objects.create(
        lease=lease, slot_at=slot, seconds=seconds, tx_bytes=tx_bytes, nodes=1
    )


def mbps_bytes(mbps: int) -> int:
    """Bytes of a 300 s sample at ``mbps``: mbps x 10^6 / 8 x 300 = mbps x 37,500,000."""
    return mbps * 37_500_000


# --------------------------------------------------------------------------------------
# Month cut, proration, amendments, swaps
# --------------------------------------------------------------------------------------


def test_the_month_is_cut_in_the_tenants_time_zone():
    # The same lease dates, 2026-11-01 00:00 to 2026-12-01 00:00 Shanghai time, which is
    # 2026-10-31T16:00Z to 2026-11-30T16:00Z.
    start, end = at("2026-11-01 00:00"), at("2026-12-01 00:00")
    shanghai = TenantFactory(slug="zhiyuan", time_zone="Asia/Shanghai")
    utc = TenantFactory(slug="abroad", time_zone="UTC")
    for tenant in (shanghai, utc):
        active_lease(tenant=tenant, starts_at=start, ends_at=end)

    # Shanghai: November is exactly the lease: 2,592,000 node-seconds = 1 node-month.
    sh = invoicing.draft_invoice(tenant=shanghai, period=NOVEMBER)
    rent = lines_of(sh, LineKind.NODE_RENT)[0]
    assert rent.detail["node_seconds"] == 2_592_000
    assert rent.detail["month_start"] == "2026-10-31T16:00:00Z"
    assert (rent.quantity, rent.amount) == (D("1.000000"), D("45000.00"))
    assert lines_of(sh, LineKind.NETWORK_FEE)[0].amount == D("6000.00")

    # UTC: November is 2026-11-01T00:00Z to 2026-12-01T00:00Z; the lease covers it until
    # 2026-11-30T16:00Z = 29 days 16 hours = 2,505,600 + 57,600 = 2,563,200 s = 89/90 of
    # the month. Rent 45,000 x 89/90 = 44,500.00; fee 6,000 x 89/90 = 5,933.333 -> 5,933.33.
    # (The first 8 hours, 2026-10-31T16:00Z-24:00Z, belong to the UTC tenant's October.)
    abroad = invoicing.draft_invoice(tenant=utc, period=NOVEMBER)
    rent = lines_of(abroad, LineKind.NODE_RENT)[0]
    assert rent.detail["node_seconds"] == 2_563_200
    assert rent.detail["month_start"] == "2026-11-01T00:00:00Z"
    assert (rent.quantity, rent.amount) == (D("0.988889"), D("44500.00"))
    assert lines_of(abroad, LineKind.NETWORK_FEE)[0].amount == D("5933.33")
    # Subtotal 50,433.33; tax 6% = 3,025.9998 -> 3,026.00; total 53,459.33.
    assert (abroad.subtotal, abroad.tax, abroad.total) == (
        D("50433.33"),
        D("3026.00"),
        D("53459.33"),
    )


def test_a_lease_starting_mid_month_is_prorated_over_the_whole_month():
    # Two nodes from 2026-11-11 00:00: 20 days each = 1,728,000 s; node-seconds 3,456,000.
    # Rent 45,000 x 3,456,000 / 2,592,000 = 45,000 x 4/3 = 60,000.00 (1.333333 node-months).
    # Fee 6,000 x 1,728,000 / 2,592,000 = 4,000.00.
    # Subtotal 64,000.00; tax 6% 3,840.00; total 67,840.00; share 4,000/64,000 = 0.0625.
    tenant = TenantFactory()
    active_lease(tenant=tenant, nodes=2, starts_at=at("2026-11-11 00:00"))
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    rent, fee = lines_of(invoice)
    assert (rent.kind, rent.quantity, rent.unit, rent.unit_price, rent.amount) == (
        LineKind.NODE_RENT,
        D("1.333333"),
        "node-month",
        D("45000.0000"),
        D("60000.00"),
    )
    assert rent.detail["node_seconds"] == 3_456_000
    assert rent.detail["month_seconds"] == MONTH_S
    assert rent.detail["segment_start"] == "2026-11-10T16:00:00Z"
    assert (fee.kind, fee.quantity, fee.amount) == (
        LineKind.NETWORK_FEE,
        D("0.666667"),
        D("4000.00"),
    )
    assert (invoice.subtotal, invoice.tax, invoice.total) == (
        D("64000.00"),
        D("3840.00"),
        D("67840.00"),
    )
    assert invoice.network_cost_share == D("0.0625")
    assert invoice.tax_rate_percent == D("6.00")


def test_a_mid_month_amendment_gives_two_segments_priced_by_their_own_terms():
    # 100 Gbps at a 6,000 fee until 2026-11-21 00:00 (20 days), then 200 Gbps at 10,000
    # (10 days). Rent is cut too, at the same rate:
    #   rent 45,000 x 20/30 = 30,000.00 and 45,000 x 10/30 = 15,000.00
    #   fee   6,000 x 20/30 =  4,000.00 and 10,000 x 10/30 = 3,333.333 -> 3,333.33
    # Subtotal 52,333.33; tax 6% = 3,139.9998 -> 3,140.00; total 55,473.33.
    # Share (4,000 + 3,333.33) / 52,333.33 = 0.140127... -> 0.1401.
    tenant = TenantFactory()
    lease = active_lease(tenant=tenant)
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-21 00:00"),
        changes={
            "contracted_bandwidth_gbps": D("200"),
            "network_fee_per_month": D("10000.00"),
        },
        reason="Upgraded to 2x100G.",
    )
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    assert amounts(invoice) == [
        (LineKind.NODE_RENT, D("30000.00")),
        (LineKind.NODE_RENT, D("15000.00")),
        (LineKind.NETWORK_FEE, D("4000.00")),
        (LineKind.NETWORK_FEE, D("3333.33")),
    ]
    first, second = lines_of(invoice, LineKind.NETWORK_FEE)
    assert (first.detail["terms_version"], second.detail["terms_version"]) == (1, 2)
    assert first.detail["segment_end"] == second.detail["segment_start"] == "2026-11-20T16:00:00Z"
    assert (first.unit_price, second.unit_price) == (D("6000.0000"), D("10000.0000"))
    assert "200.00 Gbps" in second.description
    assert (invoice.subtotal, invoice.tax, invoice.total) == (
        D("52333.33"),
        D("3140.00"),
        D("55473.33"),
    )
    assert invoice.network_cost_share == D("0.1401")


def test_a_node_swap_adds_up_to_one_node_month():
    # Node A from 2026-11-01 to 2026-11-11 (10 days), node B from then on (20 days):
    # 864,000 + 1,728,000 = 2,592,000 node-seconds = 1 node-month = 45,000.00, one line.
    tenant = TenantFactory()
    lease = active_lease(tenant=tenant)
    old = lease.assignments.get().node
    services.swap_node(lease=lease, old_node=old, new_node=NodeFactory(), at=at("2026-11-11 00:00"))
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    [rent] = lines_of(invoice, LineKind.NODE_RENT)
    assert (rent.quantity, rent.amount) == (D("1.000000"), D("45000.00"))
    assert [a["seconds_in_segment"] for a in rent.detail["assignments"]] == [864_000, 1_728_000]
    assert rent.detail["assignments"][0]["node"] == old.hostname


# --------------------------------------------------------------------------------------
# Pay-per-use
# --------------------------------------------------------------------------------------


def test_per_gb_bills_the_traffic_of_the_month_and_no_fixed_fee():
    # Two samples in November: 1,000,000,000,000 + 234,567,890,123 = 1,234,567,890,123 B
    # = 1,234.567890123 GB x 0.03 = 37.0370367 -> 37.04. Quantity 1,234.567890 GB.
    # A sample at 2026-10-31 23:55 Shanghai (October) and one at 2026-12-01 00:00 (December)
    # are not November's. The 6,000 fixed fee of the terms is not billed in per-GB mode.
    tenant = TenantFactory()
    lease = active_lease(
        tenant=tenant,
        starts_at=at("2026-10-01 00:00"),
        billing_mode=BillingMode.PER_GB,
        price_per_gb=D("0.0300"),
    )
    sample(lease, at("2026-10-31 23:55"), tx_bytes=9 * 10**15)
    sample(lease, at("2026-11-01 00:00"), tx_bytes=1_000_000_000_000)
    sample(lease, at("2026-11-30 23:55"), tx_bytes=234_567_890_123)
    sample(lease, at("2026-12-01 00:00"), tx_bytes=9 * 10**15)
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    assert [line.kind for line in lines_of(invoice)] == [LineKind.NODE_RENT, LineKind.USAGE_GB]
    [usage] = lines_of(invoice, LineKind.USAGE_GB)
    assert (usage.quantity, usage.unit, usage.unit_price, usage.amount) == (
        D("1234.567890"),
        "GB",
        D("0.0300"),
        D("37.04"),
    )
    assert usage.detail["bytes"] == 1_234_567_890_123
    assert usage.detail["samples"] == 2
    assert usage.detail["first_slot"] == "2026-10-31T16:00:00Z"
    assert usage.detail["last_slot"] == "2026-11-30T15:55:00Z"
    # Share 37.04 / (45,000 + 37.04) = 0.000822... -> 0.0008.
    assert invoice.network_cost_share == D("0.0008")


def test_p95_with_ties_over_a_partial_month():
    # The lease starts 2026-11-16 00:00: 15 of 30 days, a share of 0.5 of the month.
    # 40 samples of 300 s: 900 Mbps once, 800 Mbps three times (a tie), 100 Mbps 36 times.
    # floor(40 x 5 / 100) = 2 dropped (900 and one 800); the third highest, 800, is billed.
    # Charge 800.00 Mbps x 0.40 x 0.5 = 160.00. Rent 45,000 x 0.5 = 22,500.00.
    # A 5,000 Mbps sample at 2026-11-15 23:55, before the lease starts, is not counted.
    tenant = TenantFactory()
    lease = active_lease(
        tenant=tenant,
        starts_at=at("2026-11-16 00:00"),
        billing_mode=BillingMode.P95,
        price_per_mbps_p95=D("0.4000"),
    )
    sample(lease, at("2026-11-15 23:55"), tx_bytes=mbps_bytes(5000))
    rates = [900] + [800] * 3 + [100] * 36
    for index, rate in enumerate(rates):
        sample(
            lease, at("2026-11-16 00:00") + timedelta(minutes=5 * index), tx_bytes=mbps_bytes(rate)
        )
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    [usage] = lines_of(invoice, LineKind.USAGE_P95)
    assert (usage.quantity, usage.unit, usage.unit_price, usage.amount) == (
        D("800.00"),
        "Mbps",
        D("0.4000"),
        D("160.00"),
    )
    assert usage.detail["samples"] == 40
    assert usage.detail["dropped_samples"] == 2
    assert usage.detail["month_share"] == "0.500000"
    assert D(usage.detail["p95_bps"]) == D(800_000_000)
    assert lines_of(invoice, LineKind.NODE_RENT)[0].amount == D("22500.00")


def test_p95_amended_mid_month_bills_each_parts_p95_for_its_share():
    # Price 0.40 until 2026-11-11 00:00 (10 days = 1/3), then 0.50 (20 days = 2/3).
    # Part 1: five samples at 300 Mbps (under 20 samples nothing is dropped): p95 300 Mbps,
    #         300 x 0.40 x 1/3 = 40.00.
    # Part 2: three samples at 600 Mbps and one at 200: p95 600 Mbps,
    #         600 x 0.50 x 2/3 = 200.00.
    tenant = TenantFactory()
    lease = active_lease(
        tenant=tenant, billing_mode=BillingMode.P95, price_per_mbps_p95=D("0.4000")
    )
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-11 00:00"),
        changes={"price_per_mbps_p95": D("0.5000"), "contracted_bandwidth_gbps": D("200")},
        reason="More bandwidth.",
    )
    for index in range(5):
        sample(
            lease, at("2026-11-05 00:00") + timedelta(minutes=5 * index), tx_bytes=mbps_bytes(300)
        )
    for index, rate in enumerate([600, 600, 600, 200]):
        sample(
            lease, at("2026-11-20 00:00") + timedelta(minutes=5 * index), tx_bytes=mbps_bytes(rate)
        )
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    first, second = lines_of(invoice, LineKind.USAGE_P95)
    assert (first.quantity, first.unit_price, first.amount) == (
        D("300.00"),
        D("0.4000"),
        D("40.00"),
    )
    assert (second.quantity, second.unit_price, second.amount) == (
        D("600.00"),
        D("0.5000"),
        D("200.00"),
    )
    assert (first.detail["samples"], second.detail["samples"]) == (5, 4)


# --------------------------------------------------------------------------------------
# SLA credits
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("passed", "failed", "cap", "credit", "percent"),
    [
        # 199 / 200 = 99.500% exactly: "below 99.5" does not apply -> no credit line.
        (199, 1, D("50"), None, None),
        # 9,949 / 10,000 = 99.490%: below 99.5 -> 10% of 6,000 = -600.00.
        (9949, 51, D("50"), D("-600.00"), D("10")),
        # 90 / 100 = 90%: below 95 -> tier 50%, capped at 20% -> -1,200.00.
        (90, 10, D("20"), D("-1200.00"), D("20")),
    ],
)
def test_credits_at_the_tier_boundary_and_at_the_cap(passed, failed, cap, credit, percent):
    tenant = TenantFactory()
    lease = active_lease(tenant=tenant, credit_cap_percent=cap)
    # Split over two hours of the month to prove they are summed.
    throughput(lease, datetime(2026, 11, 2, 3, tzinfo=UTC), passed=passed - 1, failed=failed)
    throughput(lease, datetime(2026, 11, 20, 3, tzinfo=UTC), passed=1)
    # Outside the month: counts nothing.
    throughput(lease, datetime(2026, 10, 30, 3, tzinfo=UTC), passed=0, failed=1000)
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    credits = lines_of(invoice, LineKind.SLA_CREDIT)
    if credit is None:
        assert credits == []
        return
    [line] = credits
    assert (line.amount, line.quantity) == (credit, percent)
    assert line.detail["throughput"]["passed"] == passed
    assert line.detail["throughput"]["failed"] == failed
    assert D(line.detail["cap_percent"]) == cap
    assert line.detail["capped"] is (cap == D("20"))
    assert line.detail["network_fee"] == "6000.00"


def test_the_credit_is_on_the_network_fee_of_both_segments_with_the_final_tiers():
    # Fee 6,000 for 20 days (4,000.00) then 10,000 for 10 days (3,333.33): 7,333.33.
    # Compliance 98 / 100 = 98%: below 99 -> 25% under v1's tiers; v2 (in force at the end)
    # sets tiers below 99.5 -> 5%, below 99 -> 15%: 15% of 7,333.33 = 1,099.9995 -> -1,100.00.
    tenant = TenantFactory()
    lease = active_lease(tenant=tenant)
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-21 00:00"),
        changes={
            "network_fee_per_month": D("10000.00"),
            "credit_tiers": [
                {"below_percent": "99.5", "credit_percent": "5"},
                {"below_percent": "99", "credit_percent": "15"},
            ],
        },
        reason="Upgrade with new credit tiers.",
    )
    throughput(lease, datetime(2026, 11, 5, 0, tzinfo=UTC), passed=98, failed=2)
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    [credit] = lines_of(invoice, LineKind.SLA_CREDIT)
    assert credit.amount == D("-1100.00")
    assert credit.detail["terms_version"] == 2
    assert credit.detail["tier_percent"] == "15"
    # Credits come after the charges and do not change the network cost share:
    # (7,333.33) / (45,000 + 7,333.33) = 0.1401.
    assert lines_of(invoice)[-1].kind == LineKind.SLA_CREDIT
    assert invoice.network_cost_share == D("0.1401")


# --------------------------------------------------------------------------------------
# Drafts, finalisation, adjustments
# --------------------------------------------------------------------------------------


def test_drafting_again_gives_the_identical_invoice():
    tenant = TenantFactory()
    lease = active_lease(tenant=tenant, nodes=2, starts_at=at("2026-11-03 12:00"))
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-17 08:30"),
        changes={"network_fee_per_month": D("7777.77")},
        reason="Re-rated.",
    )
    throughput(lease, datetime(2026, 11, 8, 0, tzinfo=UTC), passed=97, failed=3)
    first = invoicing.invoice_summary(invoicing.draft_invoice(tenant=tenant, period=NOVEMBER))
    second = invoicing.invoice_summary(invoicing.draft_invoice(tenant=tenant, period=NOVEMBER))
    assert first == second
    assert Invoice.objects.count() == 1
    assert [line["position"] for line in second["lines"]] == [1, 2, 3, 4, 5]


def test_a_late_result_after_issue_becomes_an_adjustment_next_month():
    # October (31 days, 2,678,400 s) fully leased: rent 45,000.00, fee 6,000.00.
    # At finalisation, compliance 9,949 / 10,000 = 99.49% -> 10% credit = -600.00.
    tenant = TenantFactory(slug="zhiyuan")
    lease = active_lease(tenant=tenant, starts_at=at("2026-10-01 00:00"))
    rollup = throughput(lease, datetime(2026, 10, 10, 0, tzinfo=UTC), passed=9949, failed=51)
    october = invoicing.draft_invoice(tenant=tenant, period=OCTOBER)
    assert lines_of(october, LineKind.SLA_CREDIT)[0].amount == D("-600.00")
    october = services_billing.issue_invoice(invoice=october)
    assert october.status == InvoiceStatus.ISSUED and october.number == "GL-2026-000001"
    frozen = invoicing.invoice_summary(october)

    # Late results: 100 more failures in that hour -> 9,949 / 10,100 = 98.505% -> below 99
    # -> 25% = -1,500.00. The difference, -1,500.00 - (-600.00) = -900.00, goes on November.
    rollup.failed = 151
    rollup.save()
    with pytest.raises(ValidationError) as refused:
        invoicing.draft_invoice(tenant=tenant, period=OCTOBER)
    assert refused.value.messages == [
        "Invoice GL-2026-000001 (zhiyuan 2026-10) is issued; it cannot change. Later "
        "results go on the next invoice as adjustments; a correction is a credit note."
    ]

    november = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    [adjustment] = lines_of(november, LineKind.ADJUSTMENT)
    assert adjustment.amount == D("-900.00")
    assert adjustment.lease == lease
    assert adjustment.description == (
        f"Adjustment for 2026-10: SLA credit of {lease.reference} recomputed from late "
        "results: -600.00 → -1500.00"
    )
    assert adjustment.detail["adjusted_invoice"] == october.pk
    assert adjustment.detail["recomputed_lines"][0]["compliance_percent"] == "98.505"
    # November: rent 45,000.00 + fee 6,000.00 (no November rollups, no credit) - 900.00
    # = 50,100.00; tax 6% 3,006.00; total 53,106.00.
    assert amounts(november) == [
        (LineKind.NODE_RENT, D("45000.00")),
        (LineKind.NETWORK_FEE, D("6000.00")),
        (LineKind.ADJUSTMENT, D("-900.00")),
    ]
    assert (november.subtotal, november.tax, november.total) == (
        D("50100.00"),
        D("3006.00"),
        D("53106.00"),
    )
    # The adjustment does not count in the network cost share: 6,000 / 51,000 = 0.1176.
    assert november.network_cost_share == D("0.1176")
    october.refresh_from_db()
    assert invoicing.invoice_summary(october) == frozen


def test_an_issued_invoice_is_refused_again_and_the_current_month_cannot_be_issued():
    tenant = TenantFactory(slug="lingxi")
    active_lease(tenant=tenant, starts_at=at("2026-10-01 00:00"))
    october = services_billing.issue_invoice(
        invoice=invoicing.draft_invoice(tenant=tenant, period=OCTOBER)
    )
    with pytest.raises(ValidationError, match="is issued; only a draft can be issued"):
        services_billing.issue_invoice(invoice=october)
    november = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    with pytest.raises(ValidationError, match="cannot be issued before its period ends"):
        services_billing.issue_invoice(invoice=november, now=at("2026-11-29 12:00"))
    with pytest.raises(ValidationError, match="has not started yet"):
        invoicing.draft_invoice(tenant=tenant, period="2026-12", now=at("2026-11-29 12:00"))
    with pytest.raises(ValidationError, match="YYYY-MM"):
        invoicing.draft_invoice(tenant=tenant, period="2026-13")


def test_draft_period_bills_active_and_ended_leases_only_and_keeps_issued_ones():
    billed, draft_only, finalised = TenantFactory(), TenantFactory(), TenantFactory()
    active_lease(tenant=billed)
    make_lease(tenant=draft_only, nodes=[NodeFactory()])  # still a draft: never billed
    active_lease(tenant=finalised, starts_at=at("2026-10-01 00:00"))
    kept = services_billing.issue_invoice(
        invoice=invoicing.draft_invoice(tenant=finalised, period=OCTOBER)
    )
    invoices = invoicing.draft_period(period=OCTOBER)
    assert invoices == [kept] and invoices[0].status == InvoiceStatus.ISSUED
    invoices = invoicing.draft_period(period=NOVEMBER)
    assert {invoice.tenant for invoice in invoices} == {billed, finalised}
    assert not Invoice.objects.filter(tenant=draft_only).exists()


# --------------------------------------------------------------------------------------
# Acceptance
# --------------------------------------------------------------------------------------


def acceptance_run(lease, *, slot: datetime, kind: str, state: str, verdict: str, finished):  # type: ignore[no-untyped-def]
    node = lease.assignments.first().node
    return ProbeRun.objects.create(
        lease=lease,
        kind=kind,
        tool={
            ProbeKind.THROUGHPUT: Tool.IPERF3,
            ProbeKind.LINK: Tool.ETHTOOL,
            ProbeKind.COUNTERS: Tool.COUNTERS,
            ProbeKind.COLLECTIVE: Tool.ALL_REDUCE_PERF,
        }[kind],
        target=node.hostname,
        pattern=Pattern.NODE,
        trigger=Trigger.ACCEPTANCE,
        slot_at=slot,
        deadline_at=slot + timedelta(hours=1),
        site=node.leaf_switch.fabric.site,
        state=state,
        verdict=verdict,
        finished_at=finished,
    )


def test_billing_starts_when_the_acceptance_passes():
    tenant = TenantFactory()
    lease = active_lease(tenant=tenant, billing_starts_on_acceptance=True)
    # First attempt, 2026-11-01: throughput failed its verdict. Not accepted.
    first = at("2026-11-01 00:00")
    acceptance_run(
        lease,
        slot=first,
        kind=ProbeKind.LINK,
        state=RunState.OK,
        verdict=Verdict.PASS,
        finished=first + timedelta(minutes=1),
    )
    acceptance_run(
        lease,
        slot=first,
        kind=ProbeKind.THROUGHPUT,
        state=RunState.OK,
        verdict=Verdict.FAIL,
        finished=first + timedelta(minutes=2),
    )
    assert invoicing.billing_start(lease) is None
    assert lines_of(invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)) == []

    # Second attempt, 2026-11-05 23:50: link and throughput pass, counters have no
    # verdict, NCCL is skipped (no GPUs): accepted when the last run finished, 11-06 00:00.
    second = at("2026-11-05 23:50")
    acceptance_run(
        lease,
        slot=second,
        kind=ProbeKind.LINK,
        state=RunState.OK,
        verdict=Verdict.PASS,
        finished=second + timedelta(minutes=1),
    )
    acceptance_run(
        lease,
        slot=second,
        kind=ProbeKind.COUNTERS,
        state=RunState.OK,
        verdict=Verdict.NONE,
        finished=second + timedelta(minutes=2),
    )
    acceptance_run(
        lease,
        slot=second,
        kind=ProbeKind.THROUGHPUT,
        state=RunState.OK,
        verdict=Verdict.PASS,
        finished=at("2026-11-06 00:00"),
    )
    acceptance_run(
        lease,
        slot=second,
        kind=ProbeKind.COLLECTIVE,
        state=RunState.SKIPPED,
        verdict=Verdict.NONE,
        finished=at("2026-11-07 00:00"),
    )
    assert invoicing.billing_start(lease) == at("2026-11-06 00:00")

    # Billed from 2026-11-06 00:00: 25 of 30 days. Rent 45,000 x 25/30 = 37,500.00;
    # fee 6,000 x 25/30 = 5,000.00. The failures measured before acceptance don't count.
    throughput(lease, datetime(2026, 11, 2, 0, tzinfo=UTC), passed=0, failed=50)
    throughput(lease, datetime(2026, 11, 10, 0, tzinfo=UTC), passed=100)
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    assert amounts(invoice) == [
        (LineKind.NODE_RENT, D("37500.00")),
        (LineKind.NETWORK_FEE, D("5000.00")),
    ]
    assert lines_of(invoice)[0].detail["billing_start"] == "2026-11-05T16:00:00Z"


# --------------------------------------------------------------------------------------
# Network cost share
# --------------------------------------------------------------------------------------


def test_network_cost_share_of_the_demo_cluster():
    # The demo's ZY-2026-001: 4 nodes x 45,000 = 180,000.00 rent + 22,000.00 network fee
    # = 202,000.00. Share 22,000 / 202,000 = 0.108910... -> 0.1089 (10.89%), inside
    # DOMAIN.md's 10-15% for 8x A100 on 100G. Tax 6% = 12,120.00; total 214,120.00.
    tenant = TenantFactory()
    active_lease(tenant=tenant, nodes=4, network_fee_per_month=D("22000.00"))
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    assert amounts(invoice) == [
        (LineKind.NODE_RENT, D("180000.00")),
        (LineKind.NETWORK_FEE, D("22000.00")),
    ]
    assert lines_of(invoice)[0].quantity == D("4.000000")
    assert invoice.network_cost_share == D("0.1089")
    assert lines_of(invoice)[0].detail["lease_network_cost_share"] == "0.1089"
    assert (invoice.subtotal, invoice.tax, invoice.total) == (
        D("202000.00"),
        D("12120.00"),
        D("214120.00"),
    )
    summary = invoicing.invoice_summary(invoice)
    assert summary["network_cost_share"] == "0.1089"
    assert summary["lines"][0]["amount"] == "180000.00"


def test_leases_with_different_tax_rates_are_taxed_per_rate_group():
    # A: 45,000 rent + 6,000 fee, both at 6%; B: 10,000 rent at 9%, no fee. Subtotal
    # 61,000.00; tax 51,000 x 6% = 3,060.00 plus 10,000 x 9% = 900.00 = 3,960.00 (no
    # longer the highest rate over everything, which was 5,490.00); total 64,960.00.
    tenant = TenantFactory()
    active_lease(tenant=tenant)
    active_lease(
        tenant=tenant,
        node_rent_per_month=D("10000.00"),
        network_fee_per_month=D("0"),
        rent_tax_rate_percent=D("9"),
    )
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    assert [line.tax_rate_percent for line in lines_of(invoice)] == [D("6"), D("6"), D("9")]
    assert (invoice.subtotal, invoice.tax_rate_percent, invoice.tax, invoice.total) == (
        D("61000.00"),
        None,  # the lines do not share one rate
        D("3960.00"),
        D("64960.00"),
    )
    summary = invoicing.invoice_summary(invoice)
    assert summary["tax_rate_percent"] is None
    assert summary["tax_groups"] == [
        {"tax_rate_percent": "6.00", "subtotal": "51000.00", "tax": "3060.00", "total": "54060.00"},
        {"tax_rate_percent": "9.00", "subtotal": "10000.00", "tax": "900.00", "total": "10900.00"},
    ]
    assert [line["tax_rate_percent"] for line in summary["lines"]] == ["6.00", "6.00", "9.00"]


# --------------------------------------------------------------------------------------
# Admin portal
# --------------------------------------------------------------------------------------


def test_admin_shows_invoices_and_measurements_and_its_actions_call_the_services(client):
    from django.urls import reverse

    from incidents.models import Incident
    from tests.factories import StaffFactory

    tenant = TenantFactory(slug="zhiyuan")
    lease = active_lease(tenant=tenant, starts_at=at("2026-10-01 00:00"))
    throughput(lease, datetime(2026, 10, 10, 0, tzinfo=UTC), passed=9949, failed=51)
    sample(lease, at("2026-10-05 00:00"), tx_bytes=mbps_bytes(800))
    run = acceptance_run(
        lease,
        slot=at("2026-10-01 00:00"),
        kind=ProbeKind.THROUGHPUT,
        state=RunState.OK,
        verdict=Verdict.FAIL,
        finished=at("2026-10-01 00:05"),
    )
    incident = Incident.objects.create(
        lease=lease,
        kind=ProbeKind.THROUGHPUT,
        target="a>b",
        pattern=Pattern.RING,
        opened_at=at("2026-10-01 00:00"),
        rule="throughput >= 95 Gbps",
        terms=lease.terms.get(),
        worst_bps=40_000_000_000,
    )
    incident.runs.add(run)
    october = invoicing.draft_invoice(tenant=tenant, period=OCTOBER)
    client.force_login(StaffFactory())

    for model, obj in [
        (Invoice, october),
        (october.lines.model, october.lines.first()),
        (HourlyRollup, HourlyRollup.objects.first()),
        (TrafficSample, TrafficSample.objects.first()),
        (Incident, incident),
    ]:
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        assert client.get(reverse(f"{prefix}_changelist"), {"q": "L-"}).status_code == 200
        page = client.get(reverse(f"{prefix}_change", args=[obj.pk]))
        assert page.status_code == 200
    assert reverse("admin:benchmarks_proberun_change", args=[run.pk]) in page.content.decode()

    changelist = reverse("admin:billing_invoice_changelist")
    ingest_all()  # the acceptance run: issuing waits until ingest has read it
    client.post(changelist, {"action": "issue", "_selected_action": [october.pk]})
    october.refresh_from_db()
    assert october.status == InvoiceStatus.ISSUED
    response = client.post(
        changelist,
        {"action": "recompute", "_selected_action": [october.pk]},
        follow=True,
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert "is issued; it cannot change" in response.content.decode()
