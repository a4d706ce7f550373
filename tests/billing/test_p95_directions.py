"""95计费 by direction and window end to end (issue 32, item 1): the dispatcher's counters
sweeps (each node prints the kernel's netdev statistics, the real capture
counters/netdev_sysfs_virtio_capture.txt, with data0's tx_bytes and rx_bytes at the
figures the test gives), ingest, the invoice line, the audit bundle and the standalone
verifier, which rebuilds both directions from the runs and re-derives the line.

The lease runs one hour across Shanghai midnight, 14 Nov 23:30 to 15 Nov 00:30 (3,600 s of
a 30-day November, 2,592,000 s), read every 5 minutes: 12 intervals, 6 on each day. In
Mbps (x 37,500,000 B per 300 s slot):

- 14 Nov: tx 100, 200, 100, 100, 100, 100; rx 50, 50, 400, 50, 50, 50
- 15 Nov: tx 700, 10, 10, 10, 10, 10; rx 20, 20, 20, 20, 20, 600

12 samples drop none (fewer than 20), so a monthly 95th is the highest:

- rx, monthly: 600 Mbps.
- max_of_p95, monthly: max(tx 700, rx 600) = 700 Mbps.
- tx, daily_average: 14 Nov 200, 15 Nov 700: (200 + 700) / 2 = 450 Mbps.
- max, daily_average: 14 Nov max(tx, rx) per slot 100, 200, 400, 100, 100, 100 -> 400;
  15 Nov 700, 20, 20, 20, 20, 600 -> 700: (400 + 700) / 2 = 550 Mbps.

At ¥36 per Mbps for 3,600 / 2,592,000 of the month (x 0.05): ¥30.00, ¥35.00, ¥22.50,
¥27.50. (tx monthly, today's rule, would bill 700 Mbps: ¥35.00.)"""

import re
from datetime import datetime, timedelta
from decimal import Decimal as D

import pytest
import time_machine
from django.utils import translation

from benchmarks import execution
from benchmarks import services as probe_services
from benchmarks.models import ProbeRun
from billing import audit, services
from billing.choices import LineKind
from billing.documents.labels import line_text
from billing.ingest import ingest_all
from billing.models import TrafficSample
from gpulease_verify import probe_tax, traffic
from gpulease_verify.probe_tax import ProbeSend
from leases.choices import BillingMode
from tests.billing.test_metering_edges import SECOND, Printing, lease_of
from tests.billing.test_sweeps import NETDEV
from tests.factories import at

pytestmark = pytest.mark.django_db

MBPS = 37_500_000  # bytes in a 300 s slot at 1 Mbps
TX = [100, 200, 100, 100, 100, 100, 700, 10, 10, 10, 10, 10]
RX = [50, 50, 400, 50, 50, 50, 20, 20, 20, 20, 20, 600]
NOW = at("2026-12-04 09:00")


@pytest.fixture(autouse=True)
def _key(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.AUDIT_SIGNING_KEY = str(tmp_path / "audit.pem")


def counters_both(tx: int, rx: int) -> str:
    """What the counters probe prints on a node whose data0 has sent ``tx`` and received
    ``rx`` bytes."""
    lines = []
    for line in NETDEV.splitlines():
        line = line.replace("eth0", "data0")
        if line.endswith("/tx_bytes:233081"):
            line = f"/sys/class/net/data0/statistics/tx_bytes:{tx}"
        elif line.endswith("/rx_bytes:119430232"):
            line = f"/sys/class/net/data0/statistics/rx_bytes:{rx}"
        lines.append(line)
    return "### counters data0\n" + "\n".join(lines) + "\n"


def cycle(now: datetime, tx: int, rx: int) -> None:
    """One dispatcher cycle at ``now``, then a worker running its counters sweeps 5 s later,
    n1 printing that data0 has sent ``tx`` and received ``rx`` bytes."""
    made = probe_services.dispatch_due(now=now, enqueue=False)
    text = counters_both(tx, rx)
    for batch in made.batch_ids:
        if ProbeRun.objects.filter(batch=batch, kind="counters", trigger="schedule").exists():
            execution.execute_batch(
                batch, now=now + 5 * SECOND, connect=lambda node: Printing(text), max_attempts=1
            )


def metered_lease(direction: str, window: str):  # type: ignore[no-untyped-def]
    lease = lease_of(
        "2026-11-14 23:30",
        "2026-11-15 00:30",
        billing_mode=BillingMode.P95,
        price_per_mbps_p95=D("36.00"),
        p95_direction=direction,
        p95_window=window,
    )
    sent, received = 0, 7  # the rx counter starts anywhere
    cycle(at("2026-11-14 23:30") + 30 * SECOND, sent, received)
    for index, (tx, rx) in enumerate(zip(TX, RX, strict=True), start=1):
        sent, received = sent + tx * MBPS, received + rx * MBPS
        cycle(at("2026-11-14 23:30") + timedelta(minutes=5 * index) + 30 * SECOND, sent, received)
    ingest_all(notify=False)
    return lease


CASES = [
    ("rx", "monthly", D("600.00"), D("30.00")),
    ("max_of_p95", "monthly", D("700.00"), D("35.00")),
    ("tx", "daily_average", D("450.00"), D("22.50")),
    ("max", "daily_average", D("550.00"), D("27.50")),
]


def _numbers(text: str) -> set[D]:
    return {
        D(token.replace(",", "")).normalize() for token in re.findall(r"\d[\d,]*(?:\.\d+)?", text)
    }


@pytest.mark.parametrize(("direction", "window", "mbps", "amount"), CASES)
def test_each_direction_and_window_from_counters_to_the_verifier(direction, window, mbps, amount):  # type: ignore[no-untyped-def]
    lease = metered_lease(direction, window)
    stored = list(
        TrafficSample.objects.filter(lease=lease)
        .order_by("slot_at")
        .values_list("seconds", "tx_bytes", "rx_bytes")
    )
    assert stored == [(300, tx * MBPS, rx * MBPS) for tx, rx in zip(TX, RX, strict=True)]
    with time_machine.travel(NOW, tick=False):
        invoice = services.draft_invoice(tenant=lease.tenant, period="2026-11")
    line = invoice.lines.get(kind=LineKind.USAGE_P95)
    assert (line.quantity, line.amount) == (mbps, amount)
    assert (line.detail["p95_direction"], line.detail["p95_window"]) == (direction, window)
    if window == "daily_average":
        assert line.detail["days"] == 2
        assert [day["day"] for day in line.detail["daily_p95_bps"]] == ["2026-11-14", "2026-11-15"]
    # The Chinese invoice says what the English does: every figure, the direction and window.
    with translation.override("zh-hans"):
        chinese = line_text(line)
    assert _numbers(line.description) <= _numbers(chinese), (line.description, chinese)
    if direction != "tx":
        assert f"方向 {direction}" in chinese
    if window == "daily_average":
        assert "按 2 天的日 95 值取平均" in chinese
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=NOW)
    (stated,) = [x for x in doc["bundle"]["invoice"]["lines"] if x["kind"] == "usage_p95"]
    assert (stated["detail"]["p95_direction"], stated["detail"]["p95_window"]) == (
        direction,
        window,
    )
    mismatches, _notes = audit.verify_report(doc, audit.published_key_info())
    assert mismatches == []

    # An insider raises the received bytes of 15 Nov 00:25 (the rx peak's slot) and
    # re-signs: the verifier rebuilds the sample from the runs and says so.
    TrafficSample.objects.filter(lease=lease, slot_at=at("2026-11-15 00:25")).update(
        rx_bytes=900 * MBPS
    )
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=NOW)
    mismatches, _notes = audit.verify_report(doc, audit.published_key_info())
    assert (
        "traffic sample 2026-11-14T16:25:00.000000Z: the bundle says 33750000000 B received, "
        "rebuilt from the runs 22500000000 B received"
    ) in mismatches


def test_a_line_that_states_another_direction_fails_verification():
    """The insider bills the month as ``max`` but leaves the terms at ``rx``: the line's
    stated direction and figure are re-derived from the terms and the runs."""
    lease = metered_lease("rx", "monthly")
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=NOW)
    bundle = doc["bundle"]
    (line,) = [x for x in bundle["invoice"]["lines"] if x["kind"] == "usage_p95"]
    position = line["position"]
    line["detail"]["p95_direction"] = "max_of_p95"
    line["detail"]["p95_bps"] = "700000000"
    line["quantity"], line["amount"] = "700.00", "35.00"
    mismatches, _notes = audit.verify_report(audit.sign_bundle(bundle), audit.published_key_info())
    name = f"invoice line {position} (usage_p95)"
    assert f"{name} 95th percentile direction: the bundle says max_of_p95, recomputed rx" in (
        mismatches
    )
    assert f"{name} amount: the bundle says 35.00, recomputed 30.00" in mismatches


def test_a_reading_at_the_switch_meters_received_bytes_from_its_out_octets():
    """Where the counters run read the node's switch port, the node received what the port
    transmitted to it (ifHCOutOctets); else its own rx_bytes per port."""
    parsed = {
        "ports": [{"section": "counters", "name": "data0", "tx_bytes": 5, "rx_bytes": 9}],
        "witness": {"switch": "leaf1", "port": "Eth1/1", "in_octets": 100, "out_octets": 300},
    }
    slot = at("2026-11-14 23:30")
    reading = traffic.reading_of(parsed, slot_at=slot, deadline_at=slot + 5 * 60 * SECOND)
    assert (reading.ports, reading.rx_ports) == (
        {"switch:leaf1/Eth1/1": 100},
        {"switch:leaf1/Eth1/1": 300},
    )
    del parsed["witness"]
    reading = traffic.reading_of(parsed, slot_at=slot, deadline_at=slot + 5 * 60 * SECOND)
    assert (reading.ports, reading.rx_ports) == ({"counters/data0": 5}, {"counters/data0": 9})


def test_a_probe_is_kept_out_of_what_its_peer_received():
    """A pair's client sent 3e9 B to its server and the server 1e9 B back: the server
    received 3e9, the client 1e9; a collective's ring gives each node what it sent."""
    start, end = at("2026-11-14 23:31"), at("2026-11-14 23:32")
    sent = [ProbeSend("n1", 3 * 10**9, start, end), ProbeSend("n2", 10**9, start, end)]
    assert probe_tax.received(sent, target="n1>n2") == [
        ProbeSend("n2", 3 * 10**9, start, end),
        ProbeSend("n1", 10**9, start, end),
    ]
    assert probe_tax.received(sent, target="all") == sent
