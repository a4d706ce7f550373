"""The probe tax (issue 14, item 4): the bytes gpulease's own heavy probes send are kept
out of per-GB and 95计费 metering, listed per lease (API and portal), and heavy probes wait
while the lease is busy. Real path: counter and probe runs with real tool outputs, then
ingest, then the invoice and the audit bundle. Each case's arithmetic is in its comments.

The iperf3 fixture used throughout, ``tcp_3.12_P4_loopback.json``, is a client run whose
``end.sum_sent.bytes`` is 2,154,299,392 (no omitted second): that is what it sent."""

import copy
import hashlib
import json
from datetime import timedelta
from decimal import Decimal as D
from pathlib import Path

import pytest
import time_machine
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.choices import Role
from benchmarks import services as probe_services
from benchmarks.choices import RunState, Trigger
from benchmarks.models import ProbeRun, outputs
from benchmarks.recording import terms_view
from billing import audit, invoicing
from billing.choices import LineKind
from billing.ingest import ingest_all
from billing.models import HourlyRollup, TrafficSample
from billing.probe_tax import probe_tax_of
from gpulease_verify import probe_tax, traffic
from gpulease_verify.canonical import parse_instant
from gpulease_verify.interpret import interpret
from gpulease_verify.periods import Period
from gpulease_verify.verdicts import TermsView
from leases import services
from leases.choices import BillingMode, LeaseStatus
from tests.factories import (
    MembershipFactory,
    NicPortFactory,
    NodeFactory,
    SiteFactory,
    SwitchFactory,
    TenantFactory,
    at,
    make_lease,
    make_run,
)
from tests.portal.test_complete_chinese import english_words

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-02 00:00")
GB = 10**9
FIXTURES = Path(__file__).parent.parent / "benchmarks" / "fixtures"
IPERF3 = (FIXTURES / "iperf3" / "tcp_3.12_P4_loopback.json").read_text()
IPERF3_BYTES = 2_154_299_392


VIEW = TermsView(
    version=1,
    contracted_gbps=D("100"),
    threshold_percent=D("95"),
    busbw_floor_gbps=None,
    latency_ceiling_us=None,
)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- what each tool sent (pure) ---------------------------------------------------------


def sent(tool: str, raw: str, *, target: str = "a>b", nodes=("a", "b"), command: str = ""):  # type: ignore[no-untyped-def]
    parsed = interpret(tool=tool, raw_output=raw, terms=VIEW).parsed
    return probe_tax.bytes_sent(
        tool=tool,
        state="ok",
        parsed=parsed,
        raw_output=raw,
        command=command,
        target=target,
        nodes=list(nodes),
    )


def test_iperf3_client_sent_its_sum_sent_bytes_and_the_omitted_second():
    assert sent("iperf3", IPERF3) == {"a": IPERF3_BYTES}
    # -O 1: iperf3 reports the omitted second as an interval marked "omitted" and leaves its
    # bytes out of end.sum_sent: 2,154,299,392 + 1,000,000,000.
    document = json.loads(IPERF3)
    document["start"]["test_start"]["omit"] = 1
    first = copy.deepcopy(document["intervals"][0])
    first["sum"].update(omitted=True, bytes=GB)
    document["intervals"].insert(0, first)
    assert probe_tax.iperf3_bytes(json.dumps(document)) == (IPERF3_BYTES + GB, 0, False)
    # Omitted but no such interval printed: omit x sum_sent bits/s / 8 (an estimate).
    del document["intervals"][0]
    rate = document["end"]["sum_sent"]["bits_per_second"]
    assert probe_tax.iperf3_bytes(json.dumps(document))[0] == IPERF3_BYTES + int(rate) // 8


def test_iperf3_reverse_and_bidir_name_the_server_as_a_sender():
    # -R: the server sent 1,479,802,880. --bidir: 872,808,448 one way, 892,600,320 back.
    assert sent("iperf3", fixture("iperf3/tcp_3.12_reverse_loopback.json")) == {"b": 1479802880}
    assert sent("iperf3", fixture("iperf3/tcp_3.12_bidir_loopback.json")) == {
        "a": 872808448,
        "b": 892600320,
    }


def test_perftest_ping_and_nccl_bytes_are_hand_checked():
    # ib_write_bw: 65,536 B x 5,000 iterations = 327,680,000, written by the client.
    assert sent("ib_write_bw", fixture("perftest/write_bw_gbits_cx7_ndr.txt")) == {"a": 327680000}
    # ib_write_lat, all sizes 2 B .. 8 MiB: (2^24 - 2) x 20,000 = 335,544,280,000 each way.
    assert sent("ib_write_lat", fixture("perftest/write_lat_all_sizes_mlx4_qdr.txt")) == {
        "a": 335544280000,
        "b": 335544280000,
    }
    # ping: 5 requests and 5 replies of 98 B.
    assert sent("ping", fixture("ping/iputils_20221126_loopback.txt")) == {"a": 490, "b": 490}
    # all_reduce_perf, 16 ranks on 2 nodes, sizes 1 GiB and 10 GiB with in-place groups:
    # per size 20 x 2 + 5 warm-up = 45 iterations; each node sends 2 x 15 / 16 x size per
    # iteration: 1350 x 11,811,160,064 / 16 = 996,566,630,400 B per node.
    nccl = fixture("nccl-tests/multinode_2x8_a100_kubeflow.txt")
    assert sent("all_reduce_perf", nccl, target="all") == {"a": 996566630400, "b": 996566630400}
    assert sent("all_reduce_perf", nccl, target="all", nodes=("a",)) == {}


def test_a_probe_is_taken_away_pro_rata_by_time_and_never_below_zero():
    # 1,000 B over [10:04, 10:06): 500 in the 10:00 slot, 500 in the 10:05 slot. The 10:00
    # share held only 300 B of counters: 0, not -200.
    send = probe_tax.ProbeSend("n1", 1000, at("2026-11-02 10:04"), at("2026-11-02 10:06"))
    assert probe_tax.bytes_within(send, at("2026-11-02 10:00"), at("2026-11-02 10:05")) == 500
    assert probe_tax.bytes_within(send, at("2026-11-02 10:05"), at("2026-11-02 10:10")) == 500
    assert probe_tax.take_away(300, [send], at("2026-11-02 10:00"), at("2026-11-02 10:05")) == 0
    assert probe_tax.take_away(9000, [send], at("2026-11-02 10:05"), at("2026-11-02 10:10")) == 8500


# --- through ingest into the invoice --------------------------------------------------------


def _lease(**terms):  # type: ignore[no-untyped-def]
    nodes = [NodeFactory(hostname="n1"), NodeFactory(hostname="n2")]
    lease = make_lease(
        tenant=TenantFactory(), nodes=nodes, starts_at=at("2026-11-01 00:00"), **terms
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))


def _counters(lease, first: str, tx_bytes: list[int], node: str = "n1") -> None:  # type: ignore[no-untyped-def]
    for index, value in enumerate(tx_bytes):
        make_run(
            lease,
            kind="counters",
            target=node,
            pattern="node",
            slot=at(first) + timedelta(minutes=5 * index),
            cadence_s=300,
            verdict="none",
            parsed={"ports": [{"section": "counters data0", "name": "data0", "tx_bytes": value}]},
        )


def _iperf3(lease, slot: str, *, finished: str | None = None):  # type: ignore[no-untyped-def]
    """An iperf3 client run n1 -> n2, stored as record_execution stores it; it runs from
    5 s after its slot until ``finished`` (default 20 s after)."""
    run = make_run(
        lease,
        tool="iperf3",
        target="n1>n2",
        slot=at(slot),
        finished=at(finished) if finished else None,
    )
    result = interpret(tool="iperf3", raw_output=IPERF3, terms=terms_view(run.terms))
    outputs.store([IPERF3])
    ProbeRun.objects.filter(pk=run.pk).update(
        command="iperf3 -c 198.18.0.12 -p 5201 -B 198.18.0.11 -J -t 10 -O 1 -P 4",
        raw_sha256=hashlib.sha256(IPERF3.encode()).hexdigest(),
        parsed=result.parsed,
        measured_bps=result.measured_bps,
        verdict=result.judgement.verdict,
        rule=result.judgement.rule,
        verdict_reason=result.judgement.reason,
    )
    run.nodes.set(lease.assignments.values_list("node", flat=True))
    run.refresh_from_db()
    return run


def _invoice(lease):  # type: ignore[no-untyped-def]
    with time_machine.travel(AFTER_NOVEMBER, tick=False):
        ingest_all(notify=False)
        return invoicing.compute_invoice(tenant=lease.tenant, period=NOVEMBER)


def _samples(lease) -> dict:  # type: ignore[type-arg, no-untyped-def]
    return dict(TrafficSample.objects.filter(lease=lease).values_list("slot_at", "tx_bytes"))


def test_per_gb_bills_the_counters_less_the_probe_even_when_the_probe_finished_later():
    # Counters of n1: 0, 400 GB, 1,000 GB at 10:00, 10:05, 10:10: 1,000 GB in all, of which
    # the iperf3 run at 10:06 sent 2,154,299,392 B. The counters are ingested first; the
    # run finishes after and its slot is rebuilt: 1,000,000,000,000 - 2,154,299,392 =
    # 997,845,700,608 B = 997.845700608 GB x ¥0.50 = 498.922850304 -> ¥498.92.
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    _counters(lease, "2026-11-02 10:00", [0, 400 * GB, 1000 * GB])
    ingest_all(notify=False)
    assert _samples(lease) == {at("2026-11-02 10:00"): 400 * GB, at("2026-11-02 10:05"): 600 * GB}
    _iperf3(lease, "2026-11-02 10:06")
    ingest_all(notify=False)
    assert _samples(lease) == {
        at("2026-11-02 10:00"): 400 * GB,
        at("2026-11-02 10:05"): 600 * GB - IPERF3_BYTES,
    }
    invoice = _invoice(lease)
    [usage] = [line for line in invoice.lines if line.kind == LineKind.USAGE_GB]
    assert usage.amount == D("498.92")


def test_a_probe_spanning_two_slots_leaves_each_its_share():
    # The run goes from 10:04:00 to 10:06:00 (120 s): half its bytes in each slot,
    # 1,077,149,696 B; the 10:00 sample 400 GB - 1,077,149,696 = 398,922,850,304.
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    _counters(lease, "2026-11-02 10:00", [0, 400 * GB, 1000 * GB])
    _iperf3(lease, "2026-11-02 10:03:55", finished="2026-11-02 10:06:00")
    ingest_all(notify=False)
    half = IPERF3_BYTES // 2
    assert _samples(lease) == {
        at("2026-11-02 10:00"): 400 * GB - half,
        at("2026-11-02 10:05"): 600 * GB - half,
    }


def test_ingest_reads_a_probes_bytes_once_and_the_ledger_reads_that_figure(
    django_assert_num_queries,
):
    # Before ingest the ledger reads the run's output (2,154,299,392 B from n1, as above);
    # ingest stores that figure on the run, and from then on the ledger is four queries
    # (totals, runs not ingested, listing, deferred) and no output: deleting the stored
    # text changes nothing it says.
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    run = _iperf3(lease, "2026-11-02 10:06")
    before = probe_tax_of(lease=lease, period=NOVEMBER)
    assert [item.bytes_by_node for item in before.runs] == [{"n1": IPERF3_BYTES}]
    run.refresh_from_db()
    assert run.sent_bytes is None  # a reader does not write
    ingest_all(notify=False)
    run.refresh_from_db()
    assert run.sent_bytes == {"n1": IPERF3_BYTES}
    outputs.RawOutput.objects.all().delete()
    with django_assert_num_queries(4):
        after = probe_tax_of(lease=lease, period=NOVEMBER)
    assert [(i.run_id, i.bytes_by_node, i.seconds) for i in after.runs] == [
        (run.pk, {"n1": IPERF3_BYTES}, 15)
    ]
    assert after.cost == before.cost == D("1.08")


def test_the_ledgers_totals_are_its_runs_added_up_in_the_database_whatever_it_lists(
    django_assert_num_queries,
):
    # Twelve iperf3 runs of 2,154,299,392 B each: eight under v1 at ¥0.50/GB, four under
    # v2 (from 20 November) at ¥0.30/GB. Each ran 14.5 s (10:06:05.7 to 10:06:20.2): 14
    # whole seconds. One more under v1 printed garbage (ingest records {}: not counted),
    # and the last one of v2 has not been ingested yet (read from its output now).
    # v1: 8 x 2,154,299,392 = 17,234,395,136 B x ¥0.50/GB = 8.617197568 -> ¥8.62
    # v2: 4 x 2,154,299,392 =  8,617,197,568 B x ¥0.30/GB = 2.5851592704 -> ¥2.59
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    with time_machine.travel(at("2026-11-10 00:00"), tick=False):
        services.amend_terms(
            lease=lease,
            effective_from=at("2026-11-20 00:00"),
            changes={"price_per_gb": D("0.3000")},
            reason="price cut",
        )
    days = [2, 3, 4, 5, 6, 7, 8, 9, 21, 22, 23, 24]
    runs = [_iperf3(lease, f"2026-11-{day:02d} 10:06") for day in days]
    garbled = _iperf3(lease, "2026-11-10 10:06")
    for run in [*runs, garbled]:
        slot = run.slot_at
        ProbeRun.objects.filter(pk=run.pk).update(
            started_at=slot + timedelta(seconds=5.7), finished_at=slot + timedelta(seconds=20.2)
        )
    outputs.store(["not json"])
    ProbeRun.objects.filter(pk=garbled.pk).update(
        raw_sha256=hashlib.sha256(b"not json").hexdigest(), parsed=None
    )
    ProbeRun.objects.filter(pk=runs[-1].pk).update(ingested_at=AFTER_NOVEMBER)  # not read
    ingest_all(notify=False)
    ProbeRun.objects.filter(pk=runs[-1].pk).update(sent_bytes=None)

    whole = probe_tax_of(lease=lease, period=NOVEMBER)
    assert [item.run_id for item in whole.runs] == [run.pk for run in runs]
    assert {item.seconds for item in whole.runs} == {14}
    assert (whole.count, whole.bytes, whole.seconds) == (12, 12 * IPERF3_BYTES, 12 * 14)
    assert whole.bytes == sum(item.bytes for item in whole.runs)
    assert whole.cost == D("8.62") + D("2.59")
    with django_assert_num_queries(4 + 1 + 3):  # and the one run not ingested, read whole
        page = probe_tax_of(lease=lease, period=NOVEMBER, listed=10)
    assert page.runs == whole.runs[:10] and page.unlisted == 2
    assert (page.count, page.bytes, page.seconds, page.cost) == (
        whole.count,
        whole.bytes,
        whole.seconds,
        whole.cost,
    )


def test_a_probe_whose_output_cannot_be_read_records_no_bytes_and_is_left_out():
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    run = _iperf3(lease, "2026-11-02 10:06")
    outputs.store(["not json"])
    ProbeRun.objects.filter(pk=run.pk).update(
        raw_sha256=hashlib.sha256(b"not json").hexdigest(), parsed=None
    )
    ingest_all(notify=False)
    run.refresh_from_db()
    assert run.sent_bytes == {}
    assert probe_tax_of(lease=lease, period=NOVEMBER).runs == []


def test_runs_whose_output_cannot_be_read_are_named_in_one_warning(caplog):
    """A catch-up over many runs with the same unreadable output logs one line, with the
    count and the first run ids, not a line per run."""
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    runs = [_iperf3(lease, f"2026-11-02 10:{minute:02d}") for minute in range(0, 35, 5)]
    outputs.store(["iperf3 printed nothing we can read"])
    ProbeRun.objects.filter(pk__in=[run.pk for run in runs]).update(
        raw_sha256=hashlib.sha256(b"iperf3 printed nothing we can read").hexdigest()
    )
    with caplog.at_level("WARNING", logger="billing.probe_tax"):
        ingest_all(notify=False)
    ids = sorted(run.pk for run in runs)
    assert [record.getMessage() for record in caplog.records] == [
        f"7 probe run(s) ({', '.join(str(pk) for pk in ids[:5])} and 2 more): their probe "
        "bytes are not known: not iperf3 output: no '{' and no iperf3 summary lines"
    ]
    assert (
        list(ProbeRun.objects.filter(pk__in=ids).values_list("sent_bytes", flat=True)) == [{}] * 7
    )


def test_p95_leaves_the_probe_out_of_the_peak():
    # Counters 0, 30 GB, 62 GB: samples 30 GB (800 Mbps) and 32 GB (853.33 Mbps), but the
    # iperf3 run at 10:06 sent 2,154,299,392 B of the second: 29,845,700,608 B x 8 / 300 =
    # 795.89 Mbps. The 95th percentile of two samples is the higher: 800 Mbps (853.33 with
    # the probe) x ¥0.40 = ¥320.00 for the whole month.
    lease = _lease(billing_mode=BillingMode.P95, price_per_mbps_p95=D("0.4000"))
    _counters(lease, "2026-11-02 10:00", [0, 30 * GB, 62 * GB])
    _iperf3(lease, "2026-11-02 10:06")
    invoice = _invoice(lease)
    [usage] = [line for line in invoice.lines if line.kind == LineKind.USAGE_P95]
    assert (usage.quantity, usage.amount) == (D("800.00"), D("320.00"))


def test_the_bundle_verifies_and_its_runs_rebuild_the_same_samples(settings, tmp_path):
    # The verifier rebuilds the samples from the bundle alone: the counters runs' parsed
    # readings and the heavy runs' raw output, with the code ingest builds them with.
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    _counters(lease, "2026-11-02 10:00", [0, 400 * GB, 1000 * GB])
    _counters(lease, "2026-11-02 10:00", [0, 10 * GB, 30 * GB], node="n2")
    _iperf3(lease, "2026-11-02 10:06")
    _invoice(lease)
    settings.AUDIT_SIGNING_KEY = str(tmp_path / "audit.pem")
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER, include_raw=True)
    mismatches, notes = audit.verify_report(doc, audit.published_key_info())
    assert mismatches == []
    assert "traffic: 2 sample(s) rebuilt from the counters runs" in notes
    bundle = doc["bundle"]
    rebuilt = traffic.rebuild(bundle)
    assert rebuilt.problems == [] and rebuilt.taken_as_stated == 0
    assert [(s.slot_at, s.seconds, s.bytes) for s in rebuilt.samples] == [
        (parse_instant(s["slot_at"]), s["seconds"], int(s["tx_bytes"]))
        for s in bundle["traffic_samples"]
    ]
    # 10:05: n1 600 GB - the probe, n2 20 GB.
    assert int(bundle["traffic_samples"][1]["tx_bytes"]) == 620 * GB - IPERF3_BYTES
    [probe] = [run for run in bundle["runs"] if run["content"]["tool"] == "iperf3"]
    assert probe["sent_bytes"] == {"n1": IPERF3_BYTES}


# --- the ledger: API and portal ------------------------------------------------------------


@pytest.fixture
def taxed():  # type: ignore[no-untyped-def]
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    _counters(lease, "2026-11-02 10:00", [0, 400 * GB, 1000 * GB])
    run = _iperf3(lease, "2026-11-02 10:06")
    ingest_all(notify=False)
    return lease, run


def test_the_api_lists_each_probe_run_and_another_tenant_gets_404(taxed):
    # 2,154,299,392 B over 15 s (10:06:05 to 10:06:20); at ¥0.50/GB: 1.077149696 -> ¥1.08.
    lease, run = taxed
    viewer = APIClient()
    viewer.force_authenticate(MembershipFactory(tenant=lease.tenant, role=Role.VIEWER).user)
    url = f"/api/v1/leases/{lease.pk}/probe-tax/"
    response = viewer.get(url, {"period": NOVEMBER})
    assert response.status_code == 200
    body = response.json()
    assert body["lease"] == lease.reference and body["period"] == NOVEMBER
    [item] = body["runs"]
    assert item["id"] == run.pk and item["tool"] == "iperf3" and item["target"] == "n1>n2"
    assert (item["bytes"], item["bytes_by_node"], item["seconds"]) == (
        IPERF3_BYTES,
        {"n1": IPERF3_BYTES},
        15,
    )
    assert item["cost_cny"] == "1.08" and item["estimated"] is False
    assert body["totals"] == {
        "runs": 1,
        "bytes": IPERF3_BYTES,
        "seconds": 15,
        "cost_cny": "1.08",
        "deferred_runs": 0,
    }
    assert viewer.get(url, {"period": "2026-13"}).status_code == 400
    stranger = APIClient()
    stranger.force_authenticate(MembershipFactory(role=Role.ADMIN).user)
    assert stranger.get(url, {"period": NOVEMBER}).status_code == 404


@pytest.mark.parametrize(
    ("language", "heading", "traffic"),
    [
        ("en", "Probe tax in 2026-11", "Probe traffic kept out"),
        ("zh-hans", "2026-11 的探测流量", "未计费的探测流量"),
    ],
)
def test_the_lease_page_shows_the_probe_tax_card(taxed, language, heading, traffic):
    lease, _run = taxed
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(MembershipFactory(tenant=lease.tenant, role=Role.VIEWER).user)
    with time_machine.travel(at("2026-11-20 12:00"), tick=False):
        page = client.get(reverse("portal:lease", args=[lease.pk]), {"period": NOVEMBER})
    assert page.status_code == 200
    html = page.content.decode()
    card = html[html.index('<section id="probe-tax">') :]
    card = card[: card.index("</section>")]
    assert heading in card and traffic in card
    assert "2.154 GB" in card and f">{IPERF3_BYTES}<" in card and "<code>n1&gt;n2</code>" in card
    if language == "zh-hans":
        assert english_words(card, {lease.reference}) == []


# --- heavy probes wait while the lease is busy ------------------------------------------------

NOW = at("2026-11-29 10:02")


def _dispatch_lease(**terms):  # type: ignore[no-untyped-def]
    leaf = SwitchFactory(fabric__site=SiteFactory(code="sz"))
    members = NodeFactory.create_batch(2, leaf_switch=leaf)
    for index, node in enumerate(members):
        NicPortFactory(node=node, device="data0", netdev="data0", address=f"198.18.0.{index + 11}")
    lease = make_lease(nodes=members, starts_at=at("2026-11-01 00:00"), **terms)
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=NOW)
    return lease


@pytest.mark.parametrize(
    ("sent_gb", "state", "reason"),
    [
        # 5,475 GB in 300 s = 146 Gbit/s of 2 x 100 contracted: 73.0 %, not below 30 %.
        (
            5475,
            RunState.SKIPPED,
            "deferred: the lease was busy, 73.0 % of its contracted bandwidth, above 30 %",
        ),
        # 750 GB in 300 s = 20 Gbit/s: 10.0 %, idle: the probe runs.
        (750, RunState.SCHEDULED, ""),
    ],
)
def test_a_busy_lease_defers_its_heavy_probes_and_they_count_as_excluded(sent_gb, state, reason):
    lease = _dispatch_lease(probe_idle_below_percent=D("30"))
    _counters(lease, "2026-11-29 09:50", [0, sent_gb * GB])
    ingest_all(notify=False)
    probe_services.dispatch_due(now=NOW, enqueue=False)
    scheduled = ProbeRun.objects.filter(lease=lease, trigger=Trigger.SCHEDULE)
    for kind in ("throughput", "latency", "collective"):
        runs = scheduled.filter(kind=kind)
        assert set(runs.values_list("state", "error")) == {(state, reason)}
    assert scheduled.get(kind="link", pattern="sweep").state == RunState.SCHEDULED
    # Acceptance runs are not deferred: the lease's baseline.
    acceptance = ProbeRun.objects.filter(lease=lease, trigger=Trigger.ACCEPTANCE, kind="throughput")
    assert set(acceptance.values_list("state", flat=True)) == {RunState.SCHEDULED}
    if state == RunState.SKIPPED:
        ingest_all(notify=False)
        hour = at("2026-11-29 10:00")
        rollup = HourlyRollup.objects.get(lease=lease, kind="throughput", hour=hour)
        # Both throughput runs (the ring pair and the same-leaf control) are excluded.
        assert (rollup.excluded, rollup.unknown, rollup.failed) == (2, 0, 0)


def test_inside_an_agreed_window_a_busy_lease_is_probed():
    # Sunday 09:00-11:00 Shanghai is agreed: at 10:02 the probe runs although 73 % busy.
    lease = _dispatch_lease(
        probe_idle_below_percent=D("30"),
        heavy_probe_windows=[{"weekday": 6, "start": "09:00", "end": "11:00"}],
    )
    _counters(lease, "2026-11-29 09:50", [0, 5475 * GB])
    ingest_all(notify=False)
    probe_services.dispatch_due(now=NOW, enqueue=False)
    runs = ProbeRun.objects.filter(lease=lease, trigger=Trigger.SCHEDULE, kind="throughput")
    assert set(runs.values_list("state", flat=True)) == {RunState.SCHEDULED}


@pytest.mark.parametrize(
    ("last_second", "turn"),
    # Shanghai wall-clock times (tests.factories.at): 16:00 UTC the day before.
    [("2026-11-30 23:59:20", "2026-12-01 00:00"), ("2026-12-31 23:59:20", "2027-01-01 00:00")],
    ids=["december-in-shanghai", "new-year-in-shanghai"],
)
def test_a_probe_counts_in_the_month_it_started_in_on_the_tenants_clock(last_second, turn):
    """The ledger cuts at the tenant's midnight (16:00 UTC the day before in Shanghai): a
    probe that started 35 s before it is last month's, one that started 5 s after is this
    month's."""
    lease = _lease()
    before_turn = _iperf3(lease, last_second)  # started 15:59:25 UTC
    after_turn = _iperf3(lease, turn)  # started 16:00:05 UTC
    month = Period.containing(at(turn), "Asia/Shanghai")
    previous = probe_tax_of(lease=lease, period=str(month.previous))
    assert [item.run_id for item in previous.runs] == [before_turn.pk]
    assert [item.run_id for item in probe_tax_of(lease=lease, period=str(month)).runs] == [
        after_turn.pk
    ]
