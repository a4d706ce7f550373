"""The lease page's link state timeline, NCCL bus bandwidth history and chart windows:
hand-checked figures from a few runs. (The render time with a year of 5-minute history is
measured by perf/bench_portal.py, not here.)"""

import re
from datetime import timedelta
from decimal import Decimal
from html import unescape

import pytest

from accounts.choices import Role
from billing.ingest import ingest_all
from leases import services
from leases.choices import LeaseStatus, LinkLayer
from portal import selectors
from tests.factories import MembershipFactory, NicPortFactory, NodeFactory, at, make_lease, make_run
from tests.portal.support import NOW, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def member():
    return MembershipFactory(role=Role.VIEWER)


@pytest.fixture
def nodes():
    first, second = NodeFactory(hostname="sz-01"), NodeFactory(hostname="sz-02")
    NicPortFactory(node=first, device="mlx5_0", port_number=1, link_layer=LinkLayer.INFINIBAND)
    NicPortFactory(node=first, device="mlx5_1", netdev="ens2f0", link_layer=LinkLayer.ETHERNET)
    NicPortFactory(node=second, device="mlx5_0", port_number=1, link_layer=LinkLayer.INFINIBAND)
    return [first, second]


@pytest.fixture
def lease(member, nodes):
    lease = make_lease(
        tenant=member.tenant,
        reference="ZY-2026-401",
        nodes=nodes,
        collective_busbw_floor_gbps=Decimal("160"),
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))


def ports(**up):
    return {"ports": [{"label": label, "up": state} for label, state in up.items()]}


def link_runs(lease):
    """Six hours of checks twice an hour on both nodes; at 02:30 sz-01's mlx5_0:1 is down."""
    start = at("2026-11-19 00:00")
    for index in range(12):
        slot = start + timedelta(minutes=30 * index)
        down = slot == at("2026-11-19 02:30")
        make_run(
            lease,
            kind="link",
            target="sz-01",
            pattern="node",
            slot=slot,
            verdict="fail" if down else "pass",
            parsed={
                "ports": [{"label": "mlx5_0:1", "up": not down}, {"label": "ens2f0", "up": True}]
            },
        )
        make_run(lease, kind="link", target="sz-02", pattern="node", slot=slot, verdict="pass")
    # A check that could not reach the node says nothing about its links.
    make_run(
        lease,
        kind="link",
        target="sz-02",
        pattern="node",
        slot=at("2026-11-19 07:00"),
        state="unreachable",
    )
    ingest_all(notify=False)  # the hourly rollups say which hours the checks spoke


def test_link_timeline_states_per_node_and_port_per_hour(member, lease):
    link_runs(lease)
    nodes = selectors.link_timeline(user=member.user, lease=lease, instant=NOW)
    assert [node.hostname for node in nodes] == ["sz-01", "sz-02"]
    first, second = nodes
    hours = [at("2026-11-19 00:00") + timedelta(hours=h) for h in range(6)]
    down = at("2026-11-19 02:00")
    assert first.hours == [(hour, 0, 1) if hour == down else (hour, 1, 0) for hour in hours]
    assert sorted(first.ports) == ["ens2f0", "mlx5_0:1"]
    assert (down, 0, 1) in first.ports["mlx5_0:1"].hours  # the 02:30 check found it down
    assert (down, 1, 0) in first.ports["ens2f0"].hours  # the same check found this one up
    # The unreachable check at 07:00 measured nothing: no hour for it.
    assert second.hours == [(hour, 1, 0) for hour in hours]
    assert list(second.ports) == ["mlx5_0:1"]  # from the inventory
    # Another tenant sees none of it.
    assert selectors.link_timeline(user=MembershipFactory().user, lease=lease, instant=NOW) == []


def test_a_node_whose_checks_measured_nothing_has_no_state_that_hour(member, lease):
    slot = at("2026-11-19 09:00")
    make_run(lease, kind="link", target="sz-01", pattern="node", slot=slot, verdict="pass")
    make_run(lease, kind="link", target="sz-02", pattern="node", slot=slot, state="unreachable")
    ingest_all(notify=False)
    first, second = selectors.link_timeline(user=member.user, lease=lease, instant=NOW)
    assert first.hours == [(slot, 1, 0)] and second.hours == []


def test_lease_page_shows_the_link_timeline_and_hours_down(member, lease):
    link_runs(lease)
    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    timeline = re.search(r'<svg[^>]*class="timeline".*?</svg>', page, re.S).group(0)
    # 5 rows (2 nodes, 3 ports); the 4-hour slice with 02:30 is down for sz-01 and mlx5_0:1.
    assert timeline.count('<rect class="down"') == 2
    assert "sz-01: link check failed, port down" in timeline
    assert "mlx5_0:1: link check failed, port down, 11-19 00:00 to 11-19 04:00" in timeline
    rows = re.findall(
        r"<tr(?: class=\"port\")?><td>(?:&nbsp;&nbsp;)?([\w:.-]+)</td>\s*"
        r'<td class="num">(\d+) h</td>\s*<td class="num">(\d+) h</td>',
        page,
    )
    assert rows == [
        ("sz-01", "1", "6"),
        ("ens2f0", "0", "6"),
        ("mlx5_0:1", "1", "6"),
        ("sz-02", "0", "6"),
        ("mlx5_0:1", "0", "6"),
    ]


def test_lease_page_shows_nccl_bus_bandwidth_against_the_contracted_floor(member, lease):
    for hour, gbps in enumerate((180, 150, 175)):
        make_run(
            lease,
            kind="collective",
            tool="all_reduce_perf",
            target="all",
            pattern="all_nodes",
            slot=at("2026-11-18 00:00") + timedelta(hours=hour),
            verdict="pass" if gbps >= 160 else "fail",
            measured_bps=gbps * 10**9,
        )
    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    assert "Contracted bus bandwidth floor: 160 Gbit/s" in page
    nccl = re.search(r"<svg[^>]*NCCL all_reduce bus bandwidth.*?</svg>", page, re.S).group(0)
    assert "contracted floor 160 Gbit/s" in nccl
    assert len(re.search(r'<polyline[^>]* points="([^"]*)"', nccl).group(1).split()) == 3
    assert "No NCCL bus bandwidth measured" not in page


def test_without_a_floor_or_runs_the_page_says_so(member, nodes):
    lease = make_lease(tenant=member.tenant, reference="ZY-2026-402")
    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    assert "The contract sets no bus bandwidth floor." in page
    assert "No NCCL bus bandwidth measured in the last 30 days." in page
    assert "No link check in the last 30 days." in page


# --- long windows ----------------------------------------------------------------------


def test_a_long_window_shows_each_days_extremes_of_all_pairs(member, lease):
    """?days=90 and beyond: one point per day (in the tenant's zone) at the lowest and
    highest figure of any node pair, read from the hourly rollups, so a dip survives; an
    unknown window falls back to 30 days, per node pair."""
    for hour, gbps, target in ((0, 98, "n1>n2"), (5, 40, "n2>n1"), (23, 99, "n1>n2")):
        make_run(
            lease,
            slot=at("2026-11-05 00:00") + timedelta(hours=hour),
            measured_bps=gbps * 10**9,
            target=target,
        )
    make_run(lease, slot=at("2026-11-19 00:00"), measured_bps=97 * 10**9)
    ingest_all(notify=False)
    series = selectors.throughput_series(user=member.user, lease=lease, instant=NOW, days=90)
    assert series == {
        "all node pairs": [
            (at("2026-11-05 00:00"), 40 * 10**9),
            (at("2026-11-05 00:00"), 99 * 10**9),
            (at("2026-11-19 00:00"), 97 * 10**9),
        ]
    }
    month = selectors.throughput_series(user=member.user, lease=lease, instant=NOW)
    assert sorted(month) == ["n1>n2", "n2>n1"]
    assert month["n2>n1"] == [(at("2026-11-05 05:00"), 40 * 10**9)]
    client = client_for(member.user)
    year = client.get(f"/leases/{lease.pk}/?days=365").content.decode()
    assert "last 365 days" in year and "<strong>365 days</strong>" in year
    assert "all node pairs" in year
    fallback = client.get(f"/leases/{lease.pk}/?days=999").content.decode()
    assert "Measured throughput per node pair, last 30 days" in fallback
    assert "n2&gt;n1" in fallback


def test_the_compact_timeline_row_buckets_as_the_hour_by_hour_one():
    """charts.hour_states (shared checked hours plus a row's exceptions) gives the states
    bucket_states gives from the same row spelled out hour by hour."""
    import random

    from portal import charts
    from portal.selectors import HourStates

    generator = random.Random(7)
    start = 1_700_000_000 // 3600 * 3600
    checked = sorted(start + 3600 * h for h in generator.sample(range(24 * 40), 700))
    down = frozenset(generator.sample(checked, 30)) | {start - 3600}  # one outside
    silent = frozenset(generator.sample(checked, 40)) - down
    row = HourStates(checked, frozenset(checked), down, silent)
    x0, x1 = start + 1800, start + 3600 * 24 * 30
    for buckets in (1, 7, 180, 720):
        spelled = [(at.timestamp(), up, dn) for at, up, dn in row.hours]
        base = charts.hour_counts(checked, x0, x1, buckets)
        assert charts.hour_states(
            base, row.checked_set, down, silent, start=x0, end=x1, buckets=buckets
        ) == charts.bucket_states(spelled, start=x0, end=x1, buckets=buckets)
    assert row.down_hours == 30 and row.judged_hours == 700 - len(silent)


def test_the_link_chart_has_its_csv_and_the_incidents_bands(member, lease):
    """The link chart as the throughput chart: its data as CSV over the page's range, and
    the lease's incidents shaded on it. ?from=2026-11-19&to=2026-11-19 is that day in
    Shanghai, 2026-11-18 16:00 to 2026-11-19 16:00 UTC; the checks (link_runs) spoke in the
    six hours from 16:00 UTC, and sz-01 and its mlx5_0:1 were down in the third (18:00 UTC,
    02:00 in Shanghai)."""
    from incidents.choices import IncidentState
    from incidents.models import Incident
    from leases.choices import ProbeKind

    link_runs(lease)
    Incident.objects.create(
        lease=lease,
        terms=lease.terms.get(),
        kind=ProbeKind.LINK,
        target="sz-01",
        pattern="node",
        state=IncidentState.CLOSED,
        opened_at=at("2026-11-19 02:30"),
        closed_at=at("2026-11-19 03:30"),
    )
    client = client_for(member.user)
    query = "from=2026-11-19&to=2026-11-19"
    response = client.get(f"/leases/{lease.pk}/charts/links.csv?{query}")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = [line.split(",") for line in response.content.decode().splitlines()]
    unit = "1 up / 0 down"
    hours = [f"2026-11-18T{hour}:00:00Z" for hour in (16, 17, 18, 19, 20, 21)]

    def series(label: str, down: int | None = None) -> list[list[str]]:
        return [
            [hour, label, "0" if index == down else "1", unit] for index, hour in enumerate(hours)
        ]

    assert rows == [
        ["time", "series", "value", "unit"],
        *series("sz-01", down=2),
        *series("sz-01 ens2f0"),
        *series("sz-01 mlx5_0:1", down=2),
        *series("sz-02"),
        *series("sz-02 mlx5_0:1"),
    ]
    page = client.get(f"/leases/{lease.pk}/?{query}").content.decode()
    timeline = re.search(r'<svg[^>]*class="timeline".*?</svg>', page, re.S).group(0)
    # 02:30 to 03:30 of a 24-hour range 550 px wide from x = 150: 150 + 550 x 2.5 / 24 =
    # 207.3, 550 / 24 = 22.9 wide; a marker above the rows and a shade over them.
    mark = re.findall(r'<rect class="incident-mark" x="([\d.]+)" y="1" width="([\d.]+)"', timeline)
    shade = re.findall(
        r'<rect class="incident-band" x="([\d.]+)" y="10" width="([\d.]+)" height="80" '
        r'fill="#c62828" fill-opacity="0.12" pointer-events="none">',
        timeline,
    )
    assert mark == shade == [("207.3", "22.9")]  # 5 rows of 16 px: 80 high
    assert "<title>incident: link check, sz-01</title>" in timeline
    csv_links = [
        unescape(one) for one in re.findall(r'<p class="no-print chart-csv">(.*?)</p>', page, re.S)
    ]
    assert any(
        f'href="/leases/{lease.pk}/charts/links.csv?{query}"' in one
        and "1 incident shaded on the chart" in one
        for one in csv_links
    ), csv_links
    # Another tenant's lease: the same 404 as the other charts' CSV.
    stranger = client_for(MembershipFactory().user)
    assert stranger.get(f"/leases/{lease.pk}/charts/links.csv").status_code == 404
