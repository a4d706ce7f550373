"""/metrics: what it exports per lease, site and port, that it reads a fixed number of
queries whatever the fleet's size, and who may scrape it."""

from datetime import timedelta
from ipaddress import ip_network

import pytest
from django.core.cache import cache
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.missed_slots import mark_missed
from benchmarks.models import ProbeRun
from billing.ingest import ingest_all
from leases.choices import LinkLayer
from monitoring import metrics
from portal import provider_selectors
from tests.factories import (
    NicPortFactory,
    NodeFactory,
    SwitchFactory,
    TenantFactory,
    at,
    make_lease,
    make_run,
    make_sweep,
)
from tests.portal.support import active

pytestmark = pytest.mark.django_db

NOW = at("2026-11-20 12:00")
GIGA = 10**9


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    monkeypatch.setattr("portal.selectors.now", lambda: NOW)
    cache.clear()


def lease_with_runs(reference, *, failing=(), hours=20):
    """An active lease of two nodes (one RoCE port each) with hourly throughput runs up to
    NOW (those in ``failing`` at 40 Gbit/s), and one counters sweep of both."""
    leaf = SwitchFactory()
    nodes = [NodeFactory(hostname=f"{reference.lower()}-n{i}", leaf_switch=leaf) for i in (1, 2)]
    for node in nodes:
        NicPortFactory(node=node, device="mlx5_0", netdev="ens1f0np0", rate_gbps=100)
    lease = active(
        make_lease(tenant=TenantFactory(slug=reference.lower()), reference=reference, nodes=nodes)
    )
    start = NOW - timedelta(hours=hours)
    pair = f"{nodes[0].hostname}>{nodes[1].hostname}"
    for hour in range(hours):
        fail = hours - hour - 1 in failing
        make_run(
            lease,
            slot=start + timedelta(hours=hour),
            verdict="fail" if fail else "pass",
            measured_bps=(40 if fail else 98) * GIGA,
            target=pair,
            nodes=nodes,
        )
    # One counters sweep, as ethtool -S prints an mlx5 port's counters on each node.
    make_sweep(
        lease,
        kind="counters",
        slot=NOW - timedelta(minutes=10),
        outputs={
            node.hostname: "### counters ens1f0np0\n# ethtool -S ens1f0np0\nNIC statistics:\n"
            f"     rx_bytes_phy: {1000 + index}\n     tx_bytes_phy: {2000 + index}\n"
            f"     rx_crc_errors_phy: 0\n     link_down_events_phy: {index}\n"
            for index, node in enumerate(nodes)
        },
    )
    return lease


def families(text: bytes) -> dict[str, list]:
    """Samples by the name they are exposed under (a counter's family has no _total)."""
    found: dict[str, list] = {}
    for family in text_string_to_metric_families(text.decode()):
        name = f"{family.name}_total" if family.type == "counter" else family.name
        found[name] = family.samples
    return found


def value(samples, **labels):
    (match,) = [s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    return match


@pytest.fixture
def fleet():
    leases = [lease_with_runs("A-OK"), lease_with_runs("B-BREACHED", failing={0, 1, 2})]
    ingest_all(notify=False)
    return leases


def test_lease_figures_are_the_fleet_pages(fleet):
    exported = families(metrics.exposition())
    rows = {
        row.lease.reference: row
        for row in provider_selectors.fleet_overview(user=metrics.PROVIDER, instant=NOW)
    }
    assert rows["B-BREACHED"].status == "breached" and rows["A-OK"].status == "meeting"
    status = exported["gpulease_lease_status"]
    assert value(status, lease="B-BREACHED", gpulease_lease_status="breached") == 1
    assert value(status, lease="B-BREACHED", gpulease_lease_status="meeting") == 0
    assert value(status, lease="A-OK", gpulease_lease_status="meeting") == 1
    for reference, row in rows.items():
        assert (
            value(exported["gpulease_lease_contracted_bandwidth_bytes_per_second"], lease=reference)
            == 100 * GIGA / 8
        )
        assert (
            value(exported["gpulease_lease_worst_pair_bandwidth_bytes_per_second"], lease=reference)
            == row.latest_bps / 8
        )
        assert (
            value(exported["gpulease_lease_compliance_ratio"], lease=reference)
            == float(row.summary.credit_compliance_percent) / 100
        )
        assert value(exported["gpulease_lease_open_incidents"], lease=reference) == (
            row.open_incidents
        )
    assert (
        value(exported["gpulease_lease_worst_pair_bandwidth_bytes_per_second"], lease="B-BREACHED")
        == 40 * GIGA / 8
    )
    assert value(exported["gpulease_lease_open_incidents"], lease="B-BREACHED") == 1
    # Labels: tenant, site and fabric of the lease's nodes.
    (sample, *_) = [s for s in status if s.labels["lease"] == "A-OK"]
    node = fleet[0].assignments.first().node
    assert sample.labels["tenant"] == "a-ok"
    assert sample.labels["site"] == node.leaf_switch.fabric.site.code
    assert sample.labels["fabric"] == node.leaf_switch.fabric.name
    # The last good throughput run finished 20 s after its slot, NOW - 1 h.
    assert (
        value(
            exported["gpulease_lease_last_good_sample_age_seconds"], lease="A-OK", kind="throughput"
        )
        == 3600 - 20
    )
    assert value(
        exported["gpulease_lease_last_good_sample_age_seconds"], lease="A-OK", kind="latency"
    ) == float("inf")


def test_credit_at_risk_is_billing_s_figure(fleet, monkeypatch):
    from billing import invoicing
    from gpulease_verify.periods import Period

    period = str(Period.containing(NOW, "Asia/Shanghai"))
    credit = invoicing.lease_credit(lease=fleet[1], period=period)
    exported = families(metrics.exposition())["gpulease_lease_credit_at_risk_cny"]
    assert credit is not None and credit.result.amount < 0
    assert value(exported, lease="B-BREACHED") == float(-credit.result.amount)
    assert value(exported, lease="A-OK") == 0


def test_a_scrape_computes_a_bounded_number_of_missing_credits(settings, monkeypatch):
    """Three leases, a budget of two credits a scrape: the first scrape exports two of
    them, the second the third from the computation and the first two from the cache."""
    for reference in ("C-1", "C-2", "C-3"):
        lease_with_runs(reference, failing={0})
    ingest_all(notify=False)
    cache.clear()
    settings.METRICS_CREDIT_REFRESH_PER_SCRAPE = 2
    computed: list[str] = []
    real = metrics.lease_month  # the lease month (billing.lease_month) carries the credit

    def counting(lease, period, **options):  # type: ignore[no-untyped-def]
        computed.append(lease.reference)
        return real(lease, period, **options)

    monkeypatch.setattr(metrics, "lease_month", counting)
    first = families(metrics.exposition())["gpulease_lease_credit_at_risk_cny"]
    assert len(computed) == 2 and len(first) == 2
    second = families(metrics.exposition())["gpulease_lease_credit_at_risk_cny"]
    assert len(computed) == 3 and len(second) == 3
    assert sorted(computed) == ["C-1", "C-2", "C-3"]


def test_fabric_counters_use_node_exporter_names_and_labels(fleet):
    exported = families(metrics.exposition())
    received = exported["node_infiniband_port_data_received_bytes_total"]
    assert value(received, node="a-ok-n1", device="mlx5_0", port="1") == 1000
    assert value(received, node="a-ok-n2", device="mlx5_0", port="1") == 1001
    assert (
        value(exported["node_infiniband_port_data_transmitted_bytes_total"], node="a-ok-n1") == 2000
    )
    assert value(exported["node_infiniband_link_downed_total"], node="b-breached-n2") == 1
    assert value(exported["node_infiniband_rate_bytes_per_second"], node="a-ok-n1") == 12.5 * GIGA


def test_infiniband_sysfs_counters_keep_their_device_and_port():
    node = NodeFactory(hostname="ib-1")
    NicPortFactory(node=node, device="mlx5_3", port_number=1, link_layer=LinkLayer.INFINIBAND)
    lease = active(make_lease(reference="IB", nodes=[node]))
    # What `grep -H . /sys/class/infiniband/mlx5_3/ports/1/counters/*` prints (the format of
    # counters/sysfs_ib_counters_mlx5.txt), the data counters in 4-octet units.
    base = "/sys/class/infiniband/mlx5_3/ports/1/counters"
    counters = {
        "port_rcv_data": 10,
        "port_xmit_data": 20,
        "port_rcv_errors": 2,
        "symbol_error": 7,
        "link_error_recovery": 3,
        "link_downed": 0,
        "VL15_dropped": 5,
    }
    make_sweep(
        lease,
        kind="counters",
        slot=NOW - timedelta(minutes=5),
        outputs={
            "ib-1": "### counters mlx5_3:1\n"
            + "".join(f"{base}/{name}:{count}\n" for name, count in counters.items())
        },
    )
    # The sweep keeps the counters node_exporter exports, not the port's whole list.
    (port,) = ProbeRun.objects.get(lease=lease).parsed["nodes"]["ib-1"]["ports"]
    assert port["raw"] == {"symbol_error": 7, "link_error_recovery": 3}
    exported = families(metrics.exposition())
    assert value(exported["node_infiniband_port_data_received_bytes_total"], node="ib-1") == 40
    assert value(exported["node_infiniband_symbol_error_total"], device="mlx5_3", port="1") == 7
    assert value(exported["node_infiniband_link_error_recovery_total"], node="ib-1") == 3
    assert value(exported["node_infiniband_port_errors_received_total"], node="ib-1") == 2


def test_site_figures(fleet):
    lease = fleet[0]
    site = lease.assignments.first().node.leaf_switch.fabric.site
    node = lease.assignments.first().node
    for slot, cadence, target in ((30, 600, "x"), (1, 3600, "y")):
        ProbeRun.objects.filter(
            pk=make_run(
                lease,
                slot=NOW - timedelta(minutes=slot),
                cadence_s=cadence,
                nodes=[node],
                target=target,
            ).pk
        ).update(state="scheduled", finished_at=None, started_at=None)
    assert mark_missed(now=NOW) == 1  # x: its deadline passed 20 minutes ago; y waits
    ingest_all(notify=False)  # the missed run is read
    # A run finished 5 minutes ago that the ingest has not read yet.
    make_run(
        lease,
        slot=NOW - timedelta(minutes=6),
        nodes=[node],
        target="z",
        finished=NOW - timedelta(minutes=5),
    )
    exported = families(metrics.exposition())
    assert value(exported["gpulease_site_queue_depth"], site=site.code) == 1
    assert value(exported["gpulease_site_missed_runs_total"], site=site.code) == 1
    assert value(exported["gpulease_site_probe_runs"], site=site.code, state="missed") == 1
    assert value(exported["gpulease_site_probe_runs"], site=site.code, state="scheduled") == 1
    assert value(exported["gpulease_site_ingest_lag_seconds"], site=site.code) == 300


def test_a_scrape_reads_a_constant_number_of_queries(django_assert_num_queries):
    lease_with_runs("A-ONE", failing={0, 1, 2})
    ingest_all(notify=False)
    metrics.exposition()  # the credit at risk is cached for METRICS_CREDIT_CACHE_S
    # 19: the running figures of usage-billed leases are one of them (billing.running);
    # the fleet's rows read their lease months (billing.lease_month.current_months).
    with django_assert_num_queries(19) as few:
        metrics.exposition()
    for index in range(4):
        lease_with_runs(f"MORE-{index}", failing={index})
    ingest_all(notify=False)
    cache.clear()
    metrics.exposition()
    with django_assert_num_queries(len(few.captured_queries)):
        text = metrics.exposition()
    assert text.count(b"gpulease_lease_open_incidents{") == 5


def test_an_empty_database_scrapes_cleanly():
    exported = families(metrics.exposition())
    assert exported["gpulease_lease_status"] == []
    assert "process_cpu_seconds_total" in exported


# --------------------------------------------------------------------------------------
# Who may scrape
# --------------------------------------------------------------------------------------


def get(client_address="127.0.0.1", **headers):
    return Client(REMOTE_ADDR=client_address).get("/metrics", **headers)


def test_production_without_token_or_allowlist_refuses(settings):
    settings.DEBUG, settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = False, "", []
    assert get().status_code == 403


def test_debug_without_configuration_allows_loopback_only(settings):
    settings.DEBUG, settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = True, "", []
    assert get("127.0.0.1").status_code == 200
    assert get("::1").status_code == 200
    assert get("10.0.0.5").status_code == 403


def test_the_bearer_token(settings):
    settings.DEBUG, settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = False, "s3cret", []
    response = get("10.0.0.5", HTTP_AUTHORIZATION="Bearer s3cret")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert get("10.0.0.5", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert get("10.0.0.5", HTTP_AUTHORIZATION="Basic s3cret").status_code == 403
    assert get("127.0.0.1").status_code == 403  # loopback is no exception once configured


def test_the_address_allowlist(settings):
    settings.DEBUG, settings.METRICS_TOKEN = False, ""
    settings.METRICS_ALLOWED_NETWORKS = [ip_network("10.20.0.0/16")]
    assert get("10.20.3.4").status_code == 200
    assert get("::ffff:10.20.3.4").status_code == 200
    assert get("10.21.0.1").status_code == 403


def test_either_suffices_when_both_are_set(settings):
    settings.DEBUG, settings.METRICS_TOKEN = False, "s3cret"
    settings.METRICS_ALLOWED_NETWORKS = [ip_network("10.20.0.0/16")]
    assert get("10.20.3.4").status_code == 200
    assert get("192.0.2.1", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200
    assert get("192.0.2.1").status_code == 403


def test_only_get(settings):
    settings.DEBUG, settings.METRICS_TOKEN = True, ""
    assert Client(REMOTE_ADDR="127.0.0.1").post("/metrics").status_code == 405


def test_metrics_skip_the_host_check_and_the_https_redirect(settings):
    """Prometheus scrapes http://web:8000/metrics: a host ALLOWED_HOSTS does not list, plain
    HTTP (monitoring.middleware, like /healthz)."""
    settings.DEBUG, settings.METRICS_TOKEN = False, "s3cret"
    settings.ALLOWED_HOSTS, settings.SECURE_SSL_REDIRECT = ["gpulease.example.cn"], True
    client = Client(REMOTE_ADDR="172.18.0.5")
    response = client.get("/metrics", HTTP_HOST="web:8000", HTTP_AUTHORIZATION="Bearer s3cret")
    assert response.status_code == 200
    assert client.get("/metrics", HTTP_HOST="web:8000").status_code == 403
    assert client.get("/provider/", HTTP_HOST="web:8000").status_code == 400  # others: checked


def test_multiprocess_mode_merges_every_worker_s_counters(tmp_path, monkeypatch):
    """With PROMETHEUS_MULTIPROC_DIR set (gunicorn, monitoring.gunicorn), counters that
    other processes wrote to the directory are in the scrape."""
    from prometheus_client import Counter, values

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    for pid in (101, 102):  # two worker processes
        monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(lambda pid=pid: pid))
        Counter("gpulease_test_requests", "test", registry=None).inc(pid - 100)
    text = metrics.exposition().decode()
    assert "gpulease_test_requests_total 3.0" in text
    assert "gpulease_lease_status" in text  # the database collector is there too


def test_celery_task_counters(monkeypatch):
    from monitoring import celery_metrics

    class Task:
        name = "billing.ingest"

    before = celery_metrics.TASKS.labels(task="billing.ingest", outcome="success")._value.get()
    celery_metrics._prerun(task_id="t1")
    celery_metrics._postrun(sender=Task(), task_id="t1", task=Task(), state="SUCCESS")
    after = celery_metrics.TASKS.labels(task="billing.ingest", outcome="success")._value.get()
    assert after == before + 1
    assert "gpulease_celery_tasks_total" in metrics.exposition().decode()
