"""The telemetry cycle on this machine's own loopback (a node whose management address is
``local`` runs the real command here), with the clock pinned: what a healthy port stores,
how a garbled or failed poll is kept, a reboot, and two cycles that overlap.

The lab tests (tests/benchmarks/test_fabric_health_lab.py) take flaps and the witness
over real SSH and a real snmpd."""

from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.urls import reverse

from benchmarks.transports import CommandResult, HostUnreachable, kept_open
from billing import audit
from gpulease_verify import health
from gpulease_verify.health import RULE_SETS
from gpulease_verify.periods import Period
from incidents.models import Incident
from leases import services
from leases.choices import LeaseStatus
from ledger.chain import verify_lease
from telemetry import services as telemetry
from telemetry.models import NodeReading, PortClearance, PortSample, TelemetryBatch
from tests.factories import NicPortFactory, NodeFactory, StaffFactory, at, make_lease

pytestmark = pytest.mark.django_db

NOW = at("2026-11-10 10:00")


@pytest.fixture(autouse=True)
def _fresh_connections():
    kept_open.reset()
    yield
    kept_open.reset()


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
    assert verify_lease(lease_id=lease.pk) == []
    # The interval under way is kept on the node's reading until it is stored.
    assert NodeReading.objects.get(node__hostname="loop-01").pending == {}


def test_a_garbled_poll_is_kept_raw_and_counts_nothing(lease):
    telemetry.poll(now=NOW)
    garbled = "### boot_id\nnot a boot id\n### clock\nsoon\n"
    node = lease.assignments.get().node
    kept_open.reset()  # the kept-open connection is the loopback's: now a garbling node's
    result = telemetry.poll(now=NOW + timedelta(seconds=30), connect=lambda n: Printing(garbled))
    assert result.failed == ["loop-01"]
    reading = NodeReading.objects.get(node=node)
    assert reading.error.startswith("unparsable: ")
    assert reading.raw_output == garbled
    assert reading.at == NOW  # the last good reading stays the base of the next deltas
    assert not PortSample.objects.exists()
    kept_open.reset()
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


# --- rule set 2 through the real path: a port below its rate, saturated counters ------------

FIXTURES = Path(__file__).parents[1] / "verifier" / "fixtures" / "telemetry"
BOOT = "89924595-6e08-46d9-aa54-98af938dd840"


def h100_poll(bond_rate: str = "200 Gb/sec (2X NDR)") -> str:
    """A poll of an H100 node as gpud's capture has it (fixtures/telemetry/README.md):
    mlx5_bond_0 ACTIVE at 200 Gb/s (two lanes of NDR), mlx5_1 with link_downed at 255
    and excessive_buffer_overrun_errors at 15. ``bond_rate`` replaces the bond's rate."""
    bond = (FIXTURES / "sysfs_roce_mlx5_bond_0_h100_gpud.txt").read_text()
    bond = bond.replace("rate:200 Gb/sec (2X NDR)", f"rate:{bond_rate}")
    mlx5_1 = (FIXTURES / "sysfs_ib_mlx5_1_h100_ndr_gpud.txt").read_text()
    return (
        f"### boot_id\n{BOOT}\n### clock\n1000.25 900.00\n"
        f"### ib mlx5_bond_0:1\n{bond}### ib mlx5_1:1\n{mlx5_1}"
    )


def h100_lease(**terms):
    node = NodeFactory(hostname="h100-01")
    NicPortFactory(node=node, device="mlx5_bond_0", rate_gbps=400, link_layer="ethernet")
    NicPortFactory(node=node, device="mlx5_1", rate_gbps=400, link_layer="infiniband")
    lease = make_lease(nodes=[node], **terms)
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01 00:00"))
    return lease


def poll_every_30_s(first: int, last: int, text: str) -> None:
    kept_open.reset()  # the node's kept-open connection: now one printing ``text``
    for n in range(first, last + 1):
        result = telemetry.poll(
            now=NOW + timedelta(seconds=30 * n), connect=lambda node: Printing(text)
        )
        assert result.nodes == 1 and not result.failed, result


def test_a_port_below_its_rate_and_saturated_counters_reach_incidents_and_the_bundle():
    lease = h100_lease()
    poll_every_30_s(0, 10, h100_poll())
    # Steadily at 200 Gb/s, with the same counters stuck: calm intervals that merge into
    # one 5-minute row per port, each carrying what the rules need.
    bond, ib = (
        PortSample.objects.get(port="mlx5_bond_0:1"),
        PortSample.objects.get(port="mlx5_1:1"),
    )
    assert (bond.seconds, bond.rate_gbps, bond.expected_gbps) == (300.0, 200.0, 400.0)
    assert (ib.seconds, ib.saturated) == (300.0, ["excessive_buffer_overrun_errors", "link_downed"])
    incidents = {
        (i.target, i.rule): i for i in Incident.objects.filter(lease=lease, kind="telemetry")
    }
    # gpud's capture has excessive_buffer_overrun_errors at 15 on the bond too.
    assert sorted(incidents) == [
        ("h100-01:mlx5_1:1", "ib_counter_saturated v1"),
        ("h100-01:mlx5_bond_0:1", "ib_counter_saturated v1"),
        ("h100-01:mlx5_bond_0:1", "link_speed_downgrade v1"),
    ]
    slow = incidents[("h100-01:mlx5_bond_0:1", "link_speed_downgrade v1")]
    assert (slow.opened_at, slow.state) == (NOW, "open")
    assert slow.detail.startswith("up at 200 Gb/s, below the 400 Gb/s expected of the port (50 %)")
    assert incidents[("h100-01:mlx5_1:1", "ib_counter_saturated v1")].detail.startswith(
        "excessive_buffer_overrun_errors at 15 (4-bit maximum), link_downed at 255 (8-bit"
    )

    # The link retrained at 400 Gb/s: a change, stored and judged at once, closes it at
    # the poll that found it.
    poll_every_30_s(11, 20, h100_poll("400 Gb/sec (4X NDR)"))
    slow.refresh_from_db()
    assert (slow.state, slow.closed_at) == ("closed", NOW + timedelta(seconds=330))
    assert [(r.seconds, r.rate_gbps) for r in PortSample.objects.filter(port="mlx5_bond_0:1")] == [
        (300.0, 200.0),
        (30.0, None),
    ]

    period = str(Period.containing(NOW, "Asia/Shanghai"))
    with time_machine.travel(NOW + timedelta(minutes=15), tick=False):
        doc = audit.signed_bundle(lease=lease, period=period)
    health = doc["bundle"]["fabric_health"]
    assert health["rules"]["link_speed_downgrade"] == 1 and health["rules"]["link_flap"] == 2
    assert health["thresholds"]["speed_fatal_below_percent"] == "100"
    found = {(f["port"], f["rule"]): f for f in health["findings"]}
    assert found[("mlx5_bond_0:1", "link_speed_downgrade")]["end"] == "2026-11-10T02:05:30.000000Z"
    assert found[("mlx5_1:1", "ib_counter_saturated")]["end"] is None
    assert audit.verify(doc, audit.published_key_info()) == []
    # An insider who drops the downgrade from the bundle (re-signed) is named.
    bundle = doc["bundle"]
    bundle["fabric_health"]["findings"] = [
        f for f in health["findings"] if f["rule"] != "link_speed_downgrade"
    ]
    forged = audit.verify(
        audit.sign_bundle(bundle, Ed25519PrivateKey.generate()), trust_embedded_key=True
    )
    assert any(
        m.startswith("fabric health: the telemetry gives link_speed_downgrade on h100-01")
        for m in forged
    )


def test_a_lease_judged_by_rule_set_1_keeps_its_findings_and_its_older_bundles_verify():
    lease = h100_lease(health_rules=1)
    poll_every_30_s(0, 10, h100_poll())
    # Set 1 has neither rule: the rows carry the rates, no incident opens.
    assert PortSample.objects.get(port="mlx5_bond_0:1").rate_gbps == 200.0
    assert not Incident.objects.filter(lease=lease, kind="telemetry").exists()
    period = str(Period.containing(NOW, "Asia/Shanghai"))
    with time_machine.travel(NOW + timedelta(minutes=15), tick=False):
        doc = audit.signed_bundle(lease=lease, period=period)
    assert doc["bundle"]["fabric_health"]["rules"] == RULE_SETS[1]
    assert "flap_lookback_s" not in doc["bundle"]["fabric_health"]["thresholds"]
    assert audit.verify(doc, audit.published_key_info()) == []
    # A bundle written before terms named a rule set has no such field: read as set 1.
    bundle = doc["bundle"]
    for entry in bundle["terms"]:
        del entry["health_rules"]
    older = audit.sign_bundle(bundle, Ed25519PrivateKey.generate())
    assert audit.verify(older, trust_embedded_key=True) == []


def test_every_health_rule_name_fits_an_incident_pattern():
    # ib_link_error_recovery (22 characters) did not fit the 16 an incident's pattern had.
    longest = max(len(name) for rules in RULE_SETS.values() for name in rules)
    assert longest <= Incident._meta.get_field("pattern").max_length


def ib_poll(up: bool) -> str:
    """gpud's H100 mlx5_0 (fixtures/telemetry/README.md), ACTIVE or, with its state file
    as a port that lost its link reads, DOWN / Polling."""
    text = (FIXTURES / "sysfs_ib_mlx5_0_h100_ndr_gpud.txt").read_text()
    if not up:
        text = text.replace("state:4: ACTIVE", "state:1: DOWN").replace(
            "phys_state:5: LinkUp", "phys_state:2: Polling"
        )
    return f"### boot_id\n{BOOT}\n### clock\n1000.25 900.00\n### ib mlx5_0:1\n{text}"


def poll_states(first: int, states: list[bool]) -> None:
    for n, up in enumerate(states, start=first):
        poll_every_30_s(n, n, ib_poll(up))


def test_three_flaps_stay_an_incident_until_an_operator_clears_the_port(client):
    node = NodeFactory(hostname="h100-02")
    NicPortFactory(node=node, device="mlx5_0", rate_gbps=400, link_layer="infiniband")
    lease = make_lease(nodes=[node])
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01 00:00"))
    # Down at two polls 30 s apart, then ACTIVE: a flap of gpud's, three times.
    poll_states(0, [True, False, False, True, False, False, True, False, False, True])
    flap = Incident.objects.get(lease=lease, pattern="link_flap")
    assert (flap.rule, flap.opened_at) == ("link_flap v2", NOW + timedelta(seconds=270))
    assert (flap.source, flap.opened_by) == ("telemetry", "telemetry")
    # 15 minutes up, past any hold-down: a flap is sticky (and no drop: 30 s down).
    poll_every_30_s(10, 40, ib_poll(True))
    flap.refresh_from_db()
    assert flap.state == "open"
    assert not Incident.objects.filter(lease=lease, pattern="link_drop").exists()

    # The provider's operator reseats the cable and clears the port in the admin.
    operator = StaffFactory(username="ops-li")
    client.force_login(operator)
    changelist = reverse("admin:incidents_incident_changelist")
    with time_machine.travel(NOW + timedelta(minutes=21), tick=False):
        asked = client.post(changelist, {"action": "clear_ports", "_selected_action": [flap.pk]})
        assert asked.status_code == 200 and b"set-healthy" in asked.content
        done = client.post(
            changelist,
            {"action": "clear_ports", "_selected_action": [flap.pk], "reason": "cable reseated"},
        )
    assert done.status_code == 302
    flap.refresh_from_db()
    assert (flap.state, flap.closed_at) == ("closed", NOW + timedelta(minutes=21))
    assert flap.detail.endswith("\nCleared by ops-li at 2026-11-10 02:21 UTC: cable reseated")
    assert (flap.closed_source, flap.closed_by) == ("manual", "ops-li")
    clearance = PortClearance.objects.get(node=node, port="mlx5_0:1")
    assert (clearance.by, clearance.batch.chain_index is not None) == ("ops-li", True)
    assert verify_lease(lease_id=lease.pk) == []
    # The next polls do not open it again: what came before the clearance is forgotten.
    poll_every_30_s(43, 45, ib_poll(True))
    assert Incident.objects.filter(lease=lease, pattern="link_flap", state="open").count() == 0

    period = str(Period.containing(NOW, "Asia/Shanghai"))
    with time_machine.travel(NOW + timedelta(minutes=30), tick=False):
        doc = audit.signed_bundle(lease=lease, period=period)
    [finding] = [f for f in doc["bundle"]["fabric_health"]["findings"] if f["rule"] == "link_flap"]
    assert finding["end"] == "2026-11-10T02:21:00.000000Z"
    assert audit.verify(doc, audit.published_key_info()) == []


def test_clearing_a_port_says_why_it_cannot(lease):
    node = lease.assignments.get().node
    with pytest.raises(ValueError, match="say why the port is cleared"):
        telemetry.clear_port(node=node, port="lo", by="ops", reason=" ", at=NOW)
    spare = NodeFactory(hostname="spare-01")
    with pytest.raises(ValueError, match="no active lease holds spare-01 at 2026-11-10 02:00 UTC"):
        telemetry.clear_port(node=spare, port="lo", by="ops", reason="reseated", at=NOW)
    assert not PortClearance.objects.exists()


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
        kept_open.reset()
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
