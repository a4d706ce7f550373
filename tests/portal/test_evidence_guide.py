"""The measuring guide beside the evidence form: multi-node nccl-tests under mpirun,
ib_write_bw on RoCE, parallel iperf3 for 100G and up, and the figure each tier passes at
(95 % of contracted, the default SLA threshold: DOMAIN.md)."""

import html

import pytest

from leases.choices import Role
from tests.factories import MembershipFactory, NodeFactory, make_lease
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
    return active(make_lease(tenant=admin.tenant, reference="ZY-2026-801", nodes=nodes))


def guide(user, lease, language="en") -> str:  # type: ignore[no-untyped-def]
    page = client_for(user, language).get(f"/leases/{lease.pk}/evidence/new/").content.decode()
    return html.unescape(page[page.index('<aside class="guide"') : page.index("</aside>")])


def test_nccl_tests_run_across_nodes_under_mpirun(admin, lease):
    text = guide(admin.user, lease)
    assert "mpirun -np 16 -H node1:8,node2:8" in text
    assert "-x NCCL_IB_HCA=mlx5_0,mlx5_1 -x NCCL_SOCKET_IFNAME=eth0" in text
    assert "all_reduce_perf -b 8 -e 8G -f 2 -g 1" in text
    assert "-g 8" not in text  # one process per GPU, not 8 GPUs in one process on one node
    # Filled in for this lease: 2 nodes of 8 GPUs, 16 ranks.
    assert "mpirun -np 16 -H gz-h800-01:8,gz-h800-02:8" in text
    assert "NET/Socket means NCCL fell back to TCP" in text


def test_ib_write_bw_server_and_client_with_gid_index_in_gbit(admin, lease):
    text = guide(admin.user, lease)
    assert "ib_write_bw -d mlx5_0 -x 3 --report_gbits\n" in text  # server
    assert "ib_write_bw -d mlx5_0 -x 3 --report_gbits <server>" in text  # client


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
