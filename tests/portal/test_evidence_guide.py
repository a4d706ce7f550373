"""The measuring guide beside the evidence form: multi-node nccl-tests under mpirun,
ib_write_bw on RoCE, parallel iperf3 for 100G and up, and the figure each tier passes at
(95 % of contracted, the default SLA threshold: DOMAIN.md). Its lease-specific commands are
the probes' own, built from the lease's nodes and NIC ports: a lease whose RDMA devices are
not named mlx5_0 is told its own devices (the generic mlx5_0 made such a lease's customer
measure a device that did not exist, a false fail)."""

import html

import pytest

from accounts.choices import Role
from tests.factories import MembershipFactory, NicPortFactory, NodeFactory, make_lease
from tests.portal.support import active, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin():
    return MembershipFactory(role=Role.ADMIN)


@pytest.fixture
def lease(admin):
    nodes = [
        NodeFactory(hostname="gz-h800-01", gpu_count=8),
        NodeFactory(hostname="gz-h800-02", gpu_count=8),
    ]
    # Two RoCE ports a node, on devices that are not mlx5_0 (as a bonded or renumbered
    # server names them), each port with its own data address.
    for index, node in enumerate(nodes, start=1):
        for port, (device, netdev) in enumerate((("mlx5_4", "ens4np0"), ("mlx5_5", "ens5np0"))):
            NicPortFactory(
                node=node,
                device=device,
                netdev=netdev,
                address=f"198.18.{20 + port}.{index}",
                rate_gbps=100,
            )
    return active(make_lease(tenant=admin.tenant, reference="ZY-2026-801", nodes=nodes))


def guide(user, lease, language="en") -> str:  # type: ignore[no-untyped-def]
    page = client_for(user, language).get(f"/leases/{lease.pk}/evidence/new/").content.decode()
    return html.unescape(page[page.index('<aside class="guide"') : page.index("</aside>")])


def test_nccl_tests_run_across_nodes_under_mpirun(admin, lease):
    text = guide(admin.user, lease)
    assert "mpirun -np 16 -H node1:8,node2:8" in text
    assert "all_reduce_perf -b 8 -e 8G -f 2 -g 1" in text
    assert "-g 8" not in text  # one process per GPU, not 8 GPUs in one process on one node
    # Filled in for this lease: 2 nodes of 8 GPUs, 16 ranks, its own devices and the
    # interface of the first node's data address.
    assert (
        "mpirun -np 16 -H gz-h800-01:8,gz-h800-02:8 \\\n"
        "  -x NCCL_IB_HCA=mlx5_4,mlx5_5 -x NCCL_SOCKET_IFNAME=ens4np0 -x NCCL_DEBUG=INFO \\\n"
        "  all_reduce_perf -b 8 -e 8G -f 2 -g 1"
    ) in text
    # No device the lease does not have.
    assert "-d mlx5_0" not in text and "NCCL_IB_HCA=mlx5_0" not in text
    assert "NET/Socket means NCCL fell back to TCP" in text


def test_ib_write_bw_server_and_client_with_gid_index_in_gbit(admin, lease):
    text = guide(admin.user, lease)
    assert "ib_write_bw -d <device> -x 3 --report_gbits\n" in text  # server
    assert "ib_write_bw -d <device> -x 3 --report_gbits <server>" in text  # client


def test_one_block_per_port_with_the_probes_own_commands(admin, lease):
    text = guide(admin.user, lease)
    # Port 1 of the lease: mlx5_4 of gz-h800-01 against mlx5_4 of gz-h800-02, iperf3 between
    # the two ports' data addresses (100 Gbit/s: 5 streams of about 20), ib_write_bw on it.
    first = text[text.index('id="guide-port-1"') : text.index('id="guide-port-2"')]
    assert "Port mlx5_4/1 (ens4np0), 100 Gbit/s: gz-h800-01 to gz-h800-02" in first
    assert "server, on gz-h800-02\niperf3 -s -1 -p 5201 -B 198.18.20.2" in first
    assert "iperf3 -c 198.18.20.2 -p 5201 -B 198.18.20.1 -J -t 10 -O 1 -P 5" in first
    assert "ib_write_bw -d mlx5_4 -i 1 -p 18515 --report_gbits -D 10\n" in first
    assert "ib_write_bw -d mlx5_4 -i 1 -p 18515 --report_gbits -D 10 198.18.20.2" in first
    second = text[text.index('id="guide-port-2"') :]
    assert "iperf3 -c 198.18.21.2 -p 5202 -B 198.18.21.1 -J -t 10 -O 1 -P 5" in second
    assert "ib_write_bw -d mlx5_5 -i 1 -p 18516 --report_gbits -D 10 198.18.21.2" in second
    # The link check gpulease runs, per node, naming its own interfaces.
    assert "ethtool ens4np0 2>&1" in text and "ethtool ens5np0 2>&1" in text


def test_a_port_without_a_data_address_says_so_instead_of_a_command(admin, lease):
    from leases.models import NicPort

    NicPort.objects.filter(node__hostname="gz-h800-02", device="mlx5_5").update(address=None)
    text = guide(admin.user, lease)
    second = text[text.index('id="guide-port-2"') :]
    assert "iperf3 -c" not in second and "ib_write_bw -d mlx5_5" not in second
    assert (
        "No iperf3 command: this port of gz-h800-02 has no data address in the inventory."
    ) in second
    chinese = guide(admin.user, lease, language="zh-hans")
    assert "gz-h800-02 的这个端口在资产清单中没有数据地址" in chinese


def test_parallel_iperf3_processes_for_100g_and_up(admin, lease):
    text = guide(admin.user, lease)
    assert "for i in $(seq 0 7); do iperf3 -s -D -p $((5201 + i)) -A $i; done" in text
    assert "iperf3 -c <server> -p $((5201 + i)) -A $i -P 4 -t 30 -J > iperf3-$i.json &" in text
    assert "jq -s 'map(.end.sum_received.bits_per_second) | add / 1e9' iperf3-*.json" in text
    assert "iperf3 -c <peer> -P 8" not in text  # the old single process


def test_the_figure_each_tier_and_this_lease_passes_at(admin, lease):
    text = guide(admin.user, lease)
    # 95 % of 25, 100, 200 and 400 Gbit/s.
    rows = [
        ("25 Gbit/s", "23.75 Gbit/s"),
        ("100 Gbit/s", "95 Gbit/s"),
        ("200 Gbit/s", "190 Gbit/s"),
        ("400 Gbit/s", "380 Gbit/s"),
    ]
    for contracted, passes in rows:
        assert f'<tr><td class="num">{contracted}</td><td class="num">{passes}</td></tr>' in text
    assert "Passes at (95 %)" in text
    assert (
        "This lease is contracted at 100 Gbit/s; a measurement passes at 95 % of it, "
        "95 Gbit/s or more." in text
    )
    assert "under 360 Gbit/s" in text


def test_viewers_read_the_same_guide(admin, lease):
    viewer = MembershipFactory(tenant=admin.tenant, role=Role.VIEWER)
    response = client_for(viewer.user).get(f"/leases/{lease.pk}/evidence/new/")
    assert response.status_code == 403
    assert "mpirun -np 16 -H gz-h800-01:8,gz-h800-02:8" in response.content.decode()


def test_the_guide_renders_in_chinese(admin, lease):
    text = guide(admin.user, lease, language="zh-hans")
    assert "all_reduce_perf -b 8 -e 8G -f 2 -g 1" in text
