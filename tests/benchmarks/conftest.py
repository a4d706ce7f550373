"""Fixtures for transport and network-lab tests: one shared lab per test session.

Tests that need the lab (root, iproute2, sshd, iperf3) are skipped where those are missing,
but FAIL when CI=true: CI must not go green by skipping what it exists to prove.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.netlab import (
    LabHost,
    LabSpec,
    LabState,
    down,
    load_state,
    missing_prerequisites,
    up,
)
from benchmarks.netlab.network import destroy, list_namespaces
from benchmarks.netlab.shell import run as run_tool
from benchmarks.transports import SSHTarget, SSHTransport

IN_CI = os.environ.get("CI", "").lower() == "true"

_TEST_PREFIX = re.compile(r"^(g[tu])([0-9a-z]{1,6})-")


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if not number:
            return digits


def _subnets_in_use() -> set[int]:
    """Third octets of 198.19.X.0/24 networks already on interfaces of the root namespace."""
    used = set()
    for line in run_tool(["ip", "-4", "-o", "addr", "show"], check=False).splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].startswith("198.19."):
            used.add(int(fields[3].split(".")[2]))
    return used


def _reap_stale_test_labs() -> None:
    """Remove labs of test sessions that died without tearing down (their pid is gone)."""
    for namespace in list_namespaces():
        match = _TEST_PREFIX.match(namespace)
        if match and not Path(f"/proc/{int(match.group(2), 36)}").exists():
            destroy(match.group(1) + match.group(2), f"{match.group(1)}{match.group(2)}-mgmt")


def private_lab_spec(state_dir: Path, kind: str = "t", **overrides: object) -> LabSpec:
    """A LabSpec no other test session can collide with: prefix ``g<kind><pid in base 36>``
    and a management subnet 198.19.X.0/24 not in use (tests may run concurrently)."""
    prefix = f"g{kind}{_base36(os.getpid())}"
    used = _subnets_in_use()
    start = 100 + os.getpid() % 100
    octet = next(
        (o for o in [*range(start, 250), *range(100, start)] if o not in used),
        None,
    )
    assert octet is not None, "no free 198.19.X.0/24 management subnet for a test lab"
    return LabSpec(
        state_dir=state_dir,
        prefix=prefix,
        data_subnet=f"198.18.{octet}.0/24",
        mgmt_subnet=f"198.19.{octet}.0/24",
        **overrides,  # type: ignore[arg-type]
    )


KEEP = object()  # "use the host key currently recorded in the lab state"


def require_lab_prerequisites() -> None:
    missing = missing_prerequisites()
    if not missing:
        return
    reason = "netlab needs " + ", ".join(missing)
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class Lab:
    """The running session lab; ``state`` is re-read because tests rotate host keys."""

    state_dir: Path

    @property
    def state(self) -> LabState:
        state = load_state(self.state_dir)
        assert state is not None, "lab state vanished"
        return state

    def host(self, name: str) -> LabHost:
        return self.state.host(name)

    def target(self, name: str, *, host_key: object = KEEP, **overrides: object) -> SSHTarget:
        host = self.host(name)
        key = host.host_public_key if host_key is KEEP else host_key
        fields: dict[str, object] = {
            "host": host.mgmt_address,
            "port": host.ssh_port,
            "username": host.username,
            "host_key": key,
            "private_key_path": host.client_key_path,
            "connect_timeout_s": 5.0,
        }
        fields.update(overrides)
        return SSHTarget(**fields)  # type: ignore[arg-type]

    def transport(self, name: str, **kwargs: object) -> SSHTransport:
        return SSHTransport(self.target(name, **kwargs))


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_lab_prerequisites()
    _reap_stale_test_labs()
    state_dir = tmp_path_factory.mktemp("netlab") / "state"
    up(private_lab_spec(state_dir))
    try:
        yield Lab(state_dir)
    finally:
        down(state_dir)


# --- iperf3 over SSH ------------------------------------------------------------------------

IPERF_SECONDS = 3
IPERF_OMIT_SECONDS = 1  # TCP slow start is not counted
IPERF_STREAMS = 2
IPERF_BASE_PORT = 5201

_WAIT_LISTENING = (
    'i=0; while [ $i -lt 100 ]; do ss -Hltn "sport = :{port}" | grep -q . && exit 0; '
    "sleep 0.05; i=$((i+1)); done; exit 1"
)


@dataclass(frozen=True)
class Measured:
    """One iperf3 run: its figure (received bits/s over the run) and its fastest second.

    A stall of this shared 2-core machine drags a short run's mean below the link rate
    (CI saw 89-93 % of a 1 Gbit/s link whose every second carries 99 % when idle, while
    iperf3 itself uses 1-3 % CPU); no stall lifts the best second more than 1 % above what
    the link carries (the shaper's 10 ms bucket, netlab.network.SHAPER_BURST_MS, lets a late
    shaper catch up, no more). Tests judge a link's rate by the best second and hold the
    mean to a looser floor."""

    bps: float
    best_second_bps: float

    @classmethod
    def of(cls, report: dict) -> Measured:
        seconds = [i["sum"] for i in report["intervals"] if not i["sum"].get("omitted")]
        assert seconds, "iperf3 reported no measured interval"
        return cls(
            bps=float(report["end"]["sum_received"]["bits_per_second"]),
            best_second_bps=max(float(second["bits_per_second"]) for second in seconds),
        )


async def iperf_pairs(lab: Lab, pairs: list[tuple[str, str]]) -> list[Measured]:
    """iperf3 over the data network for several (client, server) pairs at the same time.

    Returns what each pair measured. To make the runs overlap as exactly as possible,
    connections are opened and all servers are listening before any client starts.
    """
    transports = {name: lab.transport(name) for pair in pairs for name in pair}
    ports = [IPERF_BASE_PORT + i for i in range(len(pairs))]
    addresses = [lab.host(server).data_address for _, server in pairs]
    try:
        await asyncio.gather(*(t.connect() for t in transports.values()))
        servers = await asyncio.gather(
            *(
                transports[server].start(f"iperf3 -s -1 -B {address} -p {port}", max_lifetime_s=60)
                for (_, server), address, port in zip(pairs, addresses, ports, strict=True)
            )
        )
        try:
            ready = await asyncio.gather(
                *(
                    transports[server].run(_WAIT_LISTENING.format(port=port), timeout_s=10)
                    for (_, server), port in zip(pairs, ports, strict=True)
                )
            )
            assert all(r.exit_code == 0 for r in ready), "an iperf3 server did not listen"
            results = await asyncio.gather(
                *(
                    transports[client].run(
                        f"iperf3 -c {address} -p {port} -t {IPERF_SECONDS} "
                        f"-O {IPERF_OMIT_SECONDS} -P {IPERF_STREAMS} -J",
                        timeout_s=IPERF_SECONDS + IPERF_OMIT_SECONDS + 20,
                    )
                    for (client, _), address, port in zip(pairs, addresses, ports, strict=True)
                )
            )
        finally:
            await asyncio.gather(*(server.stop() for server in servers))
    finally:
        await asyncio.gather(*(t.close() for t in transports.values()))
    rates = []
    for result in results:
        assert result.exit_code == 0, f"iperf3 failed: {result.stdout[-500:]} {result.stderr}"
        rates.append(Measured.of(json.loads(result.stdout)))
    return rates


@pytest.fixture
def lab_lease(lab, settings):  # type: ignore[no-untyped-def]
    """The session lab registered as lease LAB-1, probes of 3 s; the worker's kept-open
    connections closed afterwards."""
    from benchmarks.lab_registry import register_lab
    from benchmarks.transports import kept_open

    settings.PROBE_SSH_KEY = Path(lab.state.client_key_path)
    settings.PROBE_THROUGHPUT_SECONDS = 3
    settings.PROBE_COMMAND_GRACE_S = 20
    yield register_lab(lab.state)
    kept_open.reset()


def execute(lease, kind: str, target: str, pattern: str = "ring", trigger: str = "manual"):  # type: ignore[no-untyped-def]
    """Run one batch of a kind (the one with this target and pattern) in the foreground;
    the other batches asked for are dropped."""
    from benchmarks import execution, services, witness_settle
    from benchmarks.models import ProbeRun

    for batch in services.request_runs(lease=lease, kinds=[kind], enqueue=False, trigger=trigger):
        run = ProbeRun.objects.filter(batch=batch, target=target, pattern=pattern).first()
        if run is not None:
            execution.execute_batch(batch, max_attempts=1)
            witness_settle.settle_in_foreground(batch)
            run.refresh_from_db()
            return run
        ProbeRun.objects.filter(batch=batch).delete()
    raise AssertionError(f"no {kind} batch for {target}")
