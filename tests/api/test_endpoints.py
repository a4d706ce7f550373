"""What the endpoints answer: leases created and driven through the services, probe runs
filtered and paged by cursor, raw output downloaded with its hash, run-now, SLA reports,
invoices with lines; and the number of queries each list costs, pinned."""

import hashlib
from datetime import timedelta

import pytest

from accounts.choices import Role
from benchmarks.models import ProbeRun
from leases.models import LeaseEvent
from tests.factories import NicPortFactory, NodeFactory, at, make_run, make_sweep

pytestmark = pytest.mark.django_db


def test_provider_creates_a_lease_with_terms_and_nodes_then_activates_it(world, client_for):
    staff = client_for(world.staff)
    nodes = [NodeFactory(), NodeFactory()]
    for node in nodes:
        NicPortFactory(node=node)
    body = {
        "tenant": "alpha",
        "reference": "ALPHA-2",
        "name": "training cluster",
        "starts_at": "2027-01-01T00:00:00+08:00",
        "ends_at": "2028-01-01T00:00:00+08:00",
        "nodes": [node.pk for node in nodes],
        "terms": {
            "contracted_bandwidth_gbps": "200",
            "technology": "roce",
            "billing_mode": "monthly",
            "node_rent_per_month": "45000.00",
            "network_fee_per_month": "6000.00",
            "probe_cadence_s": {"link": 300, "throughput": 3600},
            "maintenance_windows": [{"weekday": 6, "start": "02:00", "end": "04:00"}],
            "credit_tiers": [{"below_percent": "99", "credit_percent": "10"}],
        },
    }
    response = staff.post("/api/v1/leases/", body, format="json")
    assert response.status_code == 201, response.json()
    lease = response.json()
    assert lease["status"] == "draft" and lease["tenant"] == "alpha"
    assert [terms["version"] for terms in lease["terms"]] == [1]
    assert lease["terms"][0]["contracted_bandwidth_gbps"] == "200.00"
    assert lease["terms"][0]["maintenance_windows"][0]["weekday"] == 6
    assert sorted(a["node"] for a in lease["assignments"]) == sorted(n.pk for n in nodes)
    actions = list(LeaseEvent.objects.filter(lease_id=lease["id"]).values_list("action", "actor"))
    assert ("created", world.staff.pk) in actions
    activated = staff.post(f"/api/v1/leases/{lease['id']}/activate/")
    assert activated.status_code == 200 and activated.json()["status"] == "active"
    # The tenant sees it, with its terms and nodes.
    viewer = client_for(world.alpha.members[Role.VIEWER])
    detail = viewer.get(f"/api/v1/leases/{lease['id']}/").json()
    assert detail["reference"] == "ALPHA-2" and len(detail["assignments"]) == 2


def test_a_failed_node_assignment_leaves_no_lease_behind(world, client_for):
    staff = client_for(world.staff)
    body = {
        "tenant": "alpha",
        "reference": "ALPHA-3",
        "starts_at": "2026-11-10T00:00:00+08:00",
        "nodes": [world.beta.nodes[0].pk],  # beta holds it from 2026-11-01 on
        "terms": {
            "contracted_bandwidth_gbps": "100",
            "technology": "roce",
            "billing_mode": "monthly",
        },
    }
    assert staff.post("/api/v1/leases/", body, format="json").status_code == 400
    assert not staff.get("/api/v1/leases/", {"reference": "ALPHA-3"}).json()["results"]


def test_lease_lifecycle_actions(world, client_for):
    staff = client_for(world.staff)
    url = f"/api/v1/leases/{world.alpha.lease.pk}"
    assert staff.post(f"{url}/cancel/").status_code == 400
    ended = staff.post(f"{url}/end/")
    assert ended.status_code == 200 and ended.json()["status"] == "ended"
    assert ended.json()["ends_at"] is not None


def test_run_now_queues_the_leases_probes(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])
    response = admin.post(
        f"/api/v1/leases/{world.alpha.lease.pk}/run-now/", {"kinds": ["link"]}, format="json"
    )
    assert response.status_code == 202
    body = response.json()
    # One sweep of the lease's two nodes.
    assert body["lease"] == "ALPHA-1" and body["runs"] == 1 and body["batches"]
    runs = ProbeRun.objects.filter(batch__in=body["batches"])
    assert {run.trigger for run in runs} == {"tenant"} and {run.kind for run in runs} == {"link"}
    again = admin.post(f"/api/v1/leases/{world.alpha.lease.pk}/run-now/")
    assert again.status_code == 202 and again.json()["already_pending"] is True
    assert again.json()["batches"] == body["batches"]


def test_sla_report_of_a_period(world, client_for):
    auditor = client_for(world.alpha.members[Role.AUDITOR])
    response = auditor.get(f"/api/v1/leases/{world.alpha.lease.pk}/sla/", {"period": "2026-11"})
    assert response.status_code == 200
    report = response.json()
    assert report["lease"] == "ALPHA-1" and report["period"] == "2026-11"
    assert [terms["version"] for terms in report["terms_versions"]] == [1]
    assert report["credit"] is not None and report["policy"]
    assert report["incidents"][0]["id"] == world.alpha.incident.pk


def test_raw_output_downloads_as_text_with_its_sha256(world, client_for):
    run = world.alpha.runs[0]
    response = client_for(world.alpha.members[Role.VIEWER]).get(
        f"/api/v1/probe-runs/{run.pk}/raw/", HTTP_ACCEPT="text/plain"
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content == b"raw output of alpha\n"
    assert response["X-Content-SHA256"] == hashlib.sha256(response.content).hexdigest()
    assert f"probe-run-{run.pk}.txt" in response["Content-Disposition"]


def test_probe_runs_filter_by_lease_kind_state_node_trigger_and_time(world, client_for):
    lease, nodes = world.alpha.lease, world.alpha.nodes
    make_run(
        lease, kind="link", target=nodes[0].hostname, slot=at("2026-11-03 00:00"), nodes=[nodes[0]]
    )
    make_run(lease, state="failed", slot=at("2026-11-04 00:00"), nodes=nodes)
    make_run(lease, trigger="manual", slot=at("2026-11-05 00:00"), nodes=[nodes[1]])
    client = client_for(world.staff)

    def ids(**query):  # type: ignore[no-untyped-def]
        response = client.get("/api/v1/probe-runs/", query)
        assert response.status_code == 200, response.json()
        return [row["slot_at"][:10] for row in response.json()["results"]]

    assert len(ids(lease=lease.pk)) == 6
    assert ids(lease=lease.pk, kind="link") == ["2026-11-03"]
    assert ids(lease=lease.pk, state="failed") == ["2026-11-04"]
    assert ids(lease=lease.pk, trigger="manual") == ["2026-11-05"]
    assert ids(node=nodes[0].pk) == [
        "2026-11-04",
        "2026-11-03",
        "2026-11-02",
        "2026-11-02",
        "2026-11-02",
    ]
    assert ids(
        lease=lease.pk,
        slot_at_after="2026-11-03T00:00:00+08:00",
        slot_at_before="2026-11-04T00:00:00+08:00",
    ) == ["2026-11-04", "2026-11-03"]


def test_cursor_pagination_reaches_a_deep_page(world, client_for):
    lease = world.alpha.lease
    start = at("2026-11-10 00:00")
    for i in range(45):
        make_run(lease, slot=start + timedelta(minutes=5 * (i // 3)), target=f"pair-{i % 3}")
    client = client_for(world.alpha.members[Role.VIEWER])
    seen, url, pages = [], "/api/v1/probe-runs/?page_size=7", 0
    while url:
        page = client.get(url).json()
        seen += [(row["slot_at"], row["id"]) for row in page["results"]]
        url, pages = page["next"], pages + 1
    assert pages == 7 and len(seen) == 48 == len(set(seen))
    assert seen == sorted(seen, reverse=True)  # newest slot first, then highest id
    back = client.get(page["previous"]).json()
    assert back["results"]


# What the counters probe prints for a port (netdev statistics, as the kernel names them).
COUNTERS = "### counters eth0\n/sys/class/net/eth0/statistics/tx_bytes:{tx}\n"


def test_a_node_filters_the_runs_it_took_part_in_and_its_leases_sweeps(world, client_for):
    lease, (n1, n2) = world.alpha.lease, world.alpha.nodes
    both = make_sweep(
        lease,
        kind="counters",
        slot=at("2026-11-12 00:30"),
        outputs={
            node.hostname: "### counters eth0\n/sys/class/net/eth0/statistics/tx_bytes:5\n"
            for node in (n1, n2)
        },
    )
    # n2 leaves the lease; the sweep after that reads n1 alone and is not n2's.
    lease.assignments.filter(node=n2).update(assigned_until=at("2026-11-12 01:00"))
    alone = make_sweep(
        lease,
        kind="counters",
        slot=at("2026-11-12 01:30"),
        outputs={n1.hostname: COUNTERS.format(tx=9)},
    )
    client = client_for(world.alpha.members[Role.VIEWER])

    def ids(node):  # type: ignore[no-untyped-def]
        rows = client.get("/api/v1/probe-runs/", {"node": node.pk, "kind": "counters"}).json()
        return sorted(row["id"] for row in rows["results"])

    assert ids(n1) == sorted([both.pk, alone.pk])
    assert ids(n2) == [both.pk]
    # Another tenant's node matches none of this tenant's runs, and theirs stay unseen.
    assert ids(world.beta.nodes[0]) == []


def test_the_list_writes_each_run_as_the_serializer_would(world, client_for):
    """The list's fast path (plain rows) and the serializer agree field for field,
    including a run without terms, a running run (no finish) and the nodes' order."""
    from rest_framework.test import APIRequestFactory

    from api.serializers import ProbeRunSerializer

    lease, nodes = world.alpha.lease, world.alpha.nodes
    make_run(lease, slot=at("2026-11-12 00:00"), measured_bps=97_500_000_000, nodes=nodes[::-1])
    # A counters sweep of both nodes, one of them not read: its nodes are those it read.
    swept = make_sweep(
        lease,
        kind="counters",
        slot=at("2026-11-12 00:30"),
        outputs={"alpha-n2": COUNTERS.format(tx=5)},
        failures={"alpha-n1": ("unreachable", "connection refused")},
    )
    running = make_run(lease, kind="link", slot=at("2026-11-12 01:00"), nodes=[nodes[0]])
    ProbeRun.objects.filter(pk=running.pk).update(state="running", finished_at=None, terms=None)
    listed = client_for(world.staff).get("/api/v1/probe-runs/", {"lease": lease.pk}).json()
    request = APIRequestFactory().get("/api/v1/probe-runs/")
    runs = ProbeRun.objects.filter(lease=lease).order_by("-slot_at", "-id")
    expected = ProbeRunSerializer(runs, many=True, context={"request": request}).data
    assert [row["id"] for row in listed["results"]] == [row["id"] for row in expected]
    assert listed["results"] == [dict(row) for row in expected]
    first = listed["results"][0]
    assert first["state"] == "running" and first["finished_at"] is None
    assert first["duration_s"] is None and first["terms_version"] is None
    [sweep_row] = [row for row in listed["results"] if row["id"] == swept.pk]
    assert (sweep_row["pattern"], sweep_row["target"]) == ("sweep", "all")
    assert sweep_row["nodes"] == ["alpha-n1", "alpha-n2"]


LISTS = [
    "/api/v1/tenants/",
    "/api/v1/sites/",
    "/api/v1/fabrics/",
    "/api/v1/nodes/",
    "/api/v1/leases/",
    "/api/v1/probe-runs/",
    "/api/v1/incidents/",
    "/api/v1/invoices/",
    "/api/v1/api-tokens/",
]


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("who", ["staff", "tenant"])
def test_list_query_counts_do_not_grow_with_rows(
    world, token_client, django_assert_max_num_queries, url, who
):
    from accounts import services as tokens

    user = world.staff if who == "staff" else world.alpha.members[Role.ADMIN]
    client = token_client(tokens.issue_token(user=user, scopes=["read"]).secret)
    for hour in range(10, 22):
        run = make_run(world.alpha.lease, slot=at(f"2026-11-06 {hour}:00"), nodes=world.alpha.nodes)
        world.alpha.incident.runs.add(run)
    client.get(url)  # warm the token's last_used_at write
    # token lookup, count, rows, at most two prefetches, and the user's tenants for the
    # access line (monitoring.middleware); an invoice prefetches five things (lines, credit
    # notes, events, the vouchers it used and those it issued), each once for every row
    with django_assert_max_num_queries(9 if url == "/api/v1/invoices/" else 6):
        response = client.get(url)
    assert response.status_code == 200
