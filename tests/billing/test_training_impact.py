"""The SLA report's training impact, through the real path: probe runs, ingest, then
billing.reports.sla_report with the clock pinned. Elapsed time only, each hour against
the terms in force at it, and two labelled shortfalls.

Every case runs the default model (7B parameters, 2-byte gradients, 1 s of compute per
step) on 2 nodes x 8 GPUs = 16 GPUs, so the all-reduce takes
    t_comm(bw) = 7e9 x 2 x 2(16-1)/16 x 8 bits / bw = 210e9 / bw seconds
and a step t_step(bw) = 1 + t_comm(bw):
    100 Gbps: 3.1 s     98 Gbps: 1 + 15/7 = 22/7 s     95 Gbps: 1 + 42/19 = 61/19 s
     80 Gbps: 3.625 s   70 Gbps: 4 s
    200 Gbps: 2.05 s   160 Gbps: 2.3125 s              140 Gbps: 2.5 s
GPU-hours lost = GPUs x hours x (1 - t_step(reference) / t_step(measured)).
A GPU-hour costs 45,000 / 8 / 720 = 7.8125 CNY (the default rent)."""

import re
from datetime import timedelta
from decimal import Decimal as D

import pytest
import time_machine
from django.test import Client

from billing.ingest import ingest_all
from billing.reports import sla_report
from leases import services
from leases.choices import LeaseStatus
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    TenantFactory,
    amend_acknowledged,
    at,
    make_lease,
    make_run,
)

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
GBPS = 10**9


def _lease(**terms):  # type: ignore[no-untyped-def]
    lease = make_lease(
        tenant=TenantFactory(),
        nodes=NodeFactory.create_batch(2, gpu_count=8),
        starts_at=at("2026-11-01 00:00"),
        **terms,
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))


def _hourly(lease, first: str, gbps: int, *, hours: int, verdict: str = "pass") -> None:  # type: ignore[no-untyped-def]
    for index in range(hours):
        make_run(
            lease,
            slot=at(first) + timedelta(hours=index),
            measured_bps=gbps * GBPS,
            verdict=verdict,
        )


def _impact(lease, now: str):  # type: ignore[no-untyped-def]
    with time_machine.travel(at(now), tick=False):
        ingest_all(notify=False)
        return sla_report(lease=lease, period=NOVEMBER)


def test_at_100_percent_compliance_at_the_contract_both_shortfalls_are_zero_not_absent():
    lease = _lease()
    _hourly(lease, "2026-11-01 00:00", 100, hours=4)
    # A collective run below the contract does not move the estimate: the SLA judges
    # node-pair throughput, and so does the impact.
    make_run(
        lease,
        kind="collective",
        tool="nccl",
        slot=at("2026-11-01 02:00"),
        measured_bps=60 * GBPS,
        verdict="none",
    )
    report = _impact(lease, "2026-11-01 04:00")
    assert report["credit_compliance_percent"] == "100.000"
    impact = report["training_impact"]
    zero = {"gpu_hours": "0.000", "cny": "0.00"}
    assert impact["below_threshold"] == zero
    assert impact["below_contract"] == zero
    assert (impact["gpu_hours_lost"], impact["cost_lost"]) == ("0.000", "0.00")
    assert impact["measured_busbw_bps"] == 100 * GBPS


def test_a_shortfall_between_threshold_and_contract_owes_nothing_but_is_shown():
    # 98 Gbps passes the 95 % threshold of 100 Gbps: compliance 100 %.
    # Below threshold: 98 >= 95 -> 0.
    # Below contract: 1 - 3.1 / (22/7) = 1 - 21.7/22 = 3/220 per hour;
    #   16 GPUs x 4 h x 3/220 = 192/220 = 0.872727... GPU-hours -> 0.873;
    #   x 7.8125 = 6.818181... -> 6.82 CNY.
    lease = _lease()
    _hourly(lease, "2026-11-01 00:00", 98, hours=4)
    report = _impact(lease, "2026-11-01 04:00")
    assert report["credit_compliance_percent"] == "100.000"
    impact = report["training_impact"]
    assert impact["below_threshold"] == {"gpu_hours": "0.000", "cny": "0.00"}
    assert impact["below_contract"] == {"gpu_hours": "0.873", "cny": "6.82"}
    # The keys scripts already read are the below-contract figures.
    assert (impact["gpu_hours_lost"], impact["cost_lost"]) == ("0.873", "6.82")


def test_four_hours_into_the_month_only_four_hours_count():
    # Threshold 80 % of 100 Gbps = 80 Gbps; measured 70 Gbps every hour (all fail).
    # Below threshold: 1 - 3.625/4 = 3/32; 16 x 4 h x 3/32 = 6 GPU-hours; x 7.8125 = 46.875
    #   -> 46.88 CNY.
    # Below contract: 1 - 3.1/4 = 0.225; 16 x 4 h x 0.225 = 14.4 GPU-hours; x 7.8125 = 112.50.
    # Counting November's 720 hours instead would give 180 times as much (1,080 and 2,592
    # GPU-hours): the figure a month in progress must never show.
    lease = _lease(sla_threshold_percent=D("80"))
    _hourly(lease, "2026-11-01 00:00", 70, hours=4, verdict="fail")
    report = _impact(lease, "2026-11-01 04:00")
    impact = report["training_impact"]
    assert impact["wall_hours"] == "4.000"
    assert impact["elapsed_until"] == "2026-10-31T20:00:00+00:00"  # 04:00 in Shanghai
    assert impact["below_threshold"] == {"gpu_hours": "6.000", "cny": "46.88"}
    assert impact["below_contract"] == {"gpu_hours": "14.400", "cny": "112.50"}


def test_sla_report_takes_now_as_an_argument():
    # Same lease and runs as above, the instant passed in rather than read from the clock:
    # two hours elapsed -> half the four-hour figures (3 and 7.2 GPU-hours).
    lease = _lease(sla_threshold_percent=D("80"))
    _hourly(lease, "2026-11-01 00:00", 70, hours=2, verdict="fail")
    ingest_all(notify=False)
    report = sla_report(lease=lease, period=NOVEMBER, now=at("2026-11-01 02:00"))
    impact = report["training_impact"]
    assert impact["wall_hours"] == "2.000"
    # 3 x 7.8125 = 23.4375 -> 23.44; 7.2 x 7.8125 = 56.25.
    assert impact["below_threshold"] == {"gpu_hours": "3.000", "cny": "23.44"}
    assert impact["below_contract"] == {"gpu_hours": "7.200", "cny": "56.25"}


def test_an_amendment_mid_month_judges_each_part_by_its_own_terms():
    # v1 until 2026-11-16 00:00: 100 Gbps, threshold 95 %, rent 45,000 (7.8125 per
    # GPU-hour). v2 from then: 200 Gbps, threshold 80 % (160 Gbps), rent 54,000
    # (54,000 / 8 / 720 = 9.375 per GPU-hour). Now: 2026-11-16 04:00.
    # v1, 360 h at 98 Gbps (4 measured hours; the others are taken to be like them):
    #   below threshold 0; below contract 16 x 360 x 3/220 = 17,280/220 = 78.5454...
    #   GPU-hours; x 7.8125 = 613.6363... -> 613.64 CNY.
    # v2, 4 h at 140 Gbps:
    #   below threshold 1 - 2.3125/2.5 = 0.075; 16 x 4 x 0.075 = 4.8 GPU-hours; x 9.375 = 45.00;
    #   below contract 1 - 2.05/2.5 = 0.18; 16 x 4 x 0.18 = 11.52 GPU-hours; x 9.375 = 108.00.
    # Totals: below threshold 4.8 and 45.00; below contract 90.0654... -> 90.065 and
    # 613.64 + 108.00 = 721.64.
    # (Judged by v2 alone, v1's 98 Gbps hours would fall below 160 Gbps and be owed.)
    lease = _lease()
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-16 00:00"),
        changes={
            "contracted_bandwidth_gbps": D("200"),
            "sla_threshold_percent": D("80"),
            "node_rent_per_month": D("54000.00"),
        },
        reason="Upgraded to 2x100G.",
    )
    _hourly(lease, "2026-11-15 20:00", 98, hours=4)
    _hourly(lease, "2026-11-16 00:00", 140, hours=4, verdict="fail")
    impact = _impact(lease, "2026-11-16 04:00")["training_impact"]
    first, second = impact["segments"]
    assert (first["terms_version"], second["terms_version"]) == (1, 2)
    assert first["until"] == second["from"] == "2026-11-15T16:00:00+00:00"
    assert (first["wall_hours"], second["wall_hours"]) == ("360.000", "4.000")
    assert (first["measured_hours"], second["measured_hours"]) == (4, 4)
    assert (first["threshold_busbw_bps"], second["threshold_busbw_bps"]) == (
        95 * GBPS,
        160 * GBPS,
    )
    assert first["below_threshold"] == {"gpu_hours": "0.000", "cny": "0.00"}
    assert first["below_contract"] == {"gpu_hours": "78.545", "cny": "613.64"}
    assert second["below_threshold"] == {"gpu_hours": "4.800", "cny": "45.00"}
    assert second["below_contract"] == {"gpu_hours": "11.520", "cny": "108.00"}
    assert impact["below_threshold"] == {"gpu_hours": "4.800", "cny": "45.00"}
    assert impact["below_contract"] == {"gpu_hours": "90.065", "cny": "721.64"}
    # The step figures describe the latest terms: 140 against 200 Gbps.
    assert (impact["measured_busbw_bps"], impact["contracted_busbw_bps"]) == (
        140 * GBPS,
        200 * GBPS,
    )


def test_nothing_elapsed_or_nothing_measured_is_no_estimate():
    lease = _lease()
    before = _impact(lease, "2026-10-31 12:00")
    assert before["training_impact"] is None
    unmeasured = _impact(lease, "2026-11-05 00:00")
    assert unmeasured["training_impact"] is None


def test_an_open_incident_is_priced_up_to_now_not_to_the_months_end():
    # Three failing hours at 40 Gbps from 00:00 open an incident that is still open at
    # 03:00 (now): 3 h, not the 717 h left in November.
    # Below threshold: t_step(40) = 1 + 5.25 = 6.25; 1 - (61/19)/6.25 = 1 - 244/475 =
    #   231/475; 16 x 3 x 231/475 = 11,088/475 = 23.343157... -> 23.343;
    #   x 7.8125 = 182.368421... -> 182.37.
    # Below contract: 1 - 3.1/6.25 = 0.504; 16 x 3 x 0.504 = 24.192; x 7.8125 = 189.00.
    lease = _lease()
    _hourly(lease, "2026-11-01 00:00", 40, hours=3, verdict="fail")
    report = _impact(lease, "2026-11-01 03:00")
    (incident,) = report["incidents"]
    assert incident["closed_at"] is None
    estimate = incident["training_impact"]
    assert estimate["wall_hours"] == "3.000"
    assert estimate["below_threshold"] == {"gpu_hours": "23.343", "cny": "182.37"}
    assert estimate["below_contract"] == {"gpu_hours": "24.192", "cny": "189.00"}


def test_the_lease_page_labels_both_shortfalls_and_shows_zero_as_zero():
    # The 98 Gbps lease above, four hours in: nothing below the threshold, 0.873 GPU-hours
    # (0.9 on the page; zero prints as 0) and 6.82 CNY below the contract.
    lease = _lease()
    _hourly(lease, "2026-11-01 00:00", 98, hours=4)
    member = MembershipFactory(tenant=lease.tenant)
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(member.user)
    with time_machine.travel(at("2026-11-01 04:00"), tick=False):
        ingest_all(notify=False)
        html = client.get(f"/leases/{lease.pk}/").content.decode()
    threshold_row = re.search(r'<tr class="impact-below-threshold">.*?</tr>', html, re.S)
    contract_row = re.search(r'<tr class="impact-below-contract">.*?</tr>', html, re.S)
    assert threshold_row and contract_row
    assert "Training impact below the SLA threshold" in threshold_row[0]
    assert ">0 GPU-hours<" in threshold_row[0] and ">¥0.00<" in threshold_row[0]
    assert "Training impact below contract (informational)" in contract_row[0]
    assert ">0.9 GPU-hours<" in contract_row[0] and ">¥6.82<" in contract_row[0]
