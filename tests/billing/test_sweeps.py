"""Sweeps through the real path: what each node printed, recorded as a worker records it
(``benchmarks.recording.record_execution``), ingested into samples, incidents and rollups,
billed, bundled and checked by the standalone verifier. Node outputs are the real tools'
(ethtool: ethtool/speed_1000_softroce_rxe52.txt; netdev statistics:
counters/netdev_sysfs_virtio_capture.txt), under the probes' own section headers."""

import copy
import json
from datetime import timedelta
from decimal import Decimal as D
from pathlib import Path

import pytest

from billing import audit
from billing.ingest import ingest_all
from billing.models import HourlyRollup, TrafficSample
from incidents.models import Incident
from leases import services
from leases.choices import BillingMode, LeaseStatus
from tests.billing.test_tampering_suite import relink
from tests.factories import NicPortFactory, NodeFactory, TenantFactory, at, make_lease, make_sweep

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "benchmarks/fixtures"
# ethtool of a 1 Gbit/s port that is up, without the prompt line the capture starts with
ETHTOOL_UP = (FIXTURES / "ethtool/speed_1000_softroce_rxe52.txt").read_text().split("\n", 1)[1]
NETDEV = (FIXTURES / "counters/netdev_sysfs_virtio_capture.txt").read_text()
NOVEMBER, AFTER_NOVEMBER = "2026-11", at("2026-12-02 00:00")
GB = 10**9


@pytest.fixture(autouse=True)
def _key(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.AUDIT_SIGNING_KEY = str(tmp_path / "audit.pem")


def lease_of(count: int, **terms):  # type: ignore[no-untyped-def]
    """An active lease of nodes n1.. with one 1 Gbit/s Ethernet port each, data0."""
    nodes = [NodeFactory(hostname=f"n{i}") for i in range(1, count + 1)]
    for node in nodes:
        NicPortFactory(node=node, device="data0", netdev="data0", rate_gbps=1)
    lease = make_lease(
        tenant=TenantFactory(), nodes=nodes, starts_at=at("2026-11-01 00:00"), **terms
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))


def link(*, up: bool = True, downs: int = 0) -> str:
    """What the link check prints on a node: ethtool of data0 and its link-down count."""
    text = ETHTOOL_UP if up else ETHTOOL_UP.replace("Link detected: yes", "Link detected: no")
    return f"### ethtool data0\n{text}### carrier_down_count data0\n{downs}\n"


def counters(tx: int) -> str:
    """What the counters probe prints on a node whose data0 has sent ``tx`` bytes."""
    lines = [
        line.replace("eth0", "data0")
        if not line.endswith("/tx_bytes:233081")
        else f"/sys/class/net/data0/statistics/tx_bytes:{tx}"
        for line in NETDEV.splitlines()
    ]
    return "### counters data0\n" + "\n".join(lines) + "\n"


def report(lease, *, raw: bool = True):  # type: ignore[no-untyped-def]
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER, include_raw=raw)
    return doc, *audit.verify_report(doc, audit.published_key_info())


def test_counters_sweeps_meter_every_node_and_one_not_read_is_spread_over_its_interval():
    # n1: 0, 300 GB, 600 GB at 10:00, 10:05, 10:10; n2: 0, unreachable, 200 GB. n2's one
    # interval, 10:00 to 10:10, gives 100 GB to each slot: 400 GB in each sample.
    lease = lease_of(2, billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    slot = at("2026-11-02 10:00")
    make_sweep(lease, kind="counters", slot=slot, outputs={"n1": counters(0), "n2": counters(0)})
    missing = make_sweep(
        lease,
        kind="counters",
        slot=slot + timedelta(minutes=5),
        outputs={"n1": counters(300 * GB)},
        failures={"n2": ("unreachable", "connection refused")},
    )
    assert (missing.state, missing.error) == ("unreachable", "n2: unreachable: connection refused")
    make_sweep(
        lease,
        kind="counters",
        slot=slot + timedelta(minutes=10),
        outputs={"n1": counters(600 * GB), "n2": counters(200 * GB)},
    )
    ingest_all(notify=False)
    samples = TrafficSample.objects.filter(lease=lease).order_by("slot_at")
    assert [(s.slot_at, int(s.tx_bytes), s.nodes) for s in samples] == [
        (slot, 400 * GB, 2),
        (slot + timedelta(minutes=5), 400 * GB, 2),
    ]
    # The verifier re-parses every node's part of every transcript and rebuilds the
    # samples from them: 800 GB at ¥0.50.
    doc, mismatches, notes = report(lease)
    assert mismatches == []
    [line] = [line for line in doc["bundle"]["invoice"]["lines"] if line["kind"] == "usage_gb"]
    assert line["amount"] == "400.00"
    assert "runs: 3 re-judged from their figures, 3 re-parsed from raw output" in notes


def test_a_link_incident_opens_and_closes_per_node_and_the_slots_give_availability():
    # n2 down at 08:05, 08:10 and 08:15 (three checks: the default to open an incident),
    # n3 down at 08:10 only, every node up at 08:00 and 08:20.
    lease = lease_of(3)
    slot = at("2026-11-03 08:00")
    sweeps = []
    for step, down in enumerate([(), ("n2",), ("n2", "n3"), ("n2",), ()]):
        outputs = {name: link(up=name not in down) for name in ("n1", "n2", "n3")}
        sweeps.append(make_sweep(lease, slot=slot + timedelta(minutes=5 * step), outputs=outputs))
    assert [run.verdict for run in sweeps] == ["pass", "fail", "fail", "fail", "pass"]
    assert sweeps[2].verdict_reason == "n2: data0 is down; n3: data0 is down"
    assert sweeps[0].verdict_reason == "3 node(s), 3 port(s) up at their rate"
    ingest_all(notify=False)
    [incident] = Incident.objects.filter(lease=lease)
    assert (incident.kind, incident.pattern, incident.target) == ("link", "sweep", "n2")
    assert (incident.state, incident.violations) == ("closed", 3)
    assert incident.opened_at == slot + timedelta(minutes=5)
    assert incident.closed_at == sweeps[4].finished_at
    assert sorted(incident.runs.values_list("pk", flat=True)) == [run.pk for run in sweeps[1:4]]
    rollup = HourlyRollup.objects.get(lease=lease, kind="link", hour=at("2026-11-03 08:00"))
    assert (rollup.passed, rollup.failed) == (2, 3)
    assert (rollup.available_minutes, rollup.unavailable_minutes) == (10, 15)


def test_a_link_down_count_that_moved_since_the_nodes_previous_sweep_is_a_flap():
    lease = lease_of(2)
    slot = at("2026-11-03 08:00")
    make_sweep(lease, slot=slot, outputs={"n1": link(downs=0), "n2": link(downs=5)})
    flapped = make_sweep(
        lease, slot=slot + timedelta(minutes=5), outputs={"n1": link(downs=2), "n2": link(downs=5)}
    )
    steady = make_sweep(
        lease, slot=slot + timedelta(minutes=10), outputs={"n1": link(downs=2), "n2": link(downs=5)}
    )
    assert (flapped.verdict, flapped.verdict_reason) == (
        "fail",
        "n1: data0 went down 2 time(s) since the last check",
    )
    ports = flapped.parsed["nodes"]["n1"]["ports"]
    assert [(p["link_down_count"], p["previous_link_down_count"]) for p in ports] == [(2, 0)]
    assert steady.verdict == "pass"


def test_a_nodes_result_edited_and_re_signed_is_named_from_its_part_of_the_transcript():
    # An insider turns n2's failed check into a pass, re-hashes the chain and lets the
    # server sign: every figure agrees with every other; n2's own output says otherwise.
    lease = lease_of(2)
    slot = at("2026-11-03 08:00")
    make_sweep(lease, slot=slot, outputs={"n1": link(), "n2": link(up=False)})
    ingest_all(notify=False)
    doc, mismatches, _notes = report(lease)
    assert mismatches == []
    bundle = copy.deepcopy(doc["bundle"])
    [entry] = [run for run in bundle["runs"] if run["content"]["pattern"] == "sweep"]
    content = entry["content"]
    forged = json.loads(content["parsed"])
    forged["nodes"]["n2"]["verdict"] = "pass"
    forged["nodes"]["n2"]["ports"][0].update(up=True, speed_bps=10**9)
    content.update(
        parsed=json.dumps(forged, sort_keys=True, separators=(",", ":")),
        verdict="pass",
        verdict_reason="2 node(s), 2 port(s) up at their rate",
    )
    relink(bundle)
    found = audit.verify(audit.sign_bundle(bundle), audit.published_key_info()["public_key_pem"])
    assert any(
        f"run {entry['id']} (link all): node n2's result differs from its output re-parsed"
        in sentence
        for sentence in found
    ), found
