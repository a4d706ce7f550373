"""Tax per line (issue 13, item 5): each price component carries its VAT rate in the terms
(node rent 13%, network service 6% here), every invoice line carries its component's rate,
and tax is rounded half-up once per rate group. Figures are hand-computed; November 2026
is 30 days in Asia/Shanghai (2,592,000 s), October 31 days."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal as D

import pytest
from django.utils.translation import override
from openpyxl import load_workbook

from billing import invoicing
from billing import services as billing_services
from billing.choices import InvoiceStatus, LineKind
from billing.documents import csv_export, xlsx
from billing.documents.rows import credit_note_document, invoice_document
from billing.models import HourlyRollup, Invoice
from gpulease_verify.calculations import invoice_totals_by_rate
from gpulease_verify.terms import terms_content
from leases import services
from leases.choices import LeaseStatus, ProbeKind
from tests.factories import NodeFactory, TenantFactory, amend_acknowledged, at, make_lease

pytestmark = pytest.mark.django_db

OCTOBER, NOVEMBER = "2026-10", "2026-11"
RATES = {"rent_tax_rate_percent": D("13"), "tax_rate_percent": D("6")}


def lease_at_two_rates(tenant, *, starts_at, fee):  # type: ignore[no-untyped-def]
    """2 nodes at ¥30,000 rent each (13%), a monthly network fee (6%)."""
    lease = make_lease(
        tenant=tenant,
        nodes=NodeFactory.create_batch(2),
        starts_at=starts_at,
        node_rent_per_month=D("30000.00"),
        network_fee_per_month=fee,
        **RATES,
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def throughput(lease, hour: datetime, *, passed: int, failed: int):  # type: ignore[no-untyped-def]
    return HourlyRollup.objects.create(
        lease=lease, kind=ProbeKind.THROUGHPUT, hour=hour, passed=passed, failed=failed
    )


def rated(invoice: Invoice) -> list[tuple[str, D, D]]:
    return [
        (line.kind, line.amount, line.tax_rate_percent)
        for line in invoice.lines.order_by("position")
    ]


def totals(invoice: Invoice) -> tuple[D, D, D]:
    return invoice.subtotal, invoice.tax, invoice.total


@pytest.fixture
def november():  # type: ignore[no-untyped-def]
    """A full November with a credit: rent 2 x 30,000.00 = 60,000.00 at 13%; fee 5,000.25
    at 6%; compliance 9,949 / 10,000 = 99.49% -> 10% of 5,000.25 = 500.025 -> -500.03 at
    6% (a credit reduces the network service)."""
    tenant = TenantFactory(slug="zhiyuan")
    lease = lease_at_two_rates(tenant, starts_at=at("2026-11-01 00:00"), fee=D("5000.25"))
    throughput(lease, datetime(2026, 11, 10, 0, tzinfo=UTC), passed=9949, failed=51)
    return invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)


def test_each_line_carries_its_rate_and_tax_is_rounded_once_per_group(november):
    assert rated(november) == [
        (LineKind.NODE_RENT, D("60000.00"), D("13")),
        (LineKind.NETWORK_FEE, D("5000.25"), D("6")),
        (LineKind.SLA_CREDIT, D("-500.03"), D("6")),
    ]
    # 13%: 60,000.00 x 13% = 7,800.00.
    # 6%: 5,000.25 - 500.03 = 4,500.22; x 6% = 270.0132 -> 270.01, rounded once.
    #   Per line it would be 300.015 -> 300.02 and -30.0018 -> -30.00 = 270.02: one fen
    #   more. Over everything at the highest rate (the old rule) 8,385.03.
    # Subtotal 64,500.22; tax 7,800.00 + 270.01 = 8,070.01; total 72,570.23.
    assert totals(november) == (D("64500.22"), D("8070.01"), D("72570.23"))
    assert november.tax_rate_percent is None  # the lines do not share one rate
    groups = [(g.tax_rate_percent, g.subtotal, g.tax) for g in november.tax_groups]
    assert groups == [
        (D("6.00"), D("4500.22"), D("270.01")),
        (D("13.00"), D("60000.00"), D("7800.00")),
    ]
    summary = invoicing.invoice_summary(november)
    assert [line["tax_rate_percent"] for line in summary["lines"]] == ["13.00", "6.00", "6.00"]
    assert [(g["tax_rate_percent"], g["tax"]) for g in summary["tax_groups"]] == [
        ("6.00", "270.01"),
        ("13.00", "7800.00"),
    ]
    assert "tax_note" not in summary  # no "highest rate applies" any more


def test_a_service_rate_change_mid_month_gives_two_rate_groups_for_the_fee():
    # 20 days at 6% then, from 2026-11-21 00:00, 10 days at 9% for the network service;
    # rent stays 13%. Fee 5,000.00:
    #   rent 60,000 x 20/30 = 40,000.00 and x 10/30 = 20,000.00, both 13%;
    #   fee 5,000 x 20/30 = 3,333.333 -> 3,333.33 at 6%; x 10/30 = 1,666.667 -> 1,666.67 at 9%;
    #   compliance 99.49% -> 10% of the fee billed (5,000.00) = -500.00, at the 9% of v2,
    #   whose tiers it applies (in force at the window's end).
    # Tax: 13% 60,000.00 -> 7,800.00; 6% 3,333.33 -> 199.9998 -> 200.00; 9% 1,666.67 -
    # 500.00 = 1,166.67 -> 105.0003 -> 105.00. Subtotal 64,500.00; tax 8,105.00; total
    # 72,605.00.
    tenant = TenantFactory()
    lease = lease_at_two_rates(tenant, starts_at=at("2026-11-01 00:00"), fee=D("5000.00"))
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-21 00:00"),
        changes={"tax_rate_percent": D("9")},
        reason="Service reclassified.",
    )
    throughput(lease, datetime(2026, 11, 10, 0, tzinfo=UTC), passed=9949, failed=51)
    invoice = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    assert rated(invoice) == [
        (LineKind.NODE_RENT, D("40000.00"), D("13")),
        (LineKind.NODE_RENT, D("20000.00"), D("13")),
        (LineKind.NETWORK_FEE, D("3333.33"), D("6")),
        (LineKind.NETWORK_FEE, D("1666.67"), D("9")),
        (LineKind.SLA_CREDIT, D("-500.00"), D("9")),
    ]
    assert [(g.tax_rate_percent, g.subtotal, g.tax) for g in invoice.tax_groups] == [
        (D("6.00"), D("3333.33"), D("200.00")),
        (D("9.00"), D("1166.67"), D("105.00")),
        (D("13.00"), D("60000.00"), D("7800.00")),
    ]
    assert totals(invoice) == (D("64500.00"), D("8105.00"), D("72605.00"))


def test_an_adjustment_of_an_earlier_month_carries_that_months_rate():
    # October: rent 60,000.00 at 13%, fee 5,000.00 at 6%, 99.49% -> 10% = -500.00 at 6%;
    # issued. The service rate becomes 9% from November. A late result brings October to
    # 9,949 / 10,100 = 98.505% -> below 99 -> 25% = -1,250.00: an adjustment of -750.00 on
    # November at October's 6%, not November's 9%.
    tenant = TenantFactory(slug="lingxi")
    lease = lease_at_two_rates(tenant, starts_at=at("2026-10-01 00:00"), fee=D("5000.00"))
    rollup = throughput(lease, datetime(2026, 10, 10, 0, tzinfo=UTC), passed=9949, failed=51)
    october = invoicing.draft_invoice(tenant=tenant, period=OCTOBER)
    assert [line.amount for line in october.lines.order_by("position")] == [
        D("60000.00"),
        D("5000.00"),
        D("-500.00"),
    ]
    october = billing_services.issue_invoice(invoice=october)
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-01 00:00"),
        changes={"tax_rate_percent": D("9")},
        reason="Service reclassified from November.",
    )
    rollup.failed = 151
    rollup.save()

    november = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER)
    assert rated(november) == [
        (LineKind.NODE_RENT, D("60000.00"), D("13")),
        (LineKind.NETWORK_FEE, D("5000.00"), D("9")),
        (LineKind.ADJUSTMENT, D("-750.00"), D("6")),
    ]
    adjustment = november.lines.get(kind=LineKind.ADJUSTMENT)
    assert adjustment.detail["adjusted_kind"] == LineKind.SLA_CREDIT
    assert adjustment.detail["adjusted_tax_rate_percent"] == "6.00"
    # Tax: 6% -750.00 -> -45.00; 9% 5,000.00 -> 450.00; 13% 60,000.00 -> 7,800.00 =
    # 8,205.00. Subtotal 64,250.00; total 72,455.00.
    assert totals(november) == (D("64250.00"), D("8205.00"), D("72455.00"))


def test_a_corrected_rate_moves_the_amount_from_the_old_rate_to_the_new():
    # October billed rent 60,000.00 at 13% (the lease started an hour before October, so
    # a version can take effect at October's first instant). An acknowledged correction
    # says October's rent was 9%. November carries two rent adjustments: -60,000.00 at
    # 13% and +60,000.00 at 9%: subtotal 0, tax -7,800.00 + 5,400.00 = -2,400.00, the
    # over-charged tax given back.
    tenant = TenantFactory()
    lease = lease_at_two_rates(tenant, starts_at=at("2026-09-30 23:00"), fee=D("0"))
    october = billing_services.issue_invoice(
        invoice=invoicing.draft_invoice(tenant=tenant, period=OCTOBER)
    )
    assert rated(october) == [(LineKind.NODE_RENT, D("60000.00"), D("13"))]
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-10-01 00:00"),
        changes={"rent_tax_rate_percent": D("9")},
        reason="Rent rate corrected.",
    )
    computed = invoicing.compute_invoice(tenant=tenant, period=NOVEMBER)
    moved = [
        (line.amount, line.tax_rate_percent, line.description)
        for line in computed.lines
        if line.kind == LineKind.ADJUSTMENT
    ]
    assert moved == [
        (
            D("60000.00"),
            D("9.00"),
            f"Adjustment for 2026-10: Node rent at 9% VAT of {lease.reference} recomputed "
            "from late results: 0.00 → 60000.00",
        ),
        (
            D("-60000.00"),
            D("13.00"),
            f"Adjustment for 2026-10: Node rent at 13% VAT of {lease.reference} recomputed "
            "from late results: 60000.00 → 0.00",
        ),
    ]
    adjustments = [(a, r) for a, r, _text in moved]
    assert invoice_totals_by_rate(adjustments).tax == D("-2400.00")


def test_a_credit_note_over_a_mixed_rate_invoice_is_taxed_per_group(november):
    invoice = billing_services.issue_invoice(invoice=november)
    note = billing_services.create_credit_note(
        invoice=invoice,
        reason="Two days of rent and the fee's rounding given back.",
        corrections=[
            billing_services.Correction(position=1, amount=D("4000.05")),
            billing_services.Correction(position=2, amount=D("0.25")),
        ],
    )
    # 13%: -4,000.05 x 13% = -520.0065 -> -520.01; 6%: -0.25 x 6% = -0.015 -> -0.02
    # (half-up, away from zero). Subtotal -4,000.30; tax -520.03; total -4,520.33.
    assert [(line.amount, line.tax_rate_percent) for line in note.lines.order_by("position")] == [
        (D("-4000.05"), D("13.00")),
        (D("-0.25"), D("6.00")),
    ]
    assert (note.subtotal, note.tax, note.total) == (D("-4000.30"), D("-520.03"), D("-4520.33"))
    document = credit_note_document(note)
    assert [(g.tax_rate_percent, g.amount, g.tax) for g in document.by_rate] == [
        (D("6.00"), D("-0.25"), D("-0.02")),
        (D("13.00"), D("-4000.05"), D("-520.01")),
    ]
    assert document.check()


def test_csv_and_xlsx_show_each_lines_rate_and_one_row_per_rate_group(november):
    invoice = Invoice.objects.get(pk=november.pk)
    assert invoice.status == InvoiceStatus.DRAFT
    stream = io.StringIO()
    with override("en"):
        document = invoice_document(invoice)
        csv_export.write(document, stream)
    assert document.check()
    rows = list(csv.reader(io.StringIO(stream.getvalue().removeprefix("\ufeff"))))
    # Lines: amount, rate, tax, amount incl. tax. The 6% group's 270.01 is spread by
    # cumulative rounding: fee 300.015 -> 300.02, then 270.0132 -> 270.01 less 300.02 =
    # -30.01 on the credit.
    assert [row[7:11] for row in rows[1:4]] == [
        ["60000.00", "13.00", "7800.00", "67800.00"],
        ["5000.25", "6.00", "300.02", "5300.27"],
        ["-500.03", "6.00", "-30.01", "-530.04"],
    ]
    assert [row[3:4] + row[7:11] for row in rows[4:6]] == [
        ["at 6% tax", "4500.22", "6.00", "270.01", "4770.23"],
        ["at 13% tax", "60000.00", "13.00", "7800.00", "67800.00"],
    ]
    assert rows[-3][7] == "64500.22" and rows[-2][9] == "8070.01" and rows[-1][10] == "72570.23"

    with override("zh-hans"):
        body = xlsx.render(invoice_document(invoice))
    sheet = load_workbook(io.BytesIO(body)).active
    numbered = [row for row in sheet.iter_rows() if isinstance(row[0].value, int)]
    assert [(r[7].value, r[8].value) for r in numbered] == [
        (0.13, 7800),
        (0.06, 300.02),
        (0.06, -30.01),
    ]
    subtotals = [row for row in sheet.iter_rows() if row[1].value == "小计"]
    assert [(r[6].value, r[7].value, r[8].value) for r in subtotals] == [
        (4500.22, 0.06, 270.01),
        (60000, 0.13, 7800),
    ]


def test_the_rent_rate_is_hashed_only_where_it_differs_from_the_service_rate():
    # A version hashed before rent had its own rate (rent = service rate after the
    # migration, or an older bundle without the field) keeps its content and hash; one
    # with two rates is hashed with both, so changing either shows.
    entry = {
        "lease": "L-1",
        "version": 1,
        "effective_from": "2026-11-01T00:00:00Z",
        "created_at": "2026-11-01T00:00:00Z",
        "amendment_reason": "",
        "contracted_bandwidth_gbps": "100.00",
        "technology": "roce",
        "sla_threshold_percent": "95.00",
        "collective_busbw_floor_gbps": None,
        "latency_ceiling_us": None,
        "probe_cadence_s": {"throughput": 3600},
        "heavy_probe_policy": "any_time",
        "heavy_probe_windows": [],
        "maintenance_windows": [],
        "incident_after_violations": 3,
        "credit_tiers": [],
        "credit_cap_percent": "50.00",
        "credit_base": "network_fee",
        "contracted_base_per_month": "0.00",
        "billing_mode": "monthly",
        "node_rent_per_month": "30000.00",
        "network_fee_per_month": "5000.00",
        "price_per_gb": "0.0000",
        "price_per_mbps_p95": "0.0000",
        "tax_rate_percent": "6.00",
        "billing_starts_on_acceptance": False,
        "acknowledgement": None,
    }
    old = terms_content(entry)
    assert "rent_tax_rate_percent" not in old
    assert terms_content({**entry, "rent_tax_rate_percent": "6.00"}) == old
    both = terms_content({**entry, "rent_tax_rate_percent": "13.00"})
    assert both == {**old, "rent_tax_rate_percent": "13.00"}


def test_totals_by_rate_round_once_per_group_not_per_line():
    # Three lines of 0.10 at 6%: 0.30 x 6% = 0.018 -> 0.02 (per line 3 x 0.01 = 0.03);
    # one of 100.00 at 13% = 13.00. 6 and 6.00 are one group.
    result = invoice_totals_by_rate(
        [(D("0.10"), 6), (D("0.10"), D("6.00")), (D("0.10"), D("6")), (D("100.00"), D("13"))]
    )
    assert [(g.tax_rate_percent, g.subtotal, g.tax) for g in result.groups] == [
        (D("6.00"), D("0.30"), D("0.02")),
        (D("13.00"), D("100.00"), D("13.00")),
    ]
    assert (result.subtotal, result.tax, result.total) == (D("100.30"), D("13.02"), D("113.32"))
