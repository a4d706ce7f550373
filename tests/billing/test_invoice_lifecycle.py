"""The invoice lifecycle a finance team files: draft → issued → paid, issued → void,
numbers without gaps per seller and year, dates in the tenant's zone, identities frozen,
credit notes (红字发票) and late results carried onto the next open draft.

October 2026 (31 days) fully leased on one node at the factory's terms: rent 45,000.00,
network fee 6,000.00, tax 6%."""

import threading
from datetime import UTC, date, datetime
from decimal import Decimal as D

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from benchmarks.models import ProbeRun
from billing import invoicing, services
from billing.choices import InvoiceStatus, LineKind
from billing.ingest import ingest_all
from billing.models import CreditNote, DocumentCounter, HourlyRollup, Invoice, InvoiceImmutable
from leases import services as lease_services
from leases.choices import LeaseStatus, ProbeKind
from tests.factories import NodeFactory, TenantFactory, at, make_lease, make_run

OCTOBER, NOVEMBER, DECEMBER = "2026-10", "2026-11", "2026-12"


def leased(slug: str, **tenant):  # type: ignore[no-untyped-def]
    tenant = TenantFactory(slug=slug, **tenant)
    lease = make_lease(tenant=tenant, nodes=[NodeFactory()], starts_at=at("2026-10-01 00:00"))
    return tenant, lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def october_draft(tenant):  # type: ignore[no-untyped-def]
    return invoicing.draft_invoice(tenant=tenant, period=OCTOBER, now=at("2026-11-01 00:30"))


def throughput(lease, *, passed: int, failed: int):  # type: ignore[no-untyped-def]
    return HourlyRollup.objects.create(
        lease=lease,
        kind=ProbeKind.THROUGHPUT,
        hour=datetime(2026, 10, 10, 0, tzinfo=UTC),
        passed=passed,
        failed=failed,
    )


# --------------------------------------------------------------------------------------
# Numbers and dates
# --------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_issuers_get_consecutive_numbers_without_a_gap():
    drafts = [october_draft(leased(slug)[0]) for slug in ("zhiyuan", "lingxi", "kunpeng")]
    start = threading.Barrier(len(drafts))
    numbers, errors = [], []

    def issue(invoice):  # type: ignore[no-untyped-def]
        try:
            start.wait()
            numbers.append(
                services.issue_invoice(invoice=invoice, now=at("2026-11-02 09:00")).number
            )
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=issue, args=(draft,)) for draft in drafts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(numbers) == ["GL-2026-000001", "GL-2026-000002", "GL-2026-000003"]
    assert DocumentCounter.objects.get(series="invoice", year=2026).last == 3


@pytest.mark.django_db
def test_dates_are_the_tenants_and_the_series_restarts_each_year(settings):
    settings.INVOICE_PAYMENT_TERMS_DAYS = 30
    settings.INVOICE_NUMBER_PREFIX = "ZS"
    zhiyuan, _lease = leased("zhiyuan")
    # 2026-11-30 16:30Z is already 1 December 00:30 in Shanghai: issued on 12-01, due
    # 30 days later on 12-31.
    october = services.issue_invoice(
        invoice=october_draft(zhiyuan), now=datetime(2026, 11, 30, 16, 30, tzinfo=UTC)
    )
    assert (october.number, october.issue_date, october.due_date) == (
        "ZS-2026-000001",
        date(2026, 12, 1),
        date(2026, 12, 31),
    )
    # 2026-12-31 15:59Z is 23:59 on New Year's Eve in Shanghai: still 2026.
    november = services.issue_invoice(
        invoice=invoicing.draft_invoice(tenant=zhiyuan, period=NOVEMBER),
        now=datetime(2026, 12, 31, 15, 59, tzinfo=UTC),
    )
    assert (november.number, november.issue_date) == ("ZS-2026-000002", date(2026, 12, 31))
    # One minute later it is 2027 in Shanghai: the series starts again at 1.
    december = services.issue_invoice(
        invoice=invoicing.draft_invoice(
            tenant=zhiyuan, period=DECEMBER, now=datetime(2026, 12, 31, 16, 0, tzinfo=UTC)
        ),
        now=datetime(2026, 12, 31, 16, 0, tzinfo=UTC),
    )
    assert (december.number, december.issue_date, december.due_date) == (
        "ZS-2027-000001",
        date(2027, 1, 1),
        date(2027, 1, 31),
    )


@pytest.mark.django_db
def test_issuing_freezes_both_identities(settings):
    settings.INVOICE_SELLER = {**settings.INVOICE_SELLER, "legal_name": "深圳算力有限公司"}
    tenant, _lease = leased(
        "zhiyuan",
        name="智元",
        legal_name="深圳智元科技有限公司",
        tax_id="91440300MA5G12345Q",
        invoice_address="深圳市福田区 1 号",
        invoice_phone="0755-1234",
        bank_name="招商银行",
        bank_account="7559 0000",
    )
    issued = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-02 09:00"))
    tenant.invoice_address = "广州市天河区 9 号"
    tenant.save()
    settings.INVOICE_SELLER = {**settings.INVOICE_SELLER, "legal_name": "Renamed Ltd"}
    issued.refresh_from_db()
    assert issued.buyer == {
        "legal_name": "深圳智元科技有限公司",
        "tax_id": "91440300MA5G12345Q",
        "address": "深圳市福田区 1 号",
        "phone": "0755-1234",
        "bank": "招商银行",
        "account": "7559 0000",
    }
    assert issued.seller["legal_name"] == "深圳算力有限公司"
    summary = invoicing.invoice_summary(issued)
    assert summary["buyer"]["address"] == "深圳市福田区 1 号"
    assert summary["number"] == "GL-2026-000001"


# --------------------------------------------------------------------------------------
# Never edited
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_issued_invoice_refuses_every_edit():
    tenant, _lease = leased("zhiyuan")
    issued = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-02 09:00"))
    message = (
        "Invoice GL-2026-000001 (zhiyuan 2026-10) is issued and can never be edited; a "
        "correction is a credit note that references it."
    )
    issued.total = D("1.00")
    with pytest.raises(InvoiceImmutable) as refused:
        issued.save()
    assert refused.value.messages == [message]
    line = issued.lines.first()
    line.amount = D("1.00")
    with pytest.raises(InvoiceImmutable, match="can never be edited"):
        line.save()
    with pytest.raises(InvoiceImmutable, match="can never be edited"):
        line.delete()
    with pytest.raises(InvoiceImmutable, match="can never be edited"):
        issued.delete()
    with pytest.raises(ValidationError, match="is issued; it cannot change"):
        invoicing.draft_invoice(tenant=tenant, period=OCTOBER)
    with pytest.raises(services.LifecycleError, match="only a draft can be issued"):
        services.issue_invoice(invoice=issued)
    issued.refresh_from_db()
    assert (issued.subtotal, issued.tax, issued.total) == (
        D("51000.00"),
        D("3060.00"),
        D("54060.00"),
    )


@pytest.mark.django_db
def test_void_needs_a_reason_keeps_the_number_and_reopens_the_month():
    tenant, _lease = leased("zhiyuan")
    first = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-02 09:00"))
    with pytest.raises(ValidationError, match="A reason is required to void an invoice"):
        services.void_invoice(invoice=first, reason="  ")
    voided = services.void_invoice(invoice=first, reason="Issued to the wrong legal entity.")
    assert (voided.status, voided.number) == (InvoiceStatus.VOID, "GL-2026-000001")
    # The month is drafted and issued again, with the next number; the void one stays.
    again = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-03 09:00"))
    assert again.pk != first.pk and again.number == "GL-2026-000002"
    paid = services.mark_paid(invoice=again)
    with pytest.raises(services.LifecycleError, match="only an issued, unpaid invoice"):
        services.void_invoice(invoice=paid, reason="Too late.")
    assert Invoice.objects.filter(tenant=tenant, period=OCTOBER).count() == 2


# --------------------------------------------------------------------------------------
# Credit notes
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_credit_notes_are_numbered_reference_the_invoice_and_carry_its_tax():
    tenant, _lease = leased("zhiyuan")
    invoice = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-02 09:00"))
    rent, fee = invoice.lines.order_by("position")
    assert (rent.amount, fee.amount) == (D("45000.00"), D("6000.00"))

    # 1,234.56 off the network fee: tax 6% of -1,234.56 = -74.0736 -> -74.07.
    first = services.create_credit_note(
        invoice=invoice,
        reason="Network fee overstated for the maintenance week.",
        corrections=[services.Correction(position=2, amount=D("1234.56"))],
        now=at("2026-11-20 10:00"),
    )
    assert (first.number, first.invoice, first.issue_date) == (
        "GL-CN-2026-000001",
        invoice,
        date(2026, 11, 20),
    )
    [line] = first.lines.all()
    assert (line.original_line, line.amount, line.tax_rate_percent) == (
        fee,
        D("-1234.56"),
        D("6.00"),
    )
    assert (first.subtotal, first.tax, first.total) == (
        D("-1234.56"),
        D("-74.07"),
        D("-1308.63"),
    )
    assert first.buyer == invoice.buyer and first.seller == invoice.seller

    # 6,000.00 - 1,234.56 = 4,765.44 is left of the fee: 5,000 more is refused.
    with pytest.raises(ValidationError) as refused:
        services.create_credit_note(
            invoice=invoice,
            reason="More.",
            corrections=[services.Correction(position=2, amount=D("5000.00"))],
        )
    assert refused.value.message_dict["lines"] == [
        "Line 2 is 6000.00 and 4765.44 of it is left to credit; a correction takes off "
        "between 0.01 and what is left (asked: 5000.00)."
    ]
    with pytest.raises(ValidationError, match="A reason is required to issue a credit note"):
        services.create_credit_note(invoice=invoice, reason="")

    # The full reversal takes what is left: -45,000.00 and -4,765.44 = -49,765.44; tax
    # -2,985.9264 -> -2,985.93; total -52,751.37. Both notes' tax: -74.07 - 2,985.93 =
    # -3,060.00, the invoice's tax to the fen.
    rest = services.create_credit_note(
        invoice=invoice, reason="Wrong buyer.", now=at("2026-11-21 10:00")
    )
    assert rest.number == "GL-CN-2026-000002"
    assert [(line.original_line.position, line.amount) for line in rest.lines.all()] == [
        (1, D("-45000.00")),
        (2, D("-4765.44")),
    ]
    assert (rest.subtotal, rest.tax, rest.total) == (
        D("-49765.44"),
        D("-2985.93"),
        D("-52751.37"),
    )
    assert first.tax + rest.tax == -invoice.tax
    with pytest.raises(ValidationError, match="must take money off"):
        services.create_credit_note(invoice=invoice, reason="Again.")
    with pytest.raises(InvoiceImmutable):
        rest.save()
    # Its invoice cannot be voided any more, and a draft takes no credit note.
    with pytest.raises(services.LifecycleError, match="has credit notes"):
        services.void_invoice(invoice=invoice, reason="No.")
    draft = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER, now=at("2026-11-21 10:00"))
    with pytest.raises(services.LifecycleError, match="credit notes correct issued invoices"):
        services.create_credit_note(invoice=draft, reason="No.")
    assert CreditNote.objects.filter(invoice=invoice).count() == 2


# --------------------------------------------------------------------------------------
# Late results
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_late_result_between_next_months_draft_and_its_issue_is_adjusted_once():
    tenant, lease = leased("zhiyuan")
    # At issue: 9,949 / 10,000 = 99.49% -> 10% of 6,000.00 = -600.00.
    rollup = throughput(lease, passed=9949, failed=51)
    october = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-01 01:00"))
    assert october.lines.get(kind=LineKind.SLA_CREDIT).amount == D("-600.00")
    november = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER, now=at("2026-11-15 00:00"))
    assert not november.lines.filter(kind=LineKind.ADJUSTMENT).exists()

    # Late results after November's draft: 9,949 / 10,100 = 98.505% -> 25% = -1,500.00.
    rollup.failed = 151
    rollup.save()
    november = services.issue_invoice(invoice=november, now=at("2026-12-01 02:00"))
    [adjustment] = november.lines.filter(kind=LineKind.ADJUSTMENT)
    # -1,500.00 - (-600.00) = -900.00. November: 45,000 + 6,000 - 900 = 50,100.00, tax
    # 3,006.00, total 53,106.00.
    assert adjustment.amount == D("-900.00")
    assert adjustment.detail["adjusted_invoice_number"] == "GL-2026-000001"
    assert (november.subtotal, november.tax, november.total) == (
        D("50100.00"),
        D("3006.00"),
        D("53106.00"),
    )

    # Nothing changed since: December carries nothing (the -900.00 is not counted twice).
    december = invoicing.draft_invoice(tenant=tenant, period=DECEMBER, now=at("2026-12-02 00:00"))
    assert not december.lines.filter(kind=LineKind.ADJUSTMENT).exists()

    # October changes again, two months on: 9,000 / 10,000 = 90% -> 50% = -3,000.00.
    # Billed so far -600.00 (October) - 900.00 (November) = -1,500.00: December carries
    # -3,000.00 - (-1,500.00) = -1,500.00.
    rollup.passed, rollup.failed = 9000, 1000
    rollup.save()
    december = invoicing.draft_invoice(tenant=tenant, period=DECEMBER, now=at("2026-12-02 00:00"))
    [late] = december.lines.filter(kind=LineKind.ADJUSTMENT)
    assert late.amount == D("-1500.00")
    assert late.description == (
        f"Adjustment for 2026-10: SLA credit of {lease.reference} recomputed from late "
        "results: -1500.00 → -3000.00"
    )
    assert [source["amount"] for source in late.detail["billed_from"]] == ["-600.00", "-900.00"]


@pytest.mark.django_db
def test_a_commercial_credit_is_never_billed_back_and_a_correction_is_until_the_data_agrees():
    tenant, _lease = leased("zhiyuan")
    october = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-01 01:00"))
    fee = october.lines.get(kind=LineKind.NETWORK_FEE)
    # Goodwill: 1,000.00 off the 6,000.00 fee, a decision no recomputation knows about.
    goodwill = services.create_credit_note(
        invoice=october,
        reason="Goodwill for the maintenance week.",
        corrections=[services.Correction(position=fee.position, amount=D("1000.00"))],
        kind="commercial",
        now=at("2026-11-05 10:00"),
    )
    assert goodwill.kind == "commercial"
    november = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER, now=at("2026-11-15 00:00"))
    assert not november.lines.filter(kind=LineKind.ADJUSTMENT).exists()

    # A correction of 500.00 while the data still says 6,000.00: the recomputation bills
    # the 500.00 back on the next draft (the data must be fixed for the correction to hold).
    services.create_credit_note(
        invoice=october,
        reason="Fee overstated.",
        corrections=[services.Correction(position=fee.position, amount=D("500.00"))],
        now=at("2026-11-06 10:00"),
    )
    november = invoicing.draft_invoice(tenant=tenant, period=NOVEMBER, now=at("2026-11-15 00:00"))
    [back] = november.lines.filter(kind=LineKind.ADJUSTMENT)
    assert back.amount == D("500.00")
    assert back.detail["billed_from"][-1]["credit_note"] == "GL-CN-2026-000002"
    with pytest.raises(ValidationError, match="Unknown credit note kind"):
        services.create_credit_note(invoice=october, reason="x", kind="gift")


# --------------------------------------------------------------------------------------
# Issuing waits for the month's runs
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_issuing_waits_for_unfinished_and_uningested_runs_unless_forced():
    tenant, lease = leased("zhiyuan")
    draft = october_draft(tenant)
    running = make_run(lease, slot=at("2026-10-31 23:00"), state="running")
    ProbeRun.objects.filter(pk=running.pk).update(finished_at=None, verdict="none")
    with pytest.raises(services.LifecycleError) as refused:
        services.issue_invoice(invoice=draft, now=at("2026-11-01 01:00"))
    assert refused.value.messages == [
        "Invoice zhiyuan 2026-10 cannot be issued yet: 1 probe run of zhiyuan 2026-10's "
        "period has not finished yet. Wait, or force it with a reason."
    ]
    ProbeRun.objects.filter(pk=running.pk).update(state="ok", finished_at=at("2026-11-01 00:01"))
    make_run(lease, slot=at("2026-10-31 22:00"))
    with pytest.raises(services.LifecycleError, match="2 finished probe runs of zhiyuan 2026-10"):
        services.issue_invoice(invoice=draft, now=at("2026-11-01 01:00"))
    with pytest.raises(ValidationError, match="A reason is required to issue an invoice by force"):
        services.issue_invoice(invoice=draft, force=True, now=at("2026-11-01 01:00"))

    issued = services.issue_invoice(
        invoice=draft, force=True, reason="Month-end close.", now=at("2026-11-01 01:00")
    )
    assert issued.status == InvoiceStatus.ISSUED
    assert issued.forced_reason == "Month-end close."
    assert issued.forced_over == [
        "2 finished probe runs of zhiyuan 2026-10's period are not ingested yet."
    ]


@pytest.mark.django_db
def test_once_ingested_the_month_issues_without_force():
    tenant, lease = leased("zhiyuan")
    make_run(lease, slot=at("2026-10-31 22:00"), trigger="manual")
    ingest_all(notify=False)
    issued = services.issue_invoice(invoice=october_draft(tenant), now=at("2026-11-01 01:00"))
    assert (issued.number, issued.forced_reason, issued.forced_over) == ("GL-2026-000001", "", [])
