# ruff: noqa: RUF001 (the 数电票 remarks and the zh page keep full-width punctuation)
"""An SLA credit given as a voucher (代金券) where the terms say ``credit_mode`` voucher,
or as a negative line as before (issue 32 item 5). The months go the real way: runs,
ingest, the invoice drafted and issued, the API, the portal, the 数电票 payload and the
signed audit bundle that gpulease-verify re-derives.

November 2026 of lease A (two nodes, fee 6,543.21, the degraded-minute month of
``test_degraded_minutes`` at weight 0.5): compliance 88.333 %, below 90: 25 % of the fee,
6,543.21 x 25 % = 1,635.8025 -> 1,635.80. Rent 2 x 45,000.00 = 90,000.00. VAT 6 %.

- line mode: subtotal 90,000.00 + 6,543.21 - 1,635.80 = 94,907.41, tax 94,907.41 x 6 % =
  5,694.4446 -> 5,694.44, total 100,601.85;
- voucher mode: subtotal 96,543.21, tax 5,792.5926 -> 5,792.59, total 102,335.80, and
  voucher GL-VC-2026-000001 of 1,635.80, valid 12 months from 2026-12-01 02:00.

Lease B of the same tenant from 1 December: a node at rent 0.00, fee 943.40, no runs (no
credit):
each month 943.40 + 943.40 x 6 % (56.604 -> 56.60) = 1,000.00. December's invoice
(issued 2027-01-01 02:00) uses 1,000.00 of the voucher: 0.00 to pay, 635.80 left;
January's (issued 2027-02-01 02:00) uses the 635.80: 364.20 to pay, the voucher used up.
"""

import copy
from datetime import timedelta
from decimal import Decimal as D

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.choices import Role
from billing import audit, invoicing, services, vouchers
from billing.balance import balance
from billing.documents import einvoice
from billing.ingest import ingest_all
from billing.models import Invoice, Voucher, VoucherRedemption
from leases import services as lease_services
from leases.choices import LeaseStatus
from tests.billing.test_degraded_minutes import (
    DAY_S,
    FEE,
    HOUR_S,
    TIERS,
    link,
    throughput,
)
from tests.factories import MembershipFactory, NodeFactory, TenantFactory, at, make_lease

pytestmark = pytest.mark.django_db

NOVEMBER, DECEMBER, JANUARY = "2026-11", "2026-12", "2027-01"
AFTER_NOVEMBER = at("2026-12-01 02:00")
AFTER_DECEMBER = at("2027-01-01 02:00")
AFTER_JANUARY = at("2027-02-01 02:00")


def lease_a(tenant, mode: str, validity: int = 12):  # type: ignore[no-untyped-def]
    """The degraded-minute November of test_degraded_minutes (weight 0.5), ending with it."""
    lease = make_lease(
        tenant=tenant,
        nodes=NodeFactory.create_batch(2),
        ends_at=at("2026-12-01 00:00"),
        degraded_weight=D("0.5"),
        credit_tiers=TIERS,
        network_fee_per_month=FEE,
        credit_mode=mode,
        voucher_validity_months=validity,
    )
    lease = lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    for day in range(30):
        slot = at("2026-11-01 00:00") + timedelta(days=day)
        throughput(lease, slot, 60 if day == 14 else 98, cadence_s=DAY_S)
    first = at("2026-11-13 00:00")
    link(lease, first, HOUR_S, verdict="fail")
    link(lease, first + timedelta(hours=1), HOUR_S, state="timeout")
    link(lease, first + timedelta(hours=2), HOUR_S)
    link(lease, first + timedelta(hours=3), HOUR_S)
    slot = first + timedelta(hours=4)
    while slot < at("2026-11-18 00:00"):
        link(lease, slot, 4 * HOUR_S)
        slot += timedelta(hours=4)
    return lease


def lease_b(tenant):  # type: ignore[no-untyped-def]
    lease = make_lease(
        tenant=tenant,
        starts_at=at("2026-12-01 00:00"),
        nodes=[NodeFactory()],
        node_rent_per_month=D("0"),
        network_fee_per_month=D("943.40"),
    )
    return lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def issue(tenant, period, now):  # type: ignore[no-untyped-def]
    draft = invoicing.draft_invoice(tenant=tenant, period=period, now=now)
    return services.issue_invoice(invoice=draft, now=now)


@pytest.fixture
def voucher_world():  # type: ignore[no-untyped-def]
    tenant = TenantFactory(slug="acme", tax_id="91110108551385082Q")
    a = lease_a(tenant, "voucher")
    b = lease_b(tenant)
    ingest_all(notify=False)
    return tenant, a, b


def owed(invoice: Invoice) -> D | None:
    invoice.refresh_from_db()
    return balance(invoice, invoice.credit_notes.all(), invoice.voucher_redemptions.all()).due


# --- line mode: today's negative line ---------------------------------------------------


def test_line_mode_puts_the_credit_on_the_invoice_and_recomputes_vat():
    tenant = TenantFactory()
    lease = lease_a(tenant, "line")
    ingest_all(notify=False)
    november = issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    credit = november.lines.get(kind="sla_credit")
    assert credit.amount == D("-1635.80")
    assert (november.subtotal, november.tax, november.total) == (
        D("94907.41"),
        D("5694.44"),
        D("100601.85"),
    )
    assert not Voucher.objects.exists()
    assert owed(november) == D("100601.85")
    assert (
        audit.verify(
            audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER),
            audit.published_key_info()["public_key_pem"],
        )
        == []
    )


# --- voucher mode --------------------------------------------------------------------


def test_voucher_mode_keeps_the_taxed_total_and_the_next_invoices_use_the_voucher(
    voucher_world,
):
    tenant, a, _b = voucher_world
    november = issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    assert not november.lines.filter(kind="sla_credit").exists()
    assert (november.subtotal, november.tax, november.total) == (
        D("96543.21"),
        D("5792.59"),
        D("102335.80"),
    )
    [voucher] = Voucher.objects.all()
    assert (voucher.number, voucher.amount, voucher.lease, voucher.source_invoice) == (
        "GL-VC-2026-000001",
        D("1635.80"),
        a,
        november,
    )
    assert (voucher.issued_at, voucher.expires_at) == (AFTER_NOVEMBER, at("2027-12-01 02:00"))
    assert (voucher.detail["percent_applied"], voucher.detail["credit_base_amount"]) == (
        "25",
        "6543.21",
    )
    # It pays nothing of the invoice that issued it.
    assert owed(november) == D("102335.80")

    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    # No adjustment for November: its credit is a voucher, not a line to carry.
    assert [(line.kind, line.amount) for line in december.lines.all()] == [
        ("node_rent", D("0.00")),
        ("network_fee", D("943.40")),
    ]
    assert (december.subtotal, december.tax, december.total) == (
        D("943.40"),
        D("56.60"),
        D("1000.00"),
    )
    [used] = december.voucher_redemptions.all()
    assert (used.voucher, used.amount, used.at) == (voucher, D("1000.00"), AFTER_DECEMBER)
    assert owed(december) == D("0.00")
    state = vouchers.standing(voucher, AFTER_DECEMBER)
    assert (state.used, state.left, state.state) == (D("1000.00"), D("635.80"), "partly_redeemed")

    january = issue(tenant, JANUARY, AFTER_JANUARY)
    assert january.total == D("1000.00")
    assert [r.amount for r in january.voucher_redemptions.all()] == [D("635.80")]
    assert owed(january) == D("364.20")
    state = vouchers.standing(voucher, AFTER_JANUARY)
    assert (state.left, state.state) == (D("0.00"), "redeemed")
    # A fourth month finds nothing left to use.
    february = issue(tenant, "2027-02", at("2027-03-01 02:00"))
    assert not february.voucher_redemptions.exists()
    assert owed(february) == D("1000.00")


def test_a_voucher_expiring_at_the_instant_of_issue_is_not_used():
    tenant = TenantFactory()
    lease_a(tenant, "voucher", validity=1)
    lease_b(tenant)
    ingest_all(notify=False)
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    voucher = Voucher.objects.get()
    # 2026-12-01 02:00 + 1 month = 2027-01-01 02:00: December's issue instant exactly.
    assert voucher.expires_at == AFTER_DECEMBER
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    assert not december.voucher_redemptions.exists()
    assert owed(december) == D("1000.00")
    assert vouchers.standing(voucher, AFTER_DECEMBER).state == "expired"


def test_a_voucher_is_used_one_second_before_it_expires():
    tenant = TenantFactory()
    lease_a(tenant, "voucher", validity=1)
    lease_b(tenant)
    ingest_all(notify=False)
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    december = issue(tenant, DECEMBER, AFTER_DECEMBER - timedelta(seconds=1))
    assert [r.amount for r in december.voucher_redemptions.all()] == [D("1000.00")]


def test_voiding_the_invoice_that_used_it_releases_the_voucher(voucher_world):
    tenant, _a, _b = voucher_world
    november = issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    voucher = Voucher.objects.get()
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    # The invoice that issued a used voucher cannot be voided.
    with pytest.raises(services.LifecycleError) as refused:
        services.void_invoice(invoice=november, reason="wrong buyer")
    assert "GL-VC-2026-000001 are used on later invoices" in str(refused.value)

    services.void_invoice(invoice=december, reason="wrong buyer", now=at("2027-01-02 10:00"))
    assert vouchers.standing(voucher, at("2027-01-02 10:00")).left == D("1635.80")
    assert owed(december) == D("0.00")  # void: nothing to pay
    again = issue(tenant, DECEMBER, at("2027-01-03 10:00"))
    assert [r.amount for r in again.voucher_redemptions.all()] == [D("1000.00")]
    assert VoucherRedemption.objects.count() == 2  # the released one stays on record


def test_voiding_the_invoice_that_issued_an_unused_voucher_voids_it(voucher_world):
    tenant, _a, _b = voucher_world
    november = issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    services.void_invoice(invoice=november, reason="wrong buyer", now=at("2026-12-02 10:00"))
    voucher = Voucher.objects.get()
    assert voucher.voided_at == at("2026-12-02 10:00")
    assert vouchers.standing(voucher, at("2026-12-02 10:00")).state == "void"
    # November is issued again: a new voucher, the next number; December uses only it.
    issue(tenant, NOVEMBER, at("2026-12-03 10:00"))
    assert sorted(Voucher.objects.values_list("number", flat=True)) == [
        "GL-VC-2026-000001",
        "GL-VC-2026-000002",
    ]
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    [used] = december.voucher_redemptions.all()
    assert used.voucher.number == "GL-VC-2026-000002"


# --- the faces: API, portal, 数电票, bundle ------------------------------------------------


def test_the_api_and_the_portal_show_vouchers_and_what_is_left_to_pay(voucher_world):
    tenant, _a, _b = voucher_world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    admin = MembershipFactory(role=Role.ADMIN, tenant=tenant)
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_authenticate(admin.user)
    body = api.get(f"/api/v1/invoices/{december.pk}/").json()
    assert (body["total"], body["vouchers_applied"], body["amount_due"]) == (
        "1000.00",
        "1000.00",
        "0.00",
    )
    assert body["payment_status"] == "covered"
    assert [(r["voucher"], r["amount"]) for r in body["voucher_redemptions"]] == [
        ("GL-VC-2026-000001", "1000.00")
    ]
    listed = api.get("/api/v1/vouchers/").json()["results"]
    assert [
        (v["number"], v["amount"], v["redeemed"], v["remaining"], v["state"]) for v in listed
    ] == [("GL-VC-2026-000001", "1635.80", "1000.00", "635.80", "partly_redeemed")]
    # Another tenant's admin sees none of it.
    other = MembershipFactory(role=Role.ADMIN)
    api.force_authenticate(other.user)
    assert api.get("/api/v1/vouchers/").json()["results"] == []
    assert api.get(f"/api/v1/vouchers/{listed[0]['id']}/").status_code == 404

    for language, applied, note in (
        ("en", "voucher GL-VC-2026-000001 applied, after tax (¥)", "is a way of paying"),
        ("zh-hans", "代金券 GL-VC-2026-000001 抵扣（税后，¥）", "代金券是一种付款方式"),
    ):
        page = Client(HTTP_ACCEPT_LANGUAGE=language)
        page.force_login(admin.user)
        html = page.get(f"/invoices/{december.pk}/").content.decode()
        assert applied in html and "-¥1,000.00" in html and note in html
    november = Invoice.objects.get(tenant=tenant, period=NOVEMBER)
    zh = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    zh.force_login(admin.user)
    html = zh.get(f"/invoices/{november.pk}/").content.decode()
    assert "已发放的代金券" in html and "1,635.80" in html


def test_the_einvoice_payload_keeps_the_vat_lines_and_notes_the_voucher(voucher_world):
    tenant, _a, _b = voucher_world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    december = issue(tenant, DECEMBER, AFTER_DECEMBER)
    payload = einvoice.invoice_payload(december)
    assert [line["amount"] for line in payload["lines"]] == ["0.00", "943.40"]
    assert payload["totals"]["total"] == "1000.00"
    assert payload["payment_deductions"] == [
        {
            "kind": "voucher",
            "number": "GL-VC-2026-000001",
            "amount": "1000.00",
            "note": einvoice.VOUCHER_NOTE,
        }
    ]
    assert payload["remarks"].startswith(
        "代金券 GL-VC-2026-000001 抵扣 1000.00 元（付款抵扣，不减少计税金额）"
    )


def test_the_pdf_shows_the_vouchers_used_and_what_is_left_to_pay(voucher_world):
    from billing.documents import pdf
    from billing.documents.rows import invoice_document

    tenant, _a, _b = voucher_world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    issue(tenant, DECEMBER, AFTER_DECEMBER)
    january = issue(tenant, JANUARY, AFTER_JANUARY)
    rows = pdf._balance_rows(invoice_document(january))
    texts = [[getattr(cell, "text", cell) for cell in row] for row in rows]
    assert ["vouchers applied, after tax (¥)", "", "", "-635.80"] in texts
    assert ["amount due (¥)", "", "", "364.20"] in texts


def published() -> str:
    return audit.published_key_info()["public_key_pem"]


def test_the_bundle_carries_the_voucher_and_the_verifier_rederives_it(voucher_world):
    tenant, a, b = voucher_world
    issue(tenant, NOVEMBER, AFTER_NOVEMBER)
    issue(tenant, DECEMBER, AFTER_DECEMBER)
    issue(tenant, JANUARY, AFTER_JANUARY)
    doc = audit.signed_bundle(lease=a, period=NOVEMBER, now=AFTER_JANUARY)
    found, said = audit.verify_report(doc, published())
    assert found == []
    assert (
        "vouchers: 1 issued (GL-VC-2026-000001), 0 applied (0.00): amounts from the credit, "
        "expiry from the validity, redemptions within both"
    ) in said
    [stated] = doc["bundle"]["invoice"]["vouchers_issued"]
    assert [(r["invoice_number"], r["amount"]) for r in stated["redemptions"]] == [
        ("GL-2027-000001", "1000.00"),
        ("GL-2027-000002", "635.80"),
    ]
    december = audit.signed_bundle(lease=b, period=DECEMBER, now=AFTER_JANUARY)
    found, said = audit.verify_report(december, published())
    assert found == []
    assert any(note.startswith("vouchers: 0 issued (none), 1 applied (1000.00)") for note in said)

    # Forged and re-signed with the provider's own key: a redemption of 1,635.80 in
    # place of 1,000.00 makes 2,271.60 used of 1,635.80.
    bundle = copy.deepcopy(doc["bundle"])
    bundle["invoice"]["vouchers_issued"][0]["redemptions"][0]["amount"] = "1635.80"
    assert audit.verify(audit.sign_bundle(bundle), published()) == [
        "voucher GL-VC-2026-000001: its redemptions add up to 2271.60, more than its amount 1635.80"
    ]
    # A voucher larger than the credit.
    bundle = copy.deepcopy(doc["bundle"])
    bundle["invoice"]["vouchers_issued"][0]["amount"] = "1700.00"
    assert audit.verify(audit.sign_bundle(bundle), published()) == [
        "voucher GL-VC-2026-000001 amount: the bundle says 1700.00, the credit recomputed is "
        "-1635.80: a voucher of 1635.80"
    ]
    # A redemption dated after the voucher expired.
    bundle = copy.deepcopy(doc["bundle"])
    bundle["invoice"]["vouchers_issued"][0]["redemptions"][1]["at"] = "2027-12-01T00:00:00Z"
    assert audit.verify(audit.sign_bundle(bundle), published()) == [
        "voucher GL-VC-2026-000001 redemption on invoice GL-2027-000002 at "
        "2027-12-01T00:00:00Z: outside the voucher's validity "
        "[2026-11-30T18:00:00.000000Z, 2027-11-30T18:00:00.000000Z)"
    ]
    # The credit moved back onto the invoice as a line, though the terms say voucher.
    bundle = copy.deepcopy(doc["bundle"])
    bundle["invoice"]["vouchers_issued"] = []
    found = audit.verify(audit.sign_bundle(bundle), published())
    assert found == [
        "vouchers: the credit of -1635.80 is due as one voucher of 1635.80, the invoice issued 0"
    ]


def test_the_terms_fields_keep_old_hashes_and_are_hashed_when_set():
    from gpulease_verify.terms import terms_content
    from leases.links import terms_fields

    version = make_lease().terms.get()
    assert (version.credit_mode, version.voucher_validity_months) == ("line", 12)
    fields = terms_fields(version)
    older = {k: v for k, v in fields.items() if k not in ("credit_mode", "voucher_validity_months")}
    assert terms_content(fields) == terms_content(older)
    changed = terms_content({**fields, "credit_mode": "voucher", "voucher_validity_months": 6})
    assert (changed["credit_mode"], changed["voucher_validity_months"]) == ("voucher", 6)
