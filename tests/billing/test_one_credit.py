"""One credit everywhere: the invoice line, the SLA report (command and API), the SLA
history page and the audit bundle show the same amount for the same lease and month,
because they all read invoicing.lease_credit. Measurements go through the real path:
probe runs, then ingest, then each face. Each case's arithmetic is in its comments."""

from datetime import timedelta
from decimal import Decimal as D

import pytest
import time_machine
from rest_framework.test import APIClient

from billing import audit, invoicing
from billing.choices import LineKind
from billing.ingest import ingest_all
from billing.reports import sla_report
from leases import services
from leases.choices import BillingMode, LeaseStatus
from portal import selectors
from tests.factories import (
    NodeFactory,
    StaffFactory,
    TenantFactory,
    amend_acknowledged,
    at,
    make_lease,
    make_run,
)

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-02 00:00")


def _lease(*, starts: str, **terms):  # type: ignore[no-untyped-def]
    lease = make_lease(
        tenant=TenantFactory(),
        nodes=NodeFactory.create_batch(2),
        starts_at=at(starts),
        network_fee_per_month=D("6000.00"),
        **terms,
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at(starts))


def _hourly_throughput(lease, first: str, *, passed: int, failed: int) -> None:  # type: ignore[no-untyped-def]
    slot = at(first)
    for index in range(passed + failed):
        make_run(
            lease,
            slot=slot + timedelta(hours=index),
            verdict="fail" if index < failed else "pass",
            measured_bps=(40 if index < failed else 97) * 10**9,
        )


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


def _every_face(lease) -> dict[str, D | None]:  # type: ignore[no-untyped-def]
    with time_machine.travel(AFTER_NOVEMBER, tick=False):
        ingest_all(notify=False)
        invoice = invoicing.compute_invoice(tenant=lease.tenant, period=NOVEMBER)
        credit_lines = [line.amount for line in invoice.lines if line.kind == LineKind.SLA_CREDIT]
        report = sla_report(lease=lease, period=NOVEMBER)
        staff = StaffFactory()
        client = APIClient()
        client.force_authenticate(staff)
        api = client.get(f"/api/v1/leases/{lease.pk}/sla/", {"period": NOVEMBER}).json()
        rows = selectors.sla_history(user=staff, lease=lease, instant=AFTER_NOVEMBER)
        [history] = [row for row in rows if row.period == NOVEMBER]
        bundle = audit.build_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER)
    return {
        "invoice": sum(credit_lines, D("0.00")) if credit_lines else D("0.00"),
        "sla_report": D(report["credit"]["amount"]),
        "api": D(api["credit"]["amount"]),
        "sla_history": history.credit.amount if history.credit else None,
        "audit_bundle": D(bundle["credit"]["amount"]),
    }


def test_an_amended_month_has_one_credit_on_the_fee_actually_billed():
    # Fee 6,000 for 20 days (4,000.00), then 10,000 for 10 days (3,333.33): 7,333.33 billed.
    # 98 of 100 hourly samples pass: 98 % is below 99, which v2's tiers (in force at the
    # month's end) credit at 15 %: 15 % of 7,333.33 = 1,099.9995 -> -1,100.00. The terms'
    # full monthly fee (10,000) would have given -1,500.00.
    lease = _lease(starts="2026-11-01 00:00")
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
    _hourly_throughput(lease, "2026-11-03 00:00", passed=98, failed=2)
    faces = _every_face(lease)
    assert set(faces.values()) == {D("-1100.00")}, faces


def test_a_prorated_month_has_one_credit_on_the_prorated_fee():
    # Starts 16 November: 15 of 30 days of a 6,000 fee = 3,000.00 billed.
    # 90 of 100 samples pass: 90 % is below 95 -> 50 % of 3,000.00 = -1,500.00 (the full
    # monthly fee would have given -3,000.00, as the SLA report said before).
    lease = _lease(starts="2026-11-16 00:00")
    _hourly_throughput(lease, "2026-11-17 00:00", passed=90, failed=10)
    faces = _every_face(lease)
    assert set(faces.values()) == {D("-1500.00")}, faces


def test_a_month_that_earns_nothing_shows_zero_everywhere():
    lease = _lease(starts="2026-11-01 00:00")
    _hourly_throughput(lease, "2026-11-03 00:00", passed=100, failed=0)
    faces = _every_face(lease)
    assert set(faces.values()) == {D("0.00")}, faces


def test_a_per_gb_month_has_one_credit_on_the_usage_charge():
    # Counter readings 0, 400 GB, 1,000 GB: 1,000 GB x ¥0.50 = 500.00 of traffic.
    # 90 of 100 samples pass: below 95 -> 50 % of the usage charge = -250.00.
    lease = _lease(
        starts="2026-11-01 00:00",
        billing_mode=BillingMode.PER_GB,
        price_per_gb=D("0.5000"),
        credit_base="usage",
    )
    _counters(lease, "2026-11-02 10:00", [0, 400 * 10**9, 1000 * 10**9])
    _hourly_throughput(lease, "2026-11-05 00:00", passed=90, failed=10)
    faces = _every_face(lease)
    assert set(faces.values()) == {D("-250.00")}, faces


def test_a_95th_percentile_month_has_one_credit_on_the_contracted_base():
    # Starts 16 November (15 of 30 days): contracted base ¥3,000 x 0.5 = 1,500.00; the
    # usage (two 800 Mbps samples: 800 x 0.40 x 0.5 = 160.00) is not the base.
    # 98 of 100 samples pass: below 99 -> 25 % of 1,500.00 = -375.00.
    lease = _lease(
        starts="2026-11-16 00:00",
        billing_mode=BillingMode.P95,
        price_per_mbps_p95=D("0.4000"),
        credit_base="contracted_base",
        contracted_base_per_month=D("3000.00"),
    )
    _counters(lease, "2026-11-17 10:00", [0, 30 * 10**9, 60 * 10**9])
    _hourly_throughput(lease, "2026-11-18 00:00", passed=98, failed=2)
    faces = _every_face(lease)
    assert set(faces.values()) == {D("-375.00")}, faces
