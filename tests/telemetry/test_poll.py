"""The telemetry cycle on this machine's own loopback (a node whose management address is
``local`` runs the real command here), with the clock pinned: what a healthy port stores,
how a garbled or failed poll is kept, a reboot, and two cycles that overlap.

The lab tests (tests/benchmarks/test_fabric_health_lab.py) take flaps and the witness
over real SSH and a real snmpd."""

from datetime import timedelta

import pytest

from benchmarks import chain
from benchmarks.transports import CommandResult, HostUnreachable
from billing.models import Incident
from gpulease_verify import health
from leases import services
from leases.choices import LeaseStatus
from telemetry import poller
from telemetry import services as telemetry
from telemetry.models import NodeReading, PortSample, TelemetryBatch
from tests.factories import NicPortFactory, NodeFactory, at, make_lease

pytestmark = pytest.mark.django_db

NOW = at("2026-11-10 10:00")


@pytest.fixture(autouse=True)
def _fresh_connections():
    poller.reset()
    yield
    poller.reset()


@pytest.fixture
def lease():
    node = NodeFactory(hostname="loop-01", management_address="local")
    NicPortFactory(node=node, device="lo", netdev="lo", link_layer="ethernet")
    lease = make_lease(nodes=[node])
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01 00:00"))
    return lease


class Printing:
    """A node that prints what it is told to (a garbled poll, a reboot)."""

    def __init__(self, text: str | Exception) -> None:
        self.text = text

    label = "printing"

    async def run(self, command, *, timeout_s, max_output_bytes=0):  # type: ignore[no-untyped-def]
        if isinstance(self.text, Exception):
            raise self.text
        return CommandResult(command, 0, self.text, "", 0.01, False)

    async def close(self) -> None:
        return None


def test_a_healthy_port_is_stored_as_one_row_per_five_minutes_and_each_row_is_a_chain_link(
    lease,
):
    for n in range(11):  # 0, 30, ..., 300 s
        result = telemetry.poll(now=NOW + timedelta(seconds=30 * n))
        assert result.nodes == 1 and not result.failed, result
    rows = list(PortSample.objects.filter(port="lo"))
    # The first poll only reads the state; ten quiet 30 s intervals make one 300 s row.
    assert [(row.seconds, row.up, row.down_cycles, row.reset) for row in rows] == [
        (300.0, True, 0, False)
    ]
    assert rows[0].at == NOW + timedelta(seconds=300)
    assert set(rows[0].deltas) <= {"rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped"}
    batch = TelemetryBatch.objects.get(lease=lease)
    assert rows[0].batch == batch and batch.chain_index is not None
    assert chain.verify_lease(lease_id=lease.pk) == []
    # The interval under way is kept on the node's reading until it is stored.
    assert NodeReading.objects.get(node__hostname="loop-01").pending == {}


def test_a_garbled_poll_is_kept_raw_and_counts_nothing(lease):
    telemetry.poll(now=NOW)
    garbled = "### boot_id\nnot a boot id\n### clock\nsoon\n"
    node = lease.assignments.get().node
    poller.reset()  # the kept-open connection is the loopback's: now a garbling node's
    result = telemetry.poll(now=NOW + timedelta(seconds=30), connect=lambda n: Printing(garbled))
    assert result.failed == ["loop-01"]
    reading = NodeReading.objects.get(node=node)
    assert reading.error.startswith("unparsable: ")
    assert reading.raw_output == garbled
    assert reading.at == NOW  # the last good reading stays the base of the next deltas
    assert not PortSample.objects.exists()
    poller.reset()
    unreachable = telemetry.poll(
        now=NOW + timedelta(seconds=60),
        connect=lambda n: Printing(HostUnreachable("loop-01: connection refused")),
    )
    assert unreachable.failed == ["loop-01"]
    reading.refresh_from_db()
    assert reading.error == "unreachable: loop-01: connection refused"


def test_a_reboot_is_stored_at_once_as_a_reset(lease):
    telemetry.poll(now=NOW)
    reading = NodeReading.objects.get()
    rebooted = reading.snapshot | {"boot_id": "00000000-0000-4000-8000-000000000000"}
    reading.snapshot = rebooted  # the next real poll sees another boot id
    reading.save()
    telemetry.poll(now=NOW + timedelta(seconds=30))
    [row] = PortSample.objects.filter(seconds__gt=0)
    assert (row.reset, row.deltas, row.seconds) == (True, {}, 30.0)


def test_two_overlapping_cycles_never_read_a_node_twice(lease):
    held = telemetry.held_nodes(NOW)
    assert [h.node.hostname for h in held] == ["loop-01"]
    assert telemetry._claim(held, NOW) == held
    # Another cycle starting while the first still reads finds nothing to do...
    assert telemetry.poll(now=NOW + timedelta(seconds=15)).nodes == 0
    # ...and a cycle that died holds the node only until its claim lapses.
    assert telemetry.poll(now=NOW + timedelta(seconds=31)).nodes == 1


def _infiniband_poll(link_downed: int) -> str:
    """An InfiniBand port's part of the telemetry command's output (its sysfs files)."""
    base = "/sys/class/infiniband/mlx5_0/ports/1"
    return (
        "### boot_id\n5f0c8e0e-3c1b-4a55-9e1e-2a51c0b8f3d1\n### clock\n86400.00 5000000.00\n"
        f"### ib mlx5_0:1\n{base}/state:4: ACTIVE\n{base}/phys_state:5: LinkUp\n"
        f"{base}/rate:400 Gb/sec (4X NDR)\n{base}/link_layer:InfiniBand\n"
        f"{base}/counters/link_downed:{link_downed}\n{base}/counters/port_xmit_data:1000\n"
    )


def test_a_link_downed_increase_opens_an_incident_named_by_its_rule():
    """``ib_fatal_counters`` (17 characters) names the incident, on PostgreSQL too."""
    node = NodeFactory(hostname="ib-01", management_address="ib-01.example.cn")
    NicPortFactory(node=node, device="mlx5_0", netdev="", link_layer="infiniband", rate_gbps=400)
    lease = make_lease(nodes=[node])
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01 00:00"))
    for step, downed in enumerate((0, 1)):
        poller.reset()
        result = telemetry.poll(
            now=NOW + timedelta(seconds=30 * step),
            connect=lambda n, downed=downed: Printing(_infiniband_poll(downed)),
        )
        assert result.nodes == 1 and not result.failed, result
    incident = Incident.objects.get(lease=lease, target="ib-01:mlx5_0:1")
    assert (incident.kind, incident.pattern, incident.rule) == (
        "telemetry",
        "ib_fatal_counters",
        "ib_fatal_counters v1",
    )
    assert max(len(rule) for rule in health.RULES) <= Incident._meta.get_field("pattern").max_length
