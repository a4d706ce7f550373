"""Pay-per-use leases earn SLA credits on the base their terms name (``credit_base``):
the usage charge (按量计费, 95计费) or a contracted monthly base fee (保底); a monthly plan
keeps the network fee. Measurements go through the real path: counter and throughput
probe runs, then ingest, then the invoice. Each case's arithmetic is in its comments.

November 2026 has 30 days (2,592,000 s). Default tiers: below 99.5 -> 10 %, below 99 ->
25 %, below 95 -> 50 %; cap 50 %."""

from datetime import timedelta
from decimal import Decimal as D

import pytest
import time_machine
from django.core.exceptions import ValidationError

from billing import audit, invoicing
from billing.choices import LineKind
from billing.ingest import ingest_all
from leases import services
from leases.choices import BillingMode, LeaseStatus
from tests.factories import NodeFactory, TenantFactory, amend_acknowledged, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-02 00:00")
GB = 10**9


def _lease(*, starts: str = "2026-11-01 00:00", **terms):  # type: ignore[no-untyped-def]
    lease = make_lease(
        tenant=TenantFactory(), nodes=NodeFactory.create_batch(2), starts_at=at(starts), **terms
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at(starts))


def _counters(lease, first: str, tx_bytes: list[int]) -> None:  # type: ignore[no-untyped-def]
    """One node's tx byte counter read every 5 minutes from ``first``."""
    for index, value in enumerate(tx_bytes):
        make_run(
            lease,
            kind="counters",
            target="n1",
            pattern="node",
            slot=at(first) + timedelta(minutes=5 * index),
            cadence_s=300,
            verdict="none",
            parsed={"ports": [{"section": "counters data0", "name": "data0", "tx_bytes": value}]},
        )


def _hourly_throughput(lease, first: str, *, passed: int, failed: int) -> None:  # type: ignore[no-untyped-def]
    for index in range(passed + failed):
        make_run(
            lease,
            slot=at(first) + timedelta(hours=index),
            verdict="fail" if index < failed else "pass",
            measured_bps=(40 if index < failed else 97) * GB,
        )


def _invoice(lease):  # type: ignore[no-untyped-def]
    with time_machine.travel(AFTER_NOVEMBER, tick=False):
        ingest_all(notify=False)
        return invoicing.compute_invoice(tenant=lease.tenant, period=NOVEMBER)


def _lines(invoice, kind: str) -> list:  # type: ignore[no-untyped-def]
    return [line for line in invoice.lines if line.kind == kind]


def _verified_bundle(lease, settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.AUDIT_SIGNING_KEY = str(tmp_path / "audit.pem")
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER)
    assert audit.verify(doc, audit.published_key_info()) == []
    return doc["bundle"]


def test_per_gb_at_90_percent_credits_half_of_the_usage_charge(settings, tmp_path):
    # Counter readings 0, 400 GB, 1,000 GB five minutes apart: samples of 400 and 600 GB,
    # 1,000 GB x ¥0.50 = ¥500.00. 90 of 100 hourly throughput samples pass: 90 % is below
    # 95 -> 50 % of the usage charge 500.00 = -250.00.
    lease = _lease(
        billing_mode=BillingMode.PER_GB,
        price_per_gb=D("0.5000"),
        credit_base="usage",
    )
    _counters(lease, "2026-11-02 10:00", [0, 400 * GB, 1000 * GB])
    _hourly_throughput(lease, "2026-11-05 00:00", passed=90, failed=10)
    invoice = _invoice(lease)
    [usage] = _lines(invoice, LineKind.USAGE_GB)
    assert usage.amount == D("500.00")
    [credit] = _lines(invoice, LineKind.SLA_CREDIT)
    assert credit.amount == D("-250.00")
    assert credit.unit_price == D("500.00")
    assert "50% of usage charge 500.00" in credit.description
    assert credit.detail["credit_base"] == "usage"
    assert credit.detail["credit_base_amount"] == "500.00"
    assert credit.detail["network_fee"] == "0.00"
    bundle = _verified_bundle(lease, settings, tmp_path)
    assert bundle["credit"]["credit_base"]["amount"] == "500.00"
    assert bundle["credit"]["amount"] == "-250.00"


def test_per_gb_on_the_default_network_fee_base_earns_nothing():
    # The same month on terms that keep the default base: a per-GB lease bills no network
    # fee (the 6,000 of the terms is not billed in this mode), so there is nothing to be a
    # percentage of and no credit line, as before credit bases were terms.
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    _counters(lease, "2026-11-02 10:00", [0, 400 * GB, 1000 * GB])
    _hourly_throughput(lease, "2026-11-05 00:00", passed=90, failed=10)
    invoice = _invoice(lease)
    assert _lines(invoice, LineKind.USAGE_GB)[0].amount == D("500.00")
    assert _lines(invoice, LineKind.SLA_CREDIT) == []
    assert invoicing.lease_credit(lease=lease, period=NOVEMBER) is None


def test_p95_credits_on_the_contracted_base_prorated_not_on_the_usage(settings, tmp_path):
    # Starts 16 November: 15 of 30 days. Counter readings 0, 30 GB, 60 GB five minutes
    # apart: two samples of 30,000,000,000 B / 300 s = 800 Mbps; p95 800 Mbps x ¥0.40 x
    # 0.5 = ¥160.00 of usage. The contracted base fee ¥3,000 a month x 0.5 = 1,500.00.
    # 98 of 100 samples pass: 98 % is below 99 -> 25 % of 1,500.00 = -375.00 (on the usage
    # charge it would have been -40.00).
    lease = _lease(
        starts="2026-11-16 00:00",
        billing_mode=BillingMode.P95,
        price_per_mbps_p95=D("0.4000"),
        credit_base="contracted_base",
        contracted_base_per_month=D("3000.00"),
    )
    _counters(lease, "2026-11-17 10:00", [0, 30 * GB, 60 * GB])
    _hourly_throughput(lease, "2026-11-18 00:00", passed=98, failed=2)
    invoice = _invoice(lease)
    [usage] = _lines(invoice, LineKind.USAGE_P95)
    assert (usage.quantity, usage.amount) == (D("800.00"), D("160.00"))
    [credit] = _lines(invoice, LineKind.SLA_CREDIT)
    assert credit.amount == D("-375.00")
    assert "25% of contracted base fee 1500.00" in credit.description
    assert credit.detail["credit_base"] == "contracted_base"
    assert credit.detail["credit_base_parts"] == [
        {
            "terms_version": 1,
            "credit_base": "contracted_base",
            "start": "2026-11-15T16:00:00Z",
            "end": "2026-11-30T16:00:00Z",
            "amount": "1500.00",
        }
    ]
    assert _verified_bundle(lease, settings, tmp_path)["credit"]["amount"] == "-375.00"


def test_a_monthly_lease_keeps_its_credit_on_the_network_fee():
    # Fee 6,000, 90 of 100 samples pass -> 50 % of network fee 6,000.00 = -3,000.00.
    lease = _lease()
    _hourly_throughput(lease, "2026-11-05 00:00", passed=90, failed=10)
    [credit] = _lines(_invoice(lease), LineKind.SLA_CREDIT)
    assert credit.amount == D("-3000.00")
    assert "50% of network fee 6000.00" in credit.description
    assert (credit.detail["credit_base"], credit.detail["credit_base_amount"]) == (
        "network_fee",
        "6000.00",
    )


def test_an_amendment_to_95_percentile_credits_each_part_on_its_own_base(settings, tmp_path):
    # Monthly at 6,000 until 21 November (20 days: 4,000.00 network fee, credits on it),
    # then 95计费 at ¥0.40/Mbps with credits on the usage charge. Readings on 25 November
    # 0, 15 GB, 30 GB: two samples at 400 Mbps; 400 x 0.40 x 10/30 = 53.33 of usage.
    # Base 4,000.00 + 53.33 = 4,053.33; 90 % -> 50 % = 2,026.665 -> -2,026.67.
    lease = _lease()
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-21 00:00"),
        changes={
            "billing_mode": BillingMode.P95,
            "price_per_mbps_p95": D("0.4000"),
            "credit_base": "usage",
        },
        reason="Moved to 95th percentile billing.",
    )
    _counters(lease, "2026-11-25 10:00", [0, 15 * GB, 30 * GB])
    _hourly_throughput(lease, "2026-11-05 00:00", passed=90, failed=10)
    invoice = _invoice(lease)
    assert _lines(invoice, LineKind.USAGE_P95)[0].amount == D("53.33")
    [credit] = _lines(invoice, LineKind.SLA_CREDIT)
    assert credit.amount == D("-2026.67")
    assert credit.detail["credit_base"] == "mixed"
    assert "50% of credit base 4053.33 (v1 network fee 4000.00, v2 usage charge 53.33)" in (
        credit.description
    )
    assert _verified_bundle(lease, settings, tmp_path)["credit"]["amount"] == "-2026.67"


@pytest.mark.parametrize(
    ("terms", "refusal"),
    [
        (
            {"credit_base": "contracted_base"},
            "Credits on a contracted base fee need that fee",
        ),
        (
            {"contracted_base_per_month": D("3000.00")},
            "A contracted base fee is only used when credits are computed on it",
        ),
        (
            {"credit_base": "usage"},
            "Credits on the usage charge need a pay-per-use billing mode",
        ),
    ],
)
def test_terms_that_cannot_give_the_credit_they_name_are_refused(terms, refusal):
    with pytest.raises(ValidationError) as raised:
        make_lease(**terms)  # a monthly plan
    assert refusal in str(raised.value)
