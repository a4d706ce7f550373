"""Passive telemetry (issue 14): the worker's CPU per node poll, stored bytes per node-day,
and the ingest rate.

Part 1, at fleet scale without hosts: 2,000 nodes in 250 leases, each with one 200 Gb/s
RoCE port (the ib, net and ethtool sections of a real poll: the RoCE port of leptonai/gpud's
H100 sysfs test tree, this machine's veth statistics and a ConnectX-4 Lx ``ethtool -S``),
answered by a transport that prints that text with its byte counters moved on, so every
cycle parses, computes deltas, stores samples and judges. Ten cycles 30 s apart on a pinned
clock; CPU is this process's user + system time (the database's own work is not in it).

Part 2, with real hosts (root only): the network lab's 4 hosts polled over kept-open SSH
connections, ten cycles, CPU per node poll including the SSH client's work.

Target (issue 14): under 50 ms of worker CPU per node poll. 10,000 nodes every 30 s is 333
polls a second."""

import json
import os
import tempfile
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from perf.harness import captured_queries, flush, save, setup_django

NODES = 2000
NODES_PER_LEASE = 8
CYCLES = 21  # ten and a half minutes of 30 s polls: two quiet rows per port
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "verifier" / "fixtures" / "telemetry"


def _poll_text() -> str:
    ib = (FIXTURES / "sysfs_roce_mlx5_bond_0_h100_gpud.txt").read_text()
    ib = ib.replace("mlx5_bond_0", "mlx5_0")
    net = (FIXTURES / "veth_up_capture.txt").read_text().split("### net gl0\n", 1)[1]
    net = net.replace("/gl0/", "/ens1f0/")
    ethtool = (FIXTURES / "ethtool_S_mlx5_cx4lx_prefix_ethq8.txt").read_text()
    return (
        "### boot_id\n{boot}\n### clock\n{uptime} 1000.00\n"
        f"### ib mlx5_0:1\n{ib}### net ens1f0\n{net}### ethtool ens1f0\n{ethtool}"
    )


class FleetTransport:
    """A node that answers the telemetry command with a real poll's text, its byte and
    packet counters moved on by a few GB each call."""

    TEMPLATE = _poll_text()

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.boot = str(uuid.uuid5(uuid.NAMESPACE_DNS, hostname))
        self.calls = 0

    @property
    def label(self) -> str:
        return self.hostname

    async def run(self, command: str, *, timeout_s: float, max_output_bytes: int = 0):  # type: ignore[no-untyped-def]
        from benchmarks.transports import CommandResult

        self.calls += 1
        text = self.TEMPLATE.format(boot=self.boot, uptime=1000 + 30 * self.calls)
        moved = []
        for line in text.splitlines():
            if any(key in line for key in ("_bytes:", "_data:", "_packets:")):
                head, _, value = line.rpartition(":")
                line = f"{head}:{int(value.strip()) + self.calls * 3_000_000_000}"
            moved.append(line)
        return CommandResult(command, 0, "\n".join(moved) + "\n", "", 0.01, False)

    async def close(self) -> None:
        return None


def build() -> None:
    from django.utils import timezone

    from leases.choices import BillingMode, LeaseStatus, LinkLayer, SwitchRole, Technology
    from leases.models import (
        Fabric,
        Lease,
        LeaseTerms,
        NicPort,
        Node,
        NodeAssignment,
        Site,
        Switch,
        Tenant,
    )

    start = timezone.now() - timedelta(days=1)
    tenant = Tenant.objects.create(name="bench", slug="bench")
    site = Site.objects.create(name="bench site", code="bench", city="Shenzhen")
    fabric = Fabric.objects.create(
        site=site,
        name="bench",
        technology=Technology.ROCE,
        port_speed_gbps=200,
        topology="leaf_spine",
        oversubscription=Decimal(1),
    )
    leaves = Switch.objects.bulk_create(
        [
            Switch(fabric=fabric, name=f"leaf{i}", role=SwitchRole.LEAF)
            for i in range(-(-NODES // 32))
        ]
    )
    nodes = Node.objects.bulk_create(
        [
            Node(
                hostname=f"t{i:05d}",
                management_address=f"t{i:05d}",
                gpu_model="H100",
                leaf_switch=leaves[i // 32],
            )
            for i in range(NODES)
        ],
        batch_size=2000,
    )
    NicPort.objects.bulk_create(
        [
            NicPort(
                node=node,
                device="mlx5_0",
                port_number=1,
                netdev="ens1f0",
                rate_gbps=200,
                link_layer=LinkLayer.ETHERNET,
            )
            for node in nodes
        ],
        batch_size=2000,
    )
    leases = Lease.objects.bulk_create(
        [
            Lease(tenant=tenant, reference=f"T-{i:04d}", starts_at=start, status=LeaseStatus.ACTIVE)
            for i in range(NODES // NODES_PER_LEASE)
        ]
    )
    LeaseTerms.objects.bulk_create(
        [
            LeaseTerms(
                lease=lease,
                version=1,
                effective_from=start,
                contracted_bandwidth_gbps=Decimal(200),
                technology=Technology.ROCE,
                billing_mode=BillingMode.MONTHLY,
                telemetry_interval_s=30,
            )
            for lease in leases
        ]
    )
    NodeAssignment.objects.bulk_create(
        [
            NodeAssignment(lease=lease, node=nodes[i * NODES_PER_LEASE + j], assigned_from=start)
            for i, lease in enumerate(leases)
            for j in range(NODES_PER_LEASE)
        ],
        batch_size=5000,
    )


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def fleet(results: dict) -> None:
    from django.db import connection
    from django.utils import timezone

    from telemetry import poller, services
    from telemetry.models import PortSample

    build()
    transports: dict[str, FleetTransport] = {}

    def connect(node):  # type: ignore[no-untyped-def]
        return transports.setdefault(node.hostname, FleetTransport(node.hostname))

    now = timezone.now()
    walls, cpus, queries = [], [], []
    for cycle in range(CYCLES):
        cpu, wall = _cpu(), time.perf_counter()
        result, captured = captured_queries(
            lambda cycle=cycle: services.poll(
                now=now + timedelta(seconds=30 * cycle), connect=connect
            )
        )
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
        queries.append(len(captured))
        assert result.nodes == NODES and not result.failed, result.failed[:3]
    poller.reset()
    samples = PortSample.objects.count()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE telemetry_portsample")
        cursor.execute("SELECT pg_total_relation_size('telemetry_portsample')")
        stored = cursor.fetchone()[0]
    # What a lease's telemetry adds to its audit bundle: its batches as the bundle writes
    # them, per batch (a quiet lease stores one every TELEMETRY_QUIET_ROW_S).
    from billing.audit.telemetry_docs import telemetry_doc
    from leases.models import Lease

    lease = Lease.objects.order_by("pk").first()
    entries = telemetry_doc(lease, now - timedelta(days=1), now + timedelta(days=1), None, None)
    bundle_bytes = len(json.dumps(entries, separators=(",", ":")))
    steady_cpu = sorted(cpus[1:])[len(cpus[1:]) // 2]
    steady_wall = sorted(walls[1:])[len(walls[1:]) // 2]
    rows_per_node_day = samples / NODES * 86400 / (30 * CYCLES)
    results.update(
        {
            "fleet_nodes": NODES,
            "fleet_cycles": CYCLES,
            "fleet_cycle_wall_s": [round(w, 3) for w in walls],
            "fleet_cycle_queries": queries,
            "fleet_cpu_ms_per_node_poll": round(steady_cpu * 1000 / NODES, 2),
            "fleet_wall_ms_per_node_poll": round(steady_wall * 1000 / NODES, 2),
            "fleet_node_polls_per_s": round(NODES / steady_wall),
            "port_sample_rows": samples,
            "rows_per_node_day": round(rows_per_node_day),
            "stored_bytes_per_row": round(stored / samples, 1),
            "stored_bytes_per_node_day": round(stored / samples * rows_per_node_day),
            "bundle_batches_of_one_lease": len(entries),
            "bundle_bytes_per_batch_8_nodes": round(bundle_bytes / max(1, len(entries))),
        }
    )


def lab(results: dict) -> None:
    from django.conf import settings
    from django.utils import timezone

    from benchmarks import netlab
    from benchmarks.lab_registry import register_lab
    from telemetry import poller, services

    flush()
    with tempfile.TemporaryDirectory() as state_dir:
        state = netlab.up(
            netlab.LabSpec(
                state_dir=Path(state_dir),
                prefix="gtele",
                data_subnet="198.18.251.0/24",
                mgmt_subnet="198.19.251.0/24",
            )
        )
        try:
            settings.PROBE_SSH_KEY = Path(state.client_key_path)
            register_lab(state)
            now = timezone.now()
            cpus, walls = [], []
            for cycle in range(CYCLES):
                cpu, wall = _cpu(), time.perf_counter()
                result = services.poll(now=now + timedelta(seconds=30 * cycle))
                walls.append(time.perf_counter() - wall)
                cpus.append(_cpu() - cpu)
                assert result.nodes == len(state.hosts) and not result.failed, result
            poller.reset()
        finally:
            netlab.down(state_dir)
    hosts = len(state.hosts)
    results.update(
        {
            "lab_hosts": hosts,
            "lab_first_cycle_cpu_ms_per_node": round(cpus[0] * 1000 / hosts, 1),
            "lab_cpu_ms_per_node_poll": round(
                sorted(cpus[1:])[len(cpus[1:]) // 2] * 1000 / hosts, 1
            ),
            "lab_cycle_wall_ms": [round(w * 1000) for w in walls],
        }
    )


def main() -> dict:
    setup_django()
    flush()
    results: dict = {}
    fleet(results)
    if os.geteuid() == 0:
        lab(results)
    save("telemetry", results)
    return results


if __name__ == "__main__":
    main()
