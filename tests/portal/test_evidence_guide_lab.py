"""Following the measuring guide on a 2-port lease gets a pass: two network namespaces stand
for the lease's two nodes, joined port to port by two veth pairs carrying the ports' data
addresses (the benchmark range). The test copies each port block's iperf3 commands from the
page as a customer would, runs the server in one node and the client in the other through
a POSIX shell (so the quoting is the page's), and pastes the client's JSON into the form."""

import html
import json
import os
import re
import shutil
import subprocess
import time
from decimal import Decimal

import pytest

from accounts.choices import Role
from billing.models import Evidence
from gpulease_verify.verdicts import Verdict
from tests.factories import MembershipFactory, NicPortFactory, NodeFactory, make_lease
from tests.portal.support import active, client_for

pytestmark = pytest.mark.django_db

IN_CI = os.environ.get("CI", "").lower() == "true"


def _require_namespaces() -> None:
    missing = [tool for tool in ("ip", "iperf3") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root")
    if missing:
        reason = "the guide lab needs " + ", ".join(missing)
        if IN_CI:
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def two_nodes():
    """Namespaces <prefix>a and <prefix>b; port n of a is p<n>, joined to p<n> of b, with
    198.18.<o+n>.1 and .2 (o from the pid, so concurrent sessions do not collide)."""
    _require_namespaces()
    prefix = f"gg{os.getpid() % 100000}"
    octet = 150 + os.getpid() % 40
    spaces = (f"{prefix}a", f"{prefix}b")
    try:
        for space in spaces:
            _ip("netns", "add", space)
            _ip("-n", space, "link", "set", "lo", "up")
        for port in range(2):
            _ip("link", "add", f"{prefix}x{port}", "type", "veth", "peer", f"{prefix}y{port}")
            for side, space in (("x", spaces[0]), ("y", spaces[1])):
                _ip("link", "set", f"{prefix}{side}{port}", "netns", space, "name", f"p{port}")
            for host, space in ((1, spaces[0]), (2, spaces[1])):
                address = f"198.18.{octet + port}.{host}/24"
                _ip("-n", space, "addr", "add", address, "dev", f"p{port}")
                _ip("-n", space, "link", "set", f"p{port}", "up")
        yield spaces, octet
    finally:
        for space in spaces:
            subprocess.run(["ip", "netns", "del", space], capture_output=True)


def _wait_listening(space: str, port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        listening = subprocess.run(
            ["ip", "netns", "exec", space, "ss", "-Hltn", f"sport = :{port}"],
            capture_output=True,
            text=True,
        ).stdout
        if listening.strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"no iperf3 server listening on port {port} in {space}")


def _commands(block: str) -> tuple[str, str]:
    lines = block.splitlines()
    server = lines[lines.index(next(x for x in lines if x.startswith("# server, on"))) + 1]
    client = lines[lines.index(next(x for x in lines if x.startswith("# client, on"))) + 1]
    return server, client


def test_following_the_guide_on_a_two_port_lease_passes(two_nodes):
    (space_a, space_b), octet = two_nodes
    admin = MembershipFactory(role=Role.ADMIN)
    nodes = [NodeFactory(hostname="gd-lab-01"), NodeFactory(hostname="gd-lab-02")]
    for host, node in enumerate(nodes, start=1):
        for port in range(2):
            NicPortFactory(
                node=node,
                device=f"mlx5_{port + 2}",
                netdev=f"p{port}",
                address=f"198.18.{octet + port}.{host}",
                rate_gbps=1,
            )
    # Contracted 1 Gbit/s a port, passing at 95 %: 950 Mbit/s over an unshaped veth.
    lease = active(
        make_lease(
            tenant=admin.tenant,
            reference="GD-2026-902",
            nodes=nodes,
            contracted_bandwidth_gbps=Decimal("1"),
        )
    )
    client = client_for(admin.user)
    page = html.unescape(client.get(f"/leases/{lease.pk}/evidence/new/").content.decode())
    blocks = re.findall(r'<pre class="lease-iperf3">(.*?)</pre>', page, re.S)
    assert len(blocks) == 2, "one iperf3 block per port"
    pairs = [_commands(block) for block in blocks]
    # Both ports at once, as the guide's blocks are independent: the servers first.
    servers = [
        subprocess.Popen(["ip", "netns", "exec", space_b, "sh", "-c", server])
        for server, _client in pairs
    ]
    try:
        # As a person would: the client only once its server listens.
        for server, _client in pairs:
            _wait_listening(space_b, int(server.split(" -p ")[1].split()[0]))
        clients = [
            subprocess.Popen(
                ["ip", "netns", "exec", space_a, "sh", "-c", command],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _server, command in pairs
        ]
        outputs = [process.communicate(timeout=60)[0] for process in clients]
    finally:
        for server in servers:
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    for index, output in enumerate(outputs):
        response = client.post(
            f"/leases/{lease.pk}/evidence/new/",
            {"tool": "iperf3", "nodes": ["gd-lab-01", "gd-lab-02"], "raw_output": output},
        )
        errors = re.findall(r'class="errors"[^>]*>(.*?)</div>', response.content.decode(), re.S)
        assert response.status_code == 302, (errors, output[-1500:])
        evidence = Evidence.objects.latest("pk")
        assert evidence.verdict == Verdict.PASS, (index, evidence.verdict_reason)
        assert evidence.measured_bps >= 950_000_000
        # The client bound to this port's address and reached the other node's.
        connected = json.loads(output)["start"]["connected"][0]
        assert connected["local_host"] == f"198.18.{octet + index}.1"
        assert connected["remote_host"] == f"198.18.{octet + index}.2"
    assert Evidence.objects.filter(lease=lease, verdict=Verdict.PASS).count() == 2
