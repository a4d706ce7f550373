"""The verifier rebuilds a bundle's traffic samples from its chained runs (the counters
readings, with those just outside the period, and the heavy probes' bytes) and recomputes
per-GB and 95计费 lines from them, so an insider who edits the derived samples, or the
probe bytes ingest recorded, and lets the server re-sign is named. Real path: runs, ingest,
the bundle the server builds and signs, then the standalone verifier's report."""

from decimal import Decimal as D

import pytest

from benchmarks.models import ProbeRun
from billing import audit
from billing.ingest import ingest_all
from billing.models import TrafficSample
from leases import services
from leases.choices import BillingMode, LeaseStatus
from tests.billing.test_probe_tax import (
    AFTER_NOVEMBER,
    GB,
    IPERF3_BYTES,
    NOVEMBER,
    _counters,
    _iperf3,
    _lease,
)
from tests.factories import NodeFactory, TenantFactory, at, make_lease

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _key(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.AUDIT_SIGNING_KEY = str(tmp_path / "audit.pem")


def _report(lease, *, raw: bool = False):  # type: ignore[no-untyped-def]
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER, include_raw=raw)
    return doc["bundle"], *audit.verify_report(doc, audit.published_key_info())


def _per_gb():  # type: ignore[no-untyped-def]
    # n1: 0, 400 GB, 1,000 GB at 10:00, 10:05, 10:10 (Shanghai): samples of 400 and 600 GB.
    lease = _lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    _counters(lease, "2026-11-02 10:00", [0, 400 * GB, 1000 * GB])
    return lease


def test_a_sample_raised_in_the_database_and_re_signed_is_named_with_its_line():
    lease = _per_gb()
    ingest_all(notify=False)
    assert _report(lease)[1] == []
    # The insider adds 100 GB to the 10:05 sample; the bundle's invoice lines follow it
    # (1,100 GB x ¥0.50 = ¥550.00) and the server signs: every figure agrees with every
    # other, only the counters say otherwise.
    TrafficSample.objects.filter(lease=lease, slot_at=at("2026-11-02 10:05")).update(
        tx_bytes=700 * GB
    )
    bundle, mismatches, _notes = _report(lease)
    [line] = [line for line in bundle["invoice"]["lines"] if line["kind"] == "usage_gb"]
    assert line["amount"] == "550.00"
    assert mismatches[0] == (
        "traffic sample 2026-11-02T02:05:00.000000Z: the bundle says 700000000000 B over "
        "300 s from 1 node(s), 0 reset(s), 0 wrap(s), rebuilt from the runs 600000000000 B "
        "over 300 s from 1 node(s), 0 reset(s), 0 wrap(s)"
    )
    assert any("550.00" in m and "500.00" in m for m in mismatches[1:]), mismatches


def test_a_sample_deleted_or_invented_is_named():
    lease = _per_gb()
    ingest_all(notify=False)
    TrafficSample.objects.filter(lease=lease, slot_at=at("2026-11-02 10:00")).delete()
    TrafficSample.objects.create(
        lease=lease, slot_at=at("2026-11-02 11:00"), seconds=300, tx_bytes=GB, nodes=1
    )
    _bundle, mismatches, _notes = _report(lease)
    assert mismatches[:2] == [
        "traffic sample 2026-11-02T02:00:00.000000Z: the bundle says no sample, rebuilt from "
        "the runs 400000000000 B over 300 s from 1 node(s), 0 reset(s), 0 wrap(s)",
        "traffic sample 2026-11-02T03:00:00.000000Z: the bundle says 1000000000 B over 300 s "
        "from 1 node(s), 0 reset(s), 0 wrap(s), rebuilt from the runs no sample",
    ]


def test_probe_bytes_rewritten_before_ingest_are_re_read_from_the_output_with_raw_1():
    # The insider records that the 10:06 iperf3 run sent nothing, so the tenant pays for
    # gpulease's own probe: 1,000 GB is billed instead of 1,000 GB - 2,154,299,392 B.
    lease = _per_gb()
    probe = _iperf3(lease, "2026-11-02 10:06")
    ProbeRun.objects.filter(pk=probe.pk).update(sent_bytes={})
    ingest_all(notify=False)
    assert TrafficSample.objects.get(lease=lease, slot_at=at("2026-11-02 10:05")).tx_bytes == (
        600 * GB
    )
    bundle, mismatches, _notes = _report(lease, raw=True)
    [entry] = [run for run in bundle["runs"] if run["id"] == probe.pk]
    assert mismatches[0] == (
        f"run {probe.pk} (chain link {entry['chain_index']}): the bundle says its probe sent "
        f"{{}} B, re-read from its output {{'n1': {IPERF3_BYTES}}} B"
    )
    assert mismatches[1] == (
        "traffic sample 2026-11-02T02:05:00.000000Z: the bundle says 600000000000 B over "
        "300 s from 1 node(s), 0 reset(s), 0 wrap(s), rebuilt from the runs "
        f"{600 * GB - IPERF3_BYTES} B over 300 s from 1 node(s), 0 reset(s), 0 wrap(s)"
    )
    # Without raw outputs an iperf3 run's bytes cannot be re-read: the verifier takes the
    # stated figure and says so.
    _bundle, mismatches, notes = _report(lease)
    assert mismatches == []
    assert (
        "traffic: 2 sample(s) rebuilt from the counters runs; the probe bytes of 1 iperf3 "
        "run(s) taken as the bundle states them (fetch it with raw=1 to re-read them)"
    ) in notes


def test_the_readings_just_outside_the_period_are_in_the_bundle_and_close_its_edges():
    # n1 read every 5 minutes around both edges of November, Shanghai time, with the
    # readings at 1 November 00:00 and 1 December 00:00 missing:
    #   31 Oct 23:55 -> 1 Nov 00:05: 10 GB over 10 minutes, 5 GB to October, 5 GB to November;
    #   30 Nov 23:55 -> 1 Dec 00:05: 20 GB over 10 minutes, 10 GB to each month.
    # November's samples need the October and December readings; the chain links them
    # first and last, outside the stretch of November's own runs.
    node = NodeFactory(hostname="n1")
    lease = make_lease(
        tenant=TenantFactory(),
        nodes=[node],
        starts_at=at("2026-10-01 00:00"),
        billing_mode=BillingMode.PER_GB,
        price_per_gb=D("1.0000"),
    )
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-10-01"))
    _counters(lease, "2026-10-31 23:55", [0])
    _counters(lease, "2026-11-01 00:05", [10 * GB, 11 * GB])
    _counters(lease, "2026-11-30 23:50", [100 * GB, 101 * GB])
    _counters(lease, "2026-12-01 00:05", [121 * GB])
    ingest_all(notify=False)
    bundle, mismatches, _notes = _report(lease)
    assert mismatches == []
    outside = sorted(run["content"]["slot_at"] for run in bundle["runs"] if not run["in_period"])
    assert outside == ["2026-10-31T15:55:00.000000Z", "2026-11-30T16:05:00.000000Z"]
    samples = bundle["traffic_samples"]
    first, last = samples[0], samples[-1]
    assert (first["slot_at"], int(first["tx_bytes"])) == ("2026-10-31T16:00:00.000000Z", 5 * GB)
    assert (last["slot_at"], int(last["tx_bytes"])) == ("2026-11-30T15:55:00.000000Z", 10 * GB)
    # November: 5 + 1 GB, the 89 GB between the readings of 1 Nov 00:10 and 30 Nov 23:50
    # (a metering gap, more than READING_REACH: billed by time all the same), then 1 + 10 GB.
    assert sum(int(s["tx_bytes"]) for s in samples) == (5 + 1 + 89 + 1 + 10) * GB
    [line] = [line for line in bundle["invoice"]["lines"] if line["kind"] == "usage_gb"]
    assert line["amount"] == "106.00"
