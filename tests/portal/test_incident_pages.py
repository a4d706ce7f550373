"""An incident's page, its band on the lease's throughput chart, the charts' shared range
and each chart's CSV (issue 33 item 4).

Times are the tenant's (Asia/Shanghai, UTC+8; tests.factories.at reads them so). The
hand-made incident: pairs n1>n2 and n2>n1 each fail once (40 and 35 Gbit/s at 05:00 and
06:00 on 2026-11-03) among 18 passing hours at 98 Gbit/s; it opened at 05:00 (21:00 UTC the
day before) and closed at 07:00, 120.0 minutes to repair, all 120 minutes inside November's
billed window (the lease is billed from 2026-11-01 00:00)."""

import csv
import io
import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest

from billing.reports import sla_report
from incidents.services import INGEST, open_incident
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run
from tests.portal.support import NOW, active, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def member():
    return MembershipFactory()


@pytest.fixture
def nodes():
    return [NodeFactory(hostname="sz-h100-07"), NodeFactory(hostname="sz-h100-08")]


@pytest.fixture
def lease(member, nodes):
    return active(
        make_lease(
            tenant=member.tenant,
            reference="ZY-2026-131",
            nodes=nodes,
            network_fee_per_month=Decimal("22000.00"),
        )
    )


def incident_with_two_runs(lease, nodes):  # type: ignore[no-untyped-def]
    start = at("2026-11-03 00:00")
    failing = {}
    for hour in range(20):
        if hour == 5:
            failing[hour] = make_run(
                lease,
                slot=start + timedelta(hours=5),
                verdict="fail",
                measured_bps=40 * 10**9,
                nodes=nodes,
            )
        elif hour == 6:
            failing[hour] = make_run(
                lease,
                slot=start + timedelta(hours=6),
                verdict="fail",
                measured_bps=35 * 10**9,
                target="n2>n1",
                nodes=nodes,
            )
        else:
            make_run(lease, slot=start + timedelta(hours=hour), measured_bps=98 * 10**9)
    from billing.ingest import ingest_all

    ingest_all(notify=False)  # rollups; one failure per pair opens no incident by itself
    assert not lease.incidents.exists()
    incident = open_incident(
        actor=INGEST,
        lease_id=lease.pk,
        terms_id=lease.terms.get().pk,
        kind="throughput",
        pattern="ring",
        target="n1>n2",
        opened_at=at("2026-11-03 05:00"),
        closed_at=at("2026-11-03 07:00"),
        rule="throughput >= 95% of 100 Gbps contracted (terms v1)",
        violations=2,
        runs=[failing[5], failing[6]],
        worst=[(40 * 10**9, None), (35 * 10**9, None)],
    )
    return incident, failing[5], failing[6]


def test_the_incident_page_shows_runs_pairs_local_times_and_the_months_credit(member, lease, nodes):
    incident, first, second = incident_with_two_runs(lease, nodes)
    client = client_for(member.user)
    html = client.get(f"/leases/{lease.pk}/incidents/{incident.pk}/").content.decode()
    # The header and timeline in the tenant's zone: 21:00 UTC is 05:00 the next day there.
    assert "Asia/Shanghai" in html
    assert 'id="opened-at">2026-11-03 05:00:00' in html
    assert 'id="closed-at">2026-11-03 07:00:00' in html
    assert '<time datetime="2026-11-02T21:00:00+00:00">2026-11-03 05:00:00</time>' in html
    assert 'id="repair-minutes">120.0 min' in html
    assert "by probe ingest" in html
    timeline = html.split('id="timeline"')[1].split('id="affected"')[0]
    assert re.findall(r"<time[^>]*>([^<]+)</time> ([a-z ]+)", timeline) == [
        ("2026-11-03 05:00:00", "opened"),
        ("2026-11-03 05:00:05", "violating run"),  # the runs started 5 s into their slots
        ("2026-11-03 06:00:05", "violating run"),
        ("2026-11-03 07:00:00", "closed"),
    ]
    # Both runs, each with its figure and its raw output; both pairs.
    for run, figure in ((first, "40 Gbit/s"), (second, "35 Gbit/s")):
        row = html.split(f'id="run-{run.pk}"')[1].split("</tr>")[0]
        assert figure in row and "fail" in row
        assert f'href="/api/v1/probe-runs/{run.pk}/raw/"' in row
    pairs = html.split('class="incident-pairs"')[1].split("</table>")[0]
    assert "<code>n1&gt;n2</code>" in pairs and "<code>n2&gt;n1</code>" in pairs
    assert 'id="affected-nodes">Nodes: sz-h100-07, sz-h100-08</p>' in html
    # The credit effect: 120 minutes, and the month's figures as its SLA report has them.
    report = sla_report(lease=lease, period="2026-11", now=NOW)
    assert report["credit"] is not None
    effect = html.split('id="effect-2026-11"')[1].split("</section>")[0]
    assert 'data-figure="minutes">120 min' in effect
    amount = Decimal(report["credit"]["amount"])
    assert amount < 0
    assert f"¥{amount:,.2f}" in effect
    # 18 of 20 hours passed: 90.000 % compliance for credits.
    assert report["credit_compliance_percent"] == "90.000"
    assert 'data-figure="credit-compliance">90.000 %' in effect
    # The lease page links to it instead of the raw downloads, and shades it on the chart.
    page = client.get(f"/leases/{lease.pk}/?days=30").content.decode()
    assert f'href="/leases/{lease.pk}/incidents/{incident.pk}/"' in page
    assert "/raw/" not in page
    data = json.loads(page.split('id="throughput-data" type="application/json">')[1].split("<")[0])
    assert data["bands"] == [
        {
            "from": round(at("2026-11-03 05:00").timestamp() * 1000),
            "to": round(at("2026-11-03 07:00").timestamp() * 1000),
            "name": "incident: throughput, n1>n2",
            "href": f"/leases/{lease.pk}/incidents/{incident.pk}/",
        }
    ]
    assert page.count('class="incident-band"') == 1


def test_the_incident_page_in_chinese(member, lease, nodes):
    incident, _first, _second = incident_with_two_runs(lease, nodes)
    html = (
        client_for(member.user, language="zh-hans")
        .get(f"/leases/{lease.pk}/incidents/{incident.pk}/")
        .content.decode()
    )
    assert "对 SLA 和赔付的影响" in html and "违约运行" in html
    assert 'id="opened-at">2026-11-03 05:00:00' in html


def test_another_tenants_incident_and_chart_data_are_a_404(member, lease, nodes):
    incident, _first, _second = incident_with_two_runs(lease, nodes)
    stranger = MembershipFactory()
    theirs = active(
        make_lease(tenant=stranger.tenant, reference="LX-2026-931", nodes=[NodeFactory()])
    )
    client = client_for(stranger.user)
    assert client.get(f"/leases/{lease.pk}/incidents/{incident.pk}/").status_code == 404
    # Their own lease in the URL does not reach our incident either.
    assert client.get(f"/leases/{theirs.pk}/incidents/{incident.pk}/").status_code == 404
    for chart in ("throughput", "busbw", "traffic"):
        assert client.get(f"/leases/{lease.pk}/charts/{chart}.csv").status_code == 404
    assert client.get(f"/leases/{theirs.pk}/charts/throughput.csv").status_code == 200
    assert client.get(f"/leases/{theirs.pk}/charts/nothing.csv").status_code == 404
    # Ours, of the right lease, is there; of the wrong lease, not.
    ours = client_for(member.user)
    assert ours.get(f"/leases/{lease.pk}/incidents/{incident.pk}/").status_code == 200
    assert ours.get(f"/leases/{theirs.pk}/incidents/{incident.pk}/").status_code == 404


def test_the_throughput_csv_holds_the_charts_series_over_the_last_24_hours(member, lease):
    """NOW is 2026-11-20 12:00 in Shanghai, 04:00 UTC: 24 hours back is 2026-11-19 04:00
    UTC. A run an hour before that stays out; each hour's one figure per pair is one row,
    at its UTC hour (02:00 in Shanghai is 18:00 UTC the day before); the threshold (95 % of
    100) and the contract are one step each, from the range's start."""
    make_run(lease, slot=at("2026-11-19 11:00"), measured_bps=99 * 10**9)  # before the range
    make_run(lease, slot=at("2026-11-20 02:00"), measured_bps=98 * 10**9)
    make_run(lease, slot=at("2026-11-20 03:00"), measured_bps=40 * 10**9)
    make_run(lease, slot=at("2026-11-20 03:00"), measured_bps=97_500_000_000, target="n2>n1")
    response = client_for(member.user).get(f"/leases/{lease.pk}/charts/throughput.csv?range=24h")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert (
        # UTC, as the Z says: 12:00 in Shanghai is 04:00 UTC.
        "ZY-2026-131-throughput-20261119T0400Z-20261120T0400Z.csv"
        in response["Content-Disposition"]
    )
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows == [
        ["time", "series", "value", "unit"],
        ["2026-11-19T18:00:00Z", "n1>n2", "98", "Gbit/s"],
        ["2026-11-19T19:00:00Z", "n1>n2", "40", "Gbit/s"],
        ["2026-11-19T19:00:00Z", "n2>n1", "97.5", "Gbit/s"],
        ["2026-11-19T04:00:00Z", "threshold 95%", "95", "Gbit/s"],
        ["2026-11-19T04:00:00Z", "contracted", "100", "Gbit/s"],
    ]
    # The page's chart over the same range names the same range.
    page = client_for(member.user).get(f"/leases/{lease.pk}/?range=24h").content.decode()
    assert "Measured throughput per node pair, the last 24 hours" in page
    assert f'href="/leases/{lease.pk}/charts/throughput.csv?range=24h"' in page


def test_a_from_to_range_is_whole_local_days_and_last_month_is_octobers(member, lease):
    """?from=2026-11-02&to=2026-11-03 is two whole days of the tenant's calendar, from local
    midnight to local midnight; ?range=last-month is October there, this-month November
    up to now."""
    client = client_for(member.user)

    def x_range(query: str) -> tuple[int, int]:
        page = client.get(f"/leases/{lease.pk}/?{query}").content.decode()
        data = json.loads(
            page.split('id="throughput-data" type="application/json">')[1].split("<")[0]
        )
        return data["x_min"], data["x_max"]

    def ms(text: str) -> int:
        return round(at(text).timestamp() * 1000)

    assert x_range("from=2026-11-02&to=2026-11-03") == (
        ms("2026-11-02 00:00"),
        ms("2026-11-04 00:00"),
    )
    assert ms("2026-11-02 00:00") == 1_793_548_800_000  # 2026-11-01T16:00:00Z
    assert x_range("range=last-month") == (ms("2026-10-01 00:00"), ms("2026-11-01 00:00"))
    assert x_range("range=this-month") == (ms("2026-11-01 00:00"), ms("2026-11-20 12:00"))
    # Both charts share it: the bus bandwidth chart's data (drawn once it has a point).
    make_run(
        lease,
        kind="collective",
        slot=at("2026-11-02 10:00"),
        measured_bps=180 * 10**9,
        target="all",
        pattern="all",
    )
    page = client.get(f"/leases/{lease.pk}/?from=2026-11-02&to=2026-11-03").content.decode()
    busbw = json.loads(page.split('id="busbw-data" type="application/json">')[1].split("<")[0])
    assert (busbw["x_min"], busbw["x_max"]) == (ms("2026-11-02 00:00"), ms("2026-11-04 00:00"))
    assert "NCCL all_reduce bus bandwidth, 2026-11-02 to 2026-11-03" in page
