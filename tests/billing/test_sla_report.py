import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from leases import services
from leases.choices import LeaseStatus
from tests.factories import NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def lease():
    lease = make_lease(
        reference="ZY-2026-009",
        starts_at=at("2026-11-01 00:00"),
        nodes=NodeFactory.create_batch(4, gpu_count=8),
        network_fee_per_month=Decimal("22000.00"),
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))


def test_report_counts_samples_opens_the_incident_and_prices_the_credit(lease, capsys):
    # 20 hourly samples: 16 pass at 98 Gbit/s, 3 fail in a row at 40 Gbit/s, 1 unreachable.
    start = at("2026-11-03 00:00")
    for hour in range(20):
        slot = start + timedelta(hours=hour)
        if hour in (5, 6, 7):
            make_run(lease, slot=slot, verdict="fail", measured_bps=40 * 10**9)
        elif hour == 12:
            make_run(lease, slot=slot, state="unreachable")
        else:
            make_run(lease, slot=slot, measured_bps=98 * 10**9)
    call_command("sla_report", "--lease", "ZY-2026-009", "--period", "2026-11", "--json")
    report = json.loads(capsys.readouterr().out)
    throughput = report["throughput"]
    assert (throughput["passed"], throughput["failed"], throughput["unknown"]) == (16, 3, 1)
    # 16 / 20 = 80%; measured only 16 / 19 = 84.211%.
    assert throughput["compliance_percent"] == "80.000"
    assert throughput["measured_compliance_percent"] == "84.211"
    assert report["credit_compliance_percent"] == "80.000"
    # 80% is below every default tier (99.5, 99, 95): the largest, 50%, capped at 50%:
    # 50% of the 22,000.00 monthly network fee = -11,000.00.
    assert report["credit"]["percent_applied"] == "50"
    assert report["credit"]["amount"] == "-11000.00"
    (incident,) = report["incidents"]
    assert incident["opened_at"] == "2026-11-02T21:00:00+00:00"  # 05:00 in Shanghai
    assert incident["violations"] == 3
    assert incident["worst_bps"] == 40 * 10**9
    assert len(incident["evidence_run_ids"]) == 3
    # 32 GPUs at their worst, 40 Gbit/s, from 05:00 to the pass at 08:00 + 20 s:
    # 3 h 20 s = 541/180 h -> 3.006. t_step(bw) = 1 + 7e9 x 2 x 2(31/32) x 8 / bw
    # = 1 + 217e9 / bw: 257/40 s at 40, 312/95 s at 95 (the threshold), 3.17 s at 100.
    # Below threshold: 32 x 541/180 x (1 - (312/95)/(257/40)) = 32 x 541/180 x 2387/4883
    #   = 47.0154... GPU-hours; x 7.8125 = 367.308... -> 367.31.
    # Below contract: 32 x 541/180 x (1 - 3.17/(257/40)) = 32 x 541/180 x 651/1285
    #   = 48.7250... GPU-hours; x 7.8125 = 380.6647... -> 380.66 (also cost_lost).
    estimate = incident["training_impact"]
    assert (estimate["gpus"], estimate["wall_hours"]) == (32, "3.006")
    assert estimate["below_threshold"] == {"gpu_hours": "47.015", "cny": "367.31"}
    assert estimate["below_contract"] == {"gpu_hours": "48.725", "cny": "380.66"}
    assert estimate["cost_lost"] == "380.66"
    assert report["period_start"] == "2026-10-31T16:00:00+00:00"
    assert "count against the provider" in report["policy"]


def test_text_report_and_bad_input(lease, capsys):
    call_command("sla_report", "--lease", "ZY-2026-009", "--period", "2026-11")
    text = capsys.readouterr().out
    assert text.startswith("SLA report ZY-2026-009")
    assert "0 passed, 0 failed, 0 unknown" in text
    with pytest.raises(CommandError, match="written YYYY-MM, not '2026-13'"):
        call_command("sla_report", "--lease", "ZY-2026-009", "--period", "2026-13")
    with pytest.raises(CommandError, match="no lease with reference 'NOPE'"):
        call_command("sla_report", "--lease", "NOPE", "--period", "2026-11")
