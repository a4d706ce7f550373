"""The demo carries real evidence: every demo lease's audit bundle, fetched from the API
with ``raw=1``, passes the standalone verifier (``gpulease-verify``), which re-hashes and
re-parses every run's raw output; its last hour of telemetry holds one flapping port and
the switch-side witness; its heavy probes fill the probe-tax ledger and are kept out of
metering.

The clock is pinned at 12:00 on 2 November 2026 in Shanghai, with two days of history
(ZY-2026-001's reaches back to its episode, three days before November began).
"""

import io
import json
import re
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from benchmarks.models import ProbeRun
from benchmarks.models.outputs import load_texts
from billing.probe_tax import probe_tax_of
from demo.history import load_history
from gpulease_verify import cli
from gpulease_verify.periods import Period
from incidents.models import Incident
from leases.demo import load_demo
from leases.models import Lease
from ledger.chain import verify_lease
from telemetry.models import PortSample, SwitchReading

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 2, 4, 0, tzinfo=UTC)  # 12:00 in Shanghai
GIGA = 10**9


def test_the_demo_carries_real_evidence(tmp_path):
    """One demo (loading it is most of the time), every check on it."""
    with time_machine.travel(NOW, tick=False):
        load_demo()
        load_history(days=2)
    every_bundle_verifies_with_its_raw_outputs_re_parsed(tmp_path)
    the_raw_outputs_are_the_tools_own_and_give_the_stored_figures()
    the_last_hour_holds_a_flapping_port_the_witness_and_the_probe_tax()
    the_portal_shows_the_probe_tax_and_the_fabric_incidents()


def _periods(lease: Lease) -> list[str]:
    """Every month from the lease's first (at most this one) to this one."""
    zone = lease.tenant.time_zone
    this = Period.containing(NOW, zone)
    period = min(Period.containing(lease.starts_at, zone), this)
    found = []
    while str(period) <= str(this):
        found.append(str(period))
        period = period.next
    return found


def every_bundle_verifies_with_its_raw_outputs_re_parsed(tmp_path):
    provider = get_user_model().objects.get(username="provider")
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_authenticate(provider)
    key = tmp_path / "keys.json"
    with time_machine.travel(NOW, tick=False):
        key.write_text(api.get("/api/v1/audit/public-key/").content.decode())
        checked: set[int] = set()
        for lease in Lease.objects.select_related("tenant").order_by("reference"):
            for period in _periods(lease):
                response = api.get(f"/api/v1/leases/{lease.pk}/audit/?period={period}&raw=1")
                assert response.status_code == 200, (lease.reference, period)
                path = tmp_path / f"{lease.reference}-{period}.json"
                path.write_bytes(response.content)
                runs = json.loads(response.content)["bundle"]["runs"]
                assert all("raw_output" in run for run in runs)
                out = io.StringIO()
                code = cli.run([str(path), "--public-key", str(key)], out=out)
                report = out.getvalue()
                assert code == 0, (lease.reference, period, report[-3000:])
                assert report.rstrip().endswith("all figures agree")
                if runs:
                    assert f"{len(runs)} re-parsed from raw output" in report
                checked |= {run["id"] for run in runs}
    # Every run of every lease was re-parsed in some bundle.
    assert checked == set(ProbeRun.objects.values_list("pk", flat=True)) != set()


def _iperf3_bytes(raw: str) -> tuple[int, int, float]:
    """(bytes sent after the omitted second, bytes of the omitted second, seconds), read
    from the JSON by hand."""
    document = json.loads(raw[raw.index("{") :])
    omitted = sum(i["sum"]["bytes"] for i in document["intervals"] if i["sum"]["omitted"])
    sent = document["end"]["sum_sent"]
    return sent["bytes"], omitted, sent["seconds"]


def the_raw_outputs_are_the_tools_own_and_give_the_stored_figures():
    runs = list(ProbeRun.objects.filter(kind__in=("throughput", "latency", "collective")))
    load_texts(runs)
    tools = {run.tool for run in runs}
    assert tools == {"iperf3", "ib_write_bw", "ib_write_lat", "all_reduce_perf"}
    for run in runs:
        assert run.raw_output.startswith("gpulease demo: synthetic"), run
        assert run.command, run
        if run.tool == "iperf3":
            # rate x seconds: the stored figure is the receiver's bytes over its seconds,
            # and the command is the probe's own (-t 10 -O 1 -P n).
            sent, omitted, seconds = _iperf3_bytes(run.raw_output)
            assert "-J -t 10 -O 1 -P " in run.command
            assert abs(sent * 8 / seconds - run.measured_bps) / run.measured_bps < 0.001
            assert 0.7 < omitted / (sent / 10) < 0.95  # TCP ramping up in the first second
            assert run.sent_bytes == {run.target.split(">")[0]: sent + omitted}
        elif run.tool == "ib_write_bw":
            row = re.search(r"^ 65536\s+(\d+)\s+0\.00\s+([\d.]+)", run.raw_output, re.MULTILINE)
            assert row is not None, run.raw_output
            iterations, average = int(row[1]), row[2]
            assert run.measured_bps == int(float(average) * GIGA)
            # the average printed to 0.01 Gbit/s: the iterations' bytes over the 10 s
            assert abs(iterations * 65536 * 8 / 10 - run.measured_bps) <= 0.005 * GIGA
            assert run.sent_bytes == {run.target.split(">")[0]: iterations * 65536}
        elif run.tool == "all_reduce_perf":
            rows = re.findall(r"^\s+(\d+)\s+\d+\s+float\s+sum\s+-1\s", run.raw_output, re.M)
            assert [int(size) for size in rows] == [2**27, 2**28, 2**29, 2**30]
            average = re.search(r"# Avg bus bandwidth\s+:\s+(\S+)", run.raw_output)
            assert average is not None
            assert run.measured_bps == int(float(average[1]) * 8 * GIGA)
            # Each of the 4 nodes' last rank sends 2 (n-1)/n of each size, 20 iterations
            # out of place, 20 in place and 5 warm-up: 2 x 31/32 x (2^31 - 2^27) x 45.
            assert set(run.sent_bytes.values()) == {2 * 31 * (2**31 - 2**27) * 45 // 32}
        assert run.verdict == "pass" or run.lease.reference in ("ZY-2026-001", "LX-2026-001")


def the_last_hour_holds_a_flapping_port_the_witness_and_the_probe_tax():
    lease = Lease.objects.get(reference="ZY-2026-001")
    out = io.StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("fabric_health", "--lease", lease.reference, "--json", stdout=out)
    report = json.loads(out.getvalue())
    findings = {
        (node["node"], port["port"], finding["rule"])
        for node in report["nodes"]
        for port in node["ports"]
        for finding in port["findings"]
    }
    # One physical port flaps: sz-a100-03's second NIC port, seen by both its RDMA port
    # (link_downed: a fatal counter each time) and its netdev (carrier_changes).
    assert {(n, p, r) for n, p, r in findings if r == "link_flap"} == {
        ("sz-a100-03", "mlx5_1:1", "link_flap"),
        ("sz-a100-03", "ens2f0np0", "link_flap"),
    }
    assert {(n, p) for n, p, _ in findings} == {
        ("sz-a100-03", "mlx5_1:1"),
        ("sz-a100-03", "ens2f0np0"),
    }
    node = next(node for node in report["nodes"] if node["node"] == "sz-a100-03")
    port = next(port for port in node["ports"] if port["port"] == "mlx5_1:1")
    # Four outages, each seen down by two 30 s polls: 4 cycles, 4 x 60 s unavailable.
    assert (port["down_cycles"], port["unavailable_seconds"]) == (4, 240)
    flap = next(f for f in port["findings"] if f["rule"] == "link_flap")
    assert flap["end"] is None  # within the hold-down when the demo loaded
    # gpud's rule too: down on two polls at least 25 s apart, then up again, 3 or more
    # times within 12 hours.
    rows = list(PortSample.objects.filter(node__hostname="sz-a100-03", port="mlx5_1:1"))
    states = [(row.at, row.up) for row in sorted(rows, key=lambda row: row.at)]
    events = [
        states[k][0]
        for k in range(1, len(states) - 1)
        if states[k - 1][1] is False
        and states[k][1] is False
        and (states[k][0] - states[k - 1][0]).total_seconds() >= 25
        and states[k + 1][1] is True
    ]
    assert len(events) == 4 and events[-1] - events[0] <= timedelta(hours=12)
    # The switch ports of ZY-2026-001's nodes (leaf1, read over SNMP) agree with them.
    for entry in report["nodes"]:
        witness = entry["witness"]
        assert witness["switch"] == "roce-100g-leaf1", entry["node"]
        assert witness["agrees"] is True and witness["readings"] >= 2
        assert round(witness["difference_percent"], 1) == 0.2  # Ethernet frames' overhead
    assert SwitchReading.objects.exists()
    # Its throughput runs carry their witness block, in agreement.
    witnessed = ProbeRun.objects.filter(lease=lease, kind="throughput")
    assert witnessed.exists()
    for run in witnessed:
        assert run.parsed["witness"]["agrees"] is True, run.parsed["witness"]
    # The telemetry incidents, and the chain (runs, terms, telemetry batches) holds.
    assert Incident.objects.filter(
        lease=lease, kind="telemetry", pattern="link_flap", state="open"
    ).exists()
    assert Incident.objects.filter(lease=lease, pattern="ib_fatal_counters").count() == 4
    for each in Lease.objects.filter(status="active"):
        assert verify_lease(lease_id=each.pk) == [], each.reference
    # The probe tax: this month's heavy runs, each with the bytes its output says it sent.
    tax = report["probe_tax"]
    runs = ProbeRun.objects.filter(
        lease=lease,
        kind__in=("throughput", "collective"),
        started_at__gte=datetime(2026, 10, 31, 16, tzinfo=UTC),
    )
    assert tax["totals"]["runs"] == runs.count() > 0
    assert tax["totals"]["bytes"] == sum(sum(run.sent_bytes.values()) for run in runs)
    for metered in ("LX-2026-001", "LX-2026-002"):
        ledger = probe_tax_of(lease=Lease.objects.get(reference=metered), period="2026-11")
        assert ledger.count > 0 and ledger.bytes > 0
    # What the per-GB lease's probe traffic would have cost at its ¥0.0300 a GB.
    ledger = probe_tax_of(lease=Lease.objects.get(reference="LX-2026-001"), period="2026-11")
    assert ledger.cost == (Decimal(ledger.bytes) / GIGA * Decimal("0.0300")).quantize(
        Decimal("0.01"), rounding=ROUND_HALF_UP
    )


def the_portal_shows_the_probe_tax_and_the_fabric_incidents():
    lease = Lease.objects.get(reference="ZY-2026-001")
    ledger = probe_tax_of(lease=lease, period="2026-11")
    customer = Client(HTTP_ACCEPT_LANGUAGE="en")
    customer.force_login(get_user_model().objects.get(username="zhiyuan-admin"))
    provider = Client(HTTP_ACCEPT_LANGUAGE="en")
    provider.force_login(get_user_model().objects.get(username="provider"))
    with time_machine.travel(NOW, tick=False):
        lease_page = customer.get(f"/leases/{lease.pk}/")
        incidents_page = provider.get("/provider/incidents/")
    assert (lease_page.status_code, incidents_page.status_code) == (200, 200)
    page, incidents = lease_page.content.decode(), incidents_page.content.decode()
    assert f'<th>Probe runs</th><td class="num">{ledger.count}</td>' in page
    assert 'class="probe-tax-runs"' in page
    assert "sz-a100-03:mlx5_1:1" in incidents and "sz-a100-03:ens2f0np0" in incidents
