"""Vouchers (代金券) after their month was billed (issue 32 item 5, the gaps): a late result
that changes a voucher month's SLA credit, and a credit note on an invoice a voucher paid
part of. The world is ``test_vouchers``': lease A's November (fee 6,543.21, compliance
88.333 %, 25 %: a voucher of 1,635.80, GL-VC-2026-000001, issued 2026-12-01 02:00, valid
until 2027-12-01 02:00) and lease B from December (1,000.00 a month after tax).

Late results, each a link check of November ingested after November's invoice was issued
(the credit is on the link minutes: 6,360 available of 7,200 before):

- failed for a day (1,440 minutes down): 6,360 / 8,640 = 73.611 %, below 80: 50 % of
  6,543.21 = 3,271.605 -> 3,271.61; 1,635.81 more than the voucher;
- passed for a day (1,440 minutes up): 7,800 / 8,640 = 90.278 %, below 96: 10 % =
  654.321 -> 654.32; 981.48 less than the voucher.

Credit notes on January (total 1,000.00, 635.80 of it paid by the voucher): each gives the
voucher back its share of what the notes credited so far, 635.80 x credited / 1,000.00,
half-up, less what earlier notes gave back.
"""

import copy
from decimal import Decimal as D

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from accounts.choices import Role
from billing import audit, services, vouchers
from billing.ingest import ingest_all
from billing.models import Invoice, Voucher, VoucherReduction, VoucherReturn
from tests.billing.test_degraded_minutes import DAY_S, link
from tests.billing.test_vouchers import (
    AFTER_DECEMBER,
    AFTER_JANUARY,
    AFTER_NOVEMBER,
    DECEMBER,
    JANUARY,
    NOVEMBER,
    issue,
    lease_a,
    lease_b,
    owed,
    published,
)
from tests.factories import MembershipFactory, TenantFactory, at

pytestmark = pytest.mark.django_db

LATE_SLOT = at("2026-11-25 00:00")


@pytest.fixture
def world():  # type: ignore[no-untyped-def]
    """test_vouchers' world: lease A in voucher mode, lease B from December."""
    tenant = TenantFactory(slug="acme", tax_id="91110108551385082Q")
    a = lease_a(tenant, "voucher")
    b = lease_b(tenant)
    ingest_all(notify=False)
    return tenant, a, b


def late_link(lease, verdict: str) -> None:  # type: ignore[no-untyped-def]
    """A day-long link check of 25 November, ingested now (after November was issued)."""
    link(lease, LATE_SLOT, DAY_S, verdict=verdict)
    ingest_all(notify=False)


def left(voucher: Voucher, when) -> D:  # type: ignore[no-untyped-def]
    return vouchers.standing(
        vouchers.with_ledger(Voucher.objects.filter(pk=voucher.pk)).get(), when
    )


# --- 1. late results ---------------------------------------------------------------------


def test_line_mode_carries_the_same_late_failure_as_an_adjustment_line():
    """The control: a line-mode month gets -1,635.81 on December (-1,635.80 -> -3,271.61)."""
    tenant = TenantFactory()
    a = lease_a(tenant, "line")
    lease_b(tenant)
    ingest_all(notify=False)
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    late_link(a, "fail")
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    assert [line.amount for line in december.lines.filter(kind="adjustment")] == [D("-1635.81")]
    assert not Voucher.objects.exists()


def test_a_late_failure_issues_a_supplementary_voucher_linked_to_the_first(world):
    tenant, a, _b = world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    first = Voucher.objects.get()
    late_link(a, "fail")
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    # No line: December's VAT lines are its own month's only.
    assert not december.lines.filter(kind="adjustment").exists()
    assert december.total == D("1000.00")
    supplement = Voucher.objects.exclude(pk=first.pk).get()
    assert (
        supplement.number,
        supplement.amount,
        supplement.supplements,
        supplement.period,
        supplement.source_invoice,
    ) == ("GL-VC-2027-000001", D("1635.81"), first, NOVEMBER, december)
    assert supplement.reason == (
        f"SLA credit of {a.reference} for 2026-11 recomputed from late results: voucher "
        "1635.80 → 3271.61"
    )
    assert (supplement.detail["given_before"], supplement.detail["recomputed"]) == (
        "1635.80",
        "3271.61",
    )
    # Valid 12 months from its own issue, like every voucher.
    assert (supplement.issued_at, supplement.expires_at) == (AFTER_DECEMBER, at("2028-01-01 02:00"))
    # December uses the first voucher only (a voucher is never used by the invoice that
    # issued it): 1,000.00 of it, nothing to pay.
    assert [(r.voucher.number, r.amount) for r in december.voucher_redemptions.all()] == [
        ("GL-VC-2026-000001", D("1000.00"))
    ]
    # January: the earliest expiry first, 635.80 of the first, then 364.20 of the supplement.
    january = issue(tenant, JANUARY, AFTER_JANUARY)
    assert [(r.voucher.number, r.amount) for r in january.voucher_redemptions.all()] == [
        ("GL-VC-2026-000001", D("635.80")),
        ("GL-VC-2027-000001", D("364.20")),
    ]
    assert owed(january) == D("0.00")
    assert left(supplement, AFTER_JANUARY).left == D("1271.61")
    # Issued again later, nothing is carried twice.
    february = issue(tenant, "2027-02", at("2027-03-01 02:00"))
    assert Voucher.objects.count() == 2
    assert [r.amount for r in february.voucher_redemptions.all()] == [D("1000.00")]
    # The month's invoice cannot be voided now: December carries a change to its vouchers.
    with pytest.raises(ValidationError, match="the invoices of 2026-12 carry adjustments"):
        services.void_invoice(invoice=Invoice.objects.get(period=NOVEMBER), reason="x")

    # The bundle of November carries both vouchers; the verifier re-derives them.
    doc = audit.signed_bundle(lease=a, period=NOVEMBER, now=at("2027-03-01 03:00"))
    found, said = audit.verify_report(doc, published())
    assert found == []
    assert [v["number"] for v in doc["bundle"]["invoice"]["vouchers_issued"]] == [
        "GL-VC-2026-000001",
        "GL-VC-2027-000001",
    ]
    assert any(
        note.startswith("vouchers: 2 issued (GL-VC-2026-000001, GL-VC-2027-000001)")
        and "adjusted them to 3271.61 in all" in note
        for note in said
    )
    # Forged: the supplement said to be the whole new credit (3,271.61), re-signed.
    bundle = copy.deepcopy(doc["bundle"])
    bundle["invoice"]["vouchers_issued"][1]["amount"] = "3271.61"
    assert audit.verify(audit.sign_bundle(bundle), published()) == [
        "voucher GL-VC-2027-000001 amount: the bundle says 3271.61, its month's credit was "
        "recomputed from 1635.80 to 3271.61: a supplement of 1635.81",
        "vouchers: the month's vouchers give 4907.41 in all, the credit recomputed is "
        "-3271.61: 3271.61",
    ]


def test_a_late_pass_before_the_voucher_is_used_reduces_it(world):
    tenant, a, _b = world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    voucher = Voucher.objects.get()
    late_link(a, "pass")
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    [cut] = VoucherReduction.objects.all()
    # 1,635.80 -> 654.32: 981.48 off the 1,635.80 left, nothing in excess.
    assert (cut.voucher, cut.invoice, cut.amount, cut.excess) == (
        voucher,
        december,
        D("981.48"),
        D("0.00"),
    )
    # December then uses what is left: 654.32 of its 1,000.00; 345.68 to pay.
    assert [r.amount for r in december.voucher_redemptions.all()] == [D("654.32")]
    assert owed(december) == D("345.68")
    state = left(voucher, AFTER_DECEMBER)
    assert (state.used, state.reduced, state.left, state.state) == (
        D("654.32"),
        D("981.48"),
        D("0.00"),
        "redeemed",
    )
    doc = audit.signed_bundle(lease=a, period=NOVEMBER, now=AFTER_JANUARY)
    assert audit.verify(doc, published()) == []
    # Forged: the reduction said to be smaller, so the voucher kept more.
    bundle = copy.deepcopy(doc["bundle"])
    bundle["invoice"]["vouchers_issued"][0]["reductions"][0]["amount"] = "900.00"
    assert audit.verify(audit.sign_bundle(bundle), published()) == [
        "voucher GL-VC-2026-000001 reduction on invoice GL-2027-000001: 900.00 taken off and "
        "0.00 not recovered, but the month's credit was recomputed from 1635.80 to 654.32: "
        "981.48",
        "vouchers: the month's vouchers give 735.80 in all, the credit recomputed is "
        "-654.32: 654.32",
    ]


def test_a_late_pass_after_the_voucher_was_used_reduces_what_is_left_and_records_the_excess(
    world,
):
    tenant, a, _b = world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    voucher = Voucher.objects.get()
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)  # uses 1,000.00: 635.80 left
    late_link(a, "pass")
    january = issue(tenant, JANUARY, AFTER_JANUARY)
    [cut] = VoucherReduction.objects.all()
    # 981.48 to take off, 635.80 left: 635.80 taken, 345.68 already used (not recovered).
    assert (cut.invoice, cut.amount, cut.excess) == (january, D("635.80"), D("345.68"))
    assert not january.voucher_redemptions.exists()
    assert owed(january) == D("1000.00")
    # December, issued, stays as it was.
    assert owed(december) == D("0.00")
    state = left(voucher, AFTER_JANUARY)
    assert (state.used, state.reduced, state.left) == (D("1000.00"), D("635.80"), D("0.00"))
    # Nothing more next month: the month's vouchers give 1,635.80 - 981.48 = 654.32.
    issue(tenant, "2027-02", at("2027-03-01 02:00"))
    assert VoucherReduction.objects.count() == 1
    doc = audit.signed_bundle(lease=a, period=NOVEMBER, now=at("2027-03-01 03:00"))
    assert audit.verify(doc, published()) == []
    # Forged: an excess recorded while the voucher still had something left.
    bundle = copy.deepcopy(doc["bundle"])
    row = bundle["invoice"]["vouchers_issued"][0]["reductions"][0]
    row["amount"], row["excess"] = "535.80", "445.68"
    assert audit.verify(audit.sign_bundle(bundle), published()) == [
        "voucher GL-VC-2026-000001 reduction on invoice GL-2027-000002: 445.68 recorded as "
        "not recovered while 100.00 was left unused"
    ]


# --- 2. credit notes on an invoice a voucher paid part of ----------------------------------


def _january(world):  # type: ignore[no-untyped-def]
    tenant, _a, _b = world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    issue(tenant, DECEMBER, AFTER_DECEMBER)
    january = issue(tenant, JANUARY, AFTER_JANUARY)
    assert [r.amount for r in january.voucher_redemptions.all()] == [D("635.80")]
    return tenant, january, Voucher.objects.get()


def fee_line(invoice: Invoice) -> int:
    return invoice.lines.get(kind="network_fee").position


def test_a_full_credit_note_gives_the_voucher_back_what_the_invoice_used(world):
    tenant, january, voucher = _january(world)
    # A commercial credit (goodwill): no recomputation bills it back on February.
    note = services.create_credit_note(
        invoice=january, reason="Goodwill.", kind="commercial", now=at("2027-02-10 10:00")
    )
    assert note.total == D("-1000.00")
    [back] = VoucherReturn.objects.all()
    assert (back.credit_note, back.amount, back.redemption.invoice) == (note, D("635.80"), january)
    assert owed(january) == D("0.00")
    # Usable again until the voucher's own expiry (2027-12-01 02:00).
    state = left(voucher, at("2027-02-10 10:00"))
    assert (state.used, state.left, state.state) == (D("1000.00"), D("635.80"), "partly_redeemed")
    assert vouchers.standing(voucher, at("2027-12-01 02:00")).state == "expired"
    february = issue(tenant, "2027-02", at("2027-03-01 02:00"))
    assert [r.amount for r in february.voucher_redemptions.all()] == [D("635.80")]
    assert owed(february) == D("364.20")


def test_partial_credit_notes_give_back_the_vouchers_share_cumulatively(world):
    _tenant, january, voucher = _january(world)
    # 10.00 off the fee: tax 0.60, the note -10.60. 635.80 x 10.60 / 1,000.00 = 6.73948
    # -> 6.74 back. Left to pay: net 989.40 - (635.80 - 6.74 = 629.06) = 360.34.
    first = services.create_credit_note(
        invoice=january,
        reason="Fee overcharged.",
        corrections=[services.Correction(fee_line(january), D("10.00"))],
        now=at("2027-02-10 10:00"),
    )
    assert first.total == D("-10.60")
    assert [r.amount for r in first.voucher_returns.all()] == [D("6.74")]
    assert owed(january) == D("360.34")
    assert left(voucher, at("2027-02-10 10:00")).left == D("6.74")
    # The rest reversed: 1,000.00 credited in all: 635.80 back in all, 629.06 by this note.
    rest = services.create_credit_note(
        invoice=january, reason="Reversed.", now=at("2027-02-11 10:00")
    )
    assert rest.total == D("-989.40")
    assert [r.amount for r in rest.voucher_returns.all()] == [D("629.06")]
    assert owed(january) == D("0.00")
    assert left(voucher, at("2027-02-11 10:00")).left == D("635.80")

    doc = audit.signed_bundle(lease=_b_of(january), period=JANUARY, now=at("2027-02-12 00:00"))
    found, _said = audit.verify_report(doc, published())
    assert found == []
    [applied] = doc["bundle"]["invoice"]["vouchers_applied"]
    assert [(r["credit_note_number"], r["amount"]) for r in applied["returns"]] == [
        (first.number, "6.74"),
        (rest.number, "629.06"),
    ]
    # Forged: the first note said to give back 10.60 (all of it to the voucher).
    bundle = copy.deepcopy(doc["bundle"])
    bundle["invoice"]["vouchers_applied"][0]["returns"][0]["amount"] = "10.60"
    found = audit.verify(audit.sign_bundle(bundle), published())
    assert found == [
        f"voucher GL-VC-2026-000001: credit note {first.number} gives back 10.60 of the "
        "635.80 the invoice used; its share of 10.60 credited of 1000.00 is 6.74"
    ]


def test_a_credit_note_after_payment_refunds_only_what_was_paid_in_money(world):
    _tenant, january, voucher = _january(world)
    services.mark_paid(invoice=january, now=at("2027-02-05 10:00"))  # 364.20 paid
    services.create_credit_note(invoice=january, reason="Reversed.", now=at("2027-02-10 10:00"))
    january.refresh_from_db()
    from billing.balance import balance

    figures = balance(january, january.credit_notes.all(), january.voucher_redemptions.all())
    # 1,000.00 credited: 635.80 back to the voucher, 364.20 back in money.
    assert (figures.refund, figures.vouchers) == (D("364.20"), D("0.00"))
    assert left(voucher, at("2027-02-10 10:00")).left == D("635.80")


def _b_of(invoice: Invoice):  # type: ignore[no-untyped-def]
    return invoice.lines.get(kind="network_fee").lease


def test_a_late_change_waits_for_the_next_issue_and_a_void_of_it_undoes_it(world):
    """The supplement is issued with December; voiding December voids it (unused), and
    December issued again issues it again (the next number)."""
    tenant, a, _b = world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    late_link(a, "fail")
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    services.void_invoice(invoice=december, reason="wrong buyer", now=at("2027-01-02 10:00"))
    assert Voucher.objects.get(number="GL-VC-2027-000001").voided_at == at("2027-01-02 10:00")
    again = issue(tenant, DECEMBER, at("2027-01-03 10:00"))
    supplement = Voucher.objects.get(source_invoice=again)
    assert (supplement.number, supplement.amount) == ("GL-VC-2027-000002", D("1635.81"))
    assert Voucher.objects.filter(voided_at__isnull=True).count() == 2


# --- 3. the tenant's voucher list ------------------------------------------------------------


def test_the_portal_lists_the_tenants_vouchers_with_their_ledger(world):
    """After the supplement scenario and January: GL-VC-2026-000001 1,635.80, used 1,635.80
    (1,000.00 by December, 635.80 by January), 0.00 left, redeemed in full; GL-VC-2027-000001
    1,635.81, used 364.20, 1,271.61 left, valid until 2028-01-01 02:00 (Asia/Shanghai)."""
    tenant, a, _b = world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    late_link(a, "fail")
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    january = issue(tenant, JANUARY, AFTER_JANUARY)
    viewer = MembershipFactory(role=Role.VIEWER, tenant=tenant)
    first, supplement = Voucher.objects.order_by("issued_at")
    for language, words in (
        ("en", ("redeemed in full", "partly redeemed", "supplements GL-VC-2026-000001")),
        ("zh-hans", ("已全额抵扣", "部分已抵扣", "补充 GL-VC-2026-000001")),
    ):
        page = Client(HTTP_ACCEPT_LANGUAGE=language)
        page.force_login(viewer.user)
        html = page.get("/vouchers/").content.decode()
        assert '<table class="cards vouchers">' in html
        for word in words:
            assert word in html, (language, word)
        assert html.count('data-label="') == 2 * 10
        assert "2028-01-01 02:00 (Asia/Shanghai)" in html
        assert "¥1,271.61" in html and "¥364.20" in html and "¥1,635.81" in html
        assert f'<a href="/invoices/{december.pk}/">GL-2027-000001</a>, ' in html
        assert f'<a href="/invoices/{january.pk}/">GL-2027-000002</a>' in html
        detail = page.get(f"/vouchers/{supplement.pk}/").content.decode()
        assert "GL-VC-2026-000001" in detail and supplement.reason in detail
    invoices = Client(HTTP_ACCEPT_LANGUAGE="en")
    invoices.force_login(viewer.user)
    assert 'href="/vouchers/"' in invoices.get("/invoices/").content.decode()
    # Another tenant's member: no rows, and the voucher's page does not exist.
    stranger = Client(HTTP_ACCEPT_LANGUAGE="en")
    stranger.force_login(MembershipFactory(role=Role.ADMIN).user)
    assert "No vouchers yet." in stranger.get("/vouchers/").content.decode()
    assert stranger.get(f"/vouchers/{first.pk}/").status_code == 404


def test_the_api_shows_what_late_results_and_credit_notes_did_to_a_voucher(world):
    """The same ledger through /api/v1/vouchers/, as an auditor's script reads it: a late
    pass reduces November's voucher by 981.48 before it is used (654.32 left), December
    uses all 654.32, and a full credit note on December gives the 654.32 back, so nothing
    counts as redeemed and 654.32 is left, open until 2027-12-01 02:00."""
    tenant, a, _b = world
    admin = MembershipFactory(tenant=tenant, role=Role.ADMIN).user
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_authenticate(admin)
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    late_link(a, "pass")
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    services.create_credit_note(
        invoice=december, reason="Goodwill.", kind="commercial", now=at("2027-01-10 10:00")
    )
    with time_machine.travel(at("2027-01-10 12:00"), tick=False):
        [voucher] = api.get("/api/v1/vouchers/").json()["results"]
    assert (voucher["number"], voucher["amount"], voucher["supplements"]) == (
        "GL-VC-2026-000001",
        "1635.80",
        None,
    )
    assert (voucher["reduced"], voucher["redeemed"], voucher["remaining"]) == (
        "981.48",
        "0.00",
        "654.32",
    )
    [used] = voucher["redemptions"]
    assert (used["invoice_number"], used["amount"], used["returned"]) == (
        december.number,
        "654.32",
        "654.32",
    )
    assert voucher["state"] == "open"
