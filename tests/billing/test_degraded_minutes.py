"""Degraded minutes (issue 32 item 3): every link-check minute of a lease's billed window is
pass, degraded, down or no evidence (``gpulease_verify.compliance``), the terms'
degraded_weight counts a share of each degraded minute as down, and availability and the
SLA credit follow it. The months below go the real way: runs, ingest into the hourly
rollups, the SLA report (the API's and the portal's), the invoice's credit line, the
signed audit bundle, and the verifier re-deriving every count from the chain."""

import copy
from datetime import timedelta
from decimal import Decimal as D

import pytest
from django.test import Client

from accounts.choices import Role
from billing import audit, invoicing, sla
from billing.ingest import ingest_all
from billing.models import Invoice
from billing.reports import sla_report
from leases import services
from leases.choices import LeaseStatus
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-01 02:00")
AFTER_DECEMBER = at("2027-01-01 02:00")
GBPS = 10**9
HOUR_S, DAY_S = 3600, 86400
# Tiers set so that the throughput compliance of the month (29 / 30 = 96.667 %) earns
# nothing alone and each weight of the degraded minutes lands in another tier.
TIERS = [
    {"below_percent": "96", "credit_percent": "10"},
    {"below_percent": "90", "credit_percent": "25"},
    {"below_percent": "80", "credit_percent": "50"},
]
FEE = D("6543.21")


def active(**terms):  # type: ignore[no-untyped-def]
    lease = make_lease(nodes=NodeFactory.create_batch(2), **terms)
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def link(lease, slot, cadence_s, **given):  # type: ignore[no-untyped-def]
    return make_run(
        lease, kind="link", target="n1", pattern="node", slot=slot, cadence_s=cadence_s, **given
    )


def throughput(lease, slot, gbps, cadence_s=HOUR_S):  # type: ignore[no-untyped-def]
    # 95 % of 100 Gbps contracted is the SLA threshold the verdict uses.
    return make_run(
        lease,
        slot=slot,
        cadence_s=cadence_s,
        measured_bps=gbps * GBPS,
        verdict="pass" if gbps >= 95 else "fail",
    )


def mixed_month(weight: str):  # type: ignore[no-untyped-def]
    """November 2026 of a lease with degraded_weight ``weight``.

    Throughput, daily at 00:00 (cadence 1 day): 30 samples, the one of Nov 15 failed at
    60 Gbps (below 95 % of 100 Gbps) -> compliance 29 / 30 = 96.667 %.

    Link checks over Nov 13 00:00 .. Nov 18 00:00 (5 days = 7,200 minutes), in slots of
    4 hours (240 minutes), except the first 4 hours in slots of 1 hour: 00:00 failed
    (down), 01:00 timed out (no evidence), 02:00 and 03:00 passed. All others passed.

    - down        = 60
    - no evidence = 60
    - degraded    = the 6 slots of Nov 15, links up inside the failed throughput slot
                    [Nov 15 00:00, Nov 16 00:00) = 6 x 240 = 1,440
    - pass        = 7,200 - 60 - 60 - 1,440 = 5,640
    """
    lease = active(
        degraded_weight=D(weight),
        credit_tiers=TIERS,
        network_fee_per_month=FEE,
    )
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
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    return lease


def published() -> str:
    return audit.published_key_info()["public_key_pem"]


def verified(lease, period=NOVEMBER, now=AFTER_NOVEMBER):  # type: ignore[no-untyped-def]
    doc = audit.signed_bundle(lease=lease, period=period, now=now)
    assert audit.verify(doc, published()) == []
    return doc


def credit_line(lease, period=NOVEMBER):  # type: ignore[no-untyped-def]
    invoice = Invoice.objects.get(tenant=lease.tenant, period=period)
    return invoice.lines.filter(lease=lease, kind="sla_credit").first()


COUNTS = {
    "pass_minutes": 5640,
    "degraded_minutes": 1440,
    "down_minutes": 60,
    "no_evidence_minutes": 60,
}


@pytest.mark.parametrize(
    ("weight", "weighted", "availability", "credit"),
    [
        # w = 0: (5,640 + 1,440) / 7,200 = 98.333 %; credit compliance min(96.667, 98.333)
        # = 96.667, not below 96: no credit (today's availability: degraded is up).
        ("0", "0.000", "98.333", None),
        # w = 0.5: (7,080 - 720) / 7,200 = 6,360 / 7,200 = 88.333 % (below 90: 25 %);
        # 25 % of 6,543.21 = 1,635.8025 -> -1,635.80.
        ("0.5", "720.000", "88.333", "-1635.80"),
        # w = 1: (7,080 - 1,440) / 7,200 = 5,640 / 7,200 = 78.333 % (below 80: 50 %, the
        # cap); 50 % of 6,543.21 = 3,271.605 -> half-up -3,271.61.
        ("1", "1440.000", "78.333", "-3271.61"),
    ],
)
def test_a_month_of_mixed_minutes_weighs_degraded_minutes_into_availability_and_credit(
    weight, weighted, availability, credit
):
    lease = mixed_month(weight)
    window = (at("2026-11-01 00:00"), at("2026-12-01 00:00"))
    summary = sla.evaluate(lease=lease, start=window[0], end=window[1])
    assert summary.availability.counts() == COUNTS
    assert summary.availability.degraded_weighted == D(weighted)
    assert summary.availability.percent == D(availability)
    assert summary.throughput.percent == D("96.667")

    # The SLA report (what GET /api/v1/leases/{id}/sla/ and the portal show).
    report = sla_report(lease=lease, period=NOVEMBER)
    assert {name: report["availability"][name] for name in COUNTS} == COUNTS
    assert report["availability"]["percent"] == availability
    assert D(report["availability"]["degraded_weighted"]) == D(weighted)

    line = credit_line(lease)
    if credit is None:
        assert line is None
    else:
        assert line.amount == D(credit)
        assert {name: line.detail["availability"][name] for name in COUNTS} == COUNTS
        assert line.detail["availability"]["percent"] == availability
        assert D(line.detail["availability"]["degraded_weighted"]) == D(weighted)

    # The bundle states the four counts, and the verifier re-derives them (and the
    # credit) from the runs in the chain: no mismatch.
    doc = verified(lease)
    stated = doc["bundle"]["compliance"]["availability"]
    assert {name: stated[name] for name in COUNTS} == COUNTS
    assert stated["percent"] == availability
    day_15 = [
        row for row in doc["bundle"]["rollups"] if row["kind"] == "link" and row["degraded_minutes"]
    ]
    # The six 4-hour slots of Nov 15 (local) start in six UTC hours, 240 minutes each.
    assert [row["degraded_minutes"] for row in day_15] == [240] * 6
    assert day_15[0]["hour"].startswith("2026-11-14T16:00:00")


def test_the_weight_is_a_contract_field_hashed_only_when_set():
    from gpulease_verify.terms import terms_content
    from leases.links import terms_fields

    version = make_lease().terms.get()
    assert version.degraded_weight == D("0")
    fields = terms_fields(version)
    assert fields["degraded_weight"] == "0.000"
    older = {name: value for name, value in fields.items() if name != "degraded_weight"}
    # A version at the default hashes as one written before the field existed.
    assert terms_content(fields) == terms_content(older)
    changed = terms_content({**fields, "degraded_weight": "0.500"})
    assert changed["degraded_weight"] == "0.500"


def test_a_weight_outside_0_to_1_is_refused():
    from django.core.exceptions import ValidationError

    version = make_lease().terms.get()
    version.degraded_weight = D("1.5")
    with pytest.raises(ValidationError) as refused:
        version.full_clean()
    assert "degraded_weight" in refused.value.message_dict


def test_the_api_and_the_portal_show_the_four_counts():
    lease = mixed_month("0.5")
    admin = MembershipFactory(role=Role.ADMIN, tenant=lease.tenant)
    from rest_framework.test import APIClient

    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_authenticate(admin.user)
    body = api.get(f"/api/v1/leases/{lease.pk}/sla/", {"period": NOVEMBER}).json()
    assert {name: body["availability"][name] for name in COUNTS} == COUNTS
    assert body["availability"]["percent"] == "88.333"
    assert body["credit"]["amount"] == "-1635.80"

    page = Client(HTTP_ACCEPT_LANGUAGE="en")
    page.force_login(admin.user)
    html = page.get(f"/leases/{lease.pk}/sla/?period={NOVEMBER}").content.decode()
    assert "5640 min pass, 1440 min degraded, 60 min down, 60 min no evidence" in html
    assert "720.000 degraded min counted as down" in html
    zh = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    zh.force_login(admin.user)
    html = zh.get(f"/leases/{lease.pk}/sla/?period={NOVEMBER}").content.decode()
    assert "达标 5640 分钟，降级 1440 分钟，不可用 60 分钟，无证据 60 分钟" in html  # noqa: RUF001


def test_a_forged_degraded_count_re_signed_with_the_providers_key_is_named():
    lease = mixed_month("0.5")
    doc = verified(lease)
    bundle = copy.deepcopy(doc["bundle"])
    # The insider moves Nov 15's degraded minutes to pass, keeping the sums and the
    # availability percent as they were, and re-signs with the provider's own key.
    stated = bundle["compliance"]["availability"]
    stated["degraded_minutes"], stated["pass_minutes"] = 0, 5640 + 1440
    found = audit.verify(audit.sign_bundle(bundle), published())
    assert not any("signature" in m for m in found), found
    assert (
        "degraded minutes (links up while a failed throughput sample covered them): the "
        "bundle says 0, recomputed 1440 from the link checks and throughput samples in the "
        "chain" in found
    )
    assert (
        "pass minutes (links up, no failed throughput sample): the bundle says 7080, "
        "recomputed 5640 from the link checks and throughput samples in the chain" in found
    )
    # And the weighted minutes and an hourly rollup, each named.
    bundle = copy.deepcopy(doc["bundle"])
    bundle["compliance"]["availability"]["degraded_weighted"] = "0.000"
    row = next(r for r in bundle["rollups"] if r["kind"] == "link" and r["degraded_minutes"])
    row["degraded_minutes"] = 0
    found = audit.verify(audit.sign_bundle(bundle), published())
    assert (
        "degraded minutes counted as down (degraded minutes x degraded_weight): the bundle "
        "says 0.000, recomputed 720.000" in found
    )
    assert any(
        m.startswith(f"hourly rollup link {row['hour']}: rollup vs runs: degraded_minutes 0 vs 240")
        for m in found
    ), found


def test_a_degraded_stretch_across_the_months_last_instant_splits_between_the_months():
    """A throughput slot from Nov 30 23:30 to Dec 1 00:30 (local) failed; link checks of
    5 minutes at 23:50 and 23:55 (November) and 00:00 and 00:05 (December) passed: 10
    degraded minutes in each month. December's bundle carries November's sample (its slot
    began before the period) so the verifier re-derives its 10 minutes. Weight 1:
    November 0 / 10, December 0 / 10 available = 0.000 %."""
    lease = active(degraded_weight=D("1"))
    throughput(lease, at("2026-11-30 23:30"), 50)
    for minute in (50, 55, 60, 65):
        link(lease, at("2026-11-30 23:00") + timedelta(minutes=minute), 300)
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    invoicing.draft_invoice(tenant=lease.tenant, period="2026-12", now=AFTER_DECEMBER)
    for period, start, end, now in (
        (NOVEMBER, "2026-11-01 00:00", "2026-12-01 00:00", AFTER_NOVEMBER),
        ("2026-12", "2026-12-01 00:00", "2027-01-01 00:00", AFTER_DECEMBER),
    ):
        figures = sla.evaluate(lease=lease, start=at(start), end=at(end)).availability
        assert figures.counts() == {
            "pass_minutes": 0,
            "degraded_minutes": 10,
            "down_minutes": 0,
            "no_evidence_minutes": 0,
        }, period
        assert (figures.degraded_weighted, figures.percent) == (D("10.000"), D("0.000"))
        doc = verified(lease, period, now)
        assert doc["bundle"]["compliance"]["availability"]["degraded_minutes"] == 10
    december = audit.signed_bundle(lease=lease, period="2026-12", now=AFTER_DECEMBER)["bundle"]
    spanning = [r for r in december["runs"] if r["content"]["kind"] == "throughput"]
    assert [r["in_period"] for r in spanning] == [False]


def test_the_leases_first_and_last_minute_and_a_gap_with_no_evidence():
    """A lease from Nov 10 08:00 to 20:00 (local), link checks of one minute, weight 0.5:

    - 08:00 (the lease's first minute) links up, throughput 08:00 failed -> degraded
    - 10:00 links up, throughput 10:00 passed -> pass
    - 12:00 the link check was missed, throughput 12:00 failed -> no evidence (the links
      were not seen up, so the minute is not degraded)
    - 14:00 a link failed, throughput 14:00 failed -> down
    - 16:00 .. 19:58 no link check at all (a gap): not counted, though throughput 16:00
      failed
    - 19:59 (the lease's last minute) links up, throughput 19:00 failed -> degraded

    pass 1, degraded 2, down 1, no evidence 1; availability (3 - 2 x 0.5) / 5 = 40.000 %.
    The throughput slot of 19:00 runs to 20:00, the lease's end: nothing after it counts.
    """
    lease = active(
        starts_at=at("2026-11-10 08:00"),
        ends_at=at("2026-11-10 20:00"),
        degraded_weight=D("0.5"),
    )
    for hour, gbps in ((8, 60), (10, 98), (12, 60), (14, 60), (16, 60), (19, 60)):
        throughput(lease, at(f"2026-11-10 {hour:02}:00"), gbps)
    link(lease, at("2026-11-10 08:00"), 60)
    link(lease, at("2026-11-10 10:00"), 60)
    link(lease, at("2026-11-10 12:00"), 60, state="missed")
    link(lease, at("2026-11-10 14:00"), 60, verdict="fail")
    link(lease, at("2026-11-10 19:59"), 60)
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    figures = sla.evaluate(
        lease=lease, start=at("2026-11-10 08:00"), end=at("2026-11-10 20:00")
    ).availability
    assert figures.counts() == {
        "pass_minutes": 1,
        "degraded_minutes": 2,
        "down_minutes": 1,
        "no_evidence_minutes": 1,
    }
    assert (figures.degraded_weighted, figures.percent) == (D("1.000"), D("40.000"))
    doc = verified(lease)
    assert doc["bundle"]["compliance"]["availability"]["percent"] == "40.000"


def test_a_late_failed_throughput_sample_degrades_link_minutes_already_rolled_up():
    """Link checks ingested first (60 pass minutes), then the hour's throughput sample
    fails: ingest rebuilds the link rollup, the 60 minutes become degraded."""
    lease = active(degraded_weight=D("0.25"))
    for minute in range(0, 60, 5):
        link(lease, at("2026-11-05 10:00") + timedelta(minutes=minute), 300)
    ingest_all(notify=False)
    window = (at("2026-11-01 00:00"), at("2026-12-01 00:00"))
    before = sla.evaluate(lease=lease, start=window[0], end=window[1]).availability
    assert (before.pass_minutes, before.degraded_minutes) == (60, 0)
    throughput(lease, at("2026-11-05 10:00"), 70)
    ingest_all(notify=False)
    after = sla.evaluate(lease=lease, start=window[0], end=window[1]).availability
    # 60 degraded x 0.25 = 15 counted as down: (60 - 15) / 60 = 75.000 %.
    assert (after.pass_minutes, after.degraded_minutes) == (0, 60)
    assert (after.degraded_weighted, after.percent) == (D("15.000"), D("75.000"))
