"""Monthly partitions, archives and restores on the real PostgreSQL (issue 16): months made
ahead, rows caught early moved into their month, a month archived to a file and detached,
its audit bundle built from the archive and verified, the file checked offline and the
month re-attached."""

import csv
import hashlib
import io
import json
import re
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import zstandard
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchmarks import selectors
from benchmarks.missed_slots import check_results_arriving
from benchmarks.models import ProbeRun, RawOutput
from billing import audit, checkpoints, invoicing
from billing.ingest import ingest_all
from billing.models import TrafficSample
from common import archives, partitions
from common.models import PartitionArchive
from gpulease_verify import archive as offline
from gpulease_verify.bundle import verify_report
from gpulease_verify.periods import Period
from leases import services
from leases.choices import LeaseStatus
from tests.common.test_progress import stderr_of
from tests.conftest import require
from tests.factories import NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent.parent / "benchmarks/fixtures"
IPERF3 = FIXTURES / "iperf3/tcp_3.14_macos.json"
ETHTOOL = FIXTURES / "ethtool/speed_100g_no_link_line_netdev_quote.txt"
NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-01 02:00")
LATER = at("2028-03-05 10:00")  # November 2026 is long past the retention


@pytest.fixture(autouse=True)
def _postgresql():  # type: ignore[no-untyped-def]
    require(connection.vendor == "postgresql", "partitions are PostgreSQL's")


def month_rows(table: str, month: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {table} WHERE {partitions.BY_NAME[table].column} >= %s"
            f" AND {partitions.BY_NAME[table].column} < %s",
            list(Period.parse(month).bounds("UTC")),
        )
        return cursor.fetchone()[0]


def beat_made_months() -> None:
    """Every month's partitions from October 2026 on, as beat would have made them."""
    partitions.ensure(now=at("2026-10-15 00:00"), ahead=3)


def attached(month: str) -> set[str]:
    return {p.name for p in partitions.partitions() if str(p.month) == month}


@pytest.fixture
def november():  # type: ignore[no-untyped-def]
    """A per-GB lease's November on its nodes: 10 hourly throughput runs (one failed),
    link checks, and 6 counters runs of n1 whose traffic samples ingest makes; the
    invoice drafted and the month's chain checkpoint signed."""
    nodes = NodeFactory.create_batch(2)
    lease = make_lease(nodes=nodes, billing_mode="per_gb", price_per_gb="0.50")
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    for hour in range(10):
        make_run(
            lease,
            slot=at("2026-11-02 10:00") + timedelta(hours=hour),
            verdict="fail" if hour == 3 else "pass",
            measured_bps=(40 if hour == 3 else 98) * 10**9,
            nodes=nodes,
        )
    for minute in (0, 5, 10):
        for node in nodes:
            make_run(
                lease,
                kind="link",
                target=node.hostname,
                pattern="node",
                slot=at("2026-11-03 08:00") + timedelta(minutes=minute),
                cadence_s=300,
                nodes=[node],
            )
    for index in range(6):
        make_run(
            lease,
            kind="counters",
            target=nodes[0].hostname,
            pattern="node",
            slot=at("2026-11-20 12:00") + timedelta(minutes=5 * index),
            cadence_s=300,
            verdict="none",
            nodes=[nodes[0]],
            parsed={
                "ports": [{"section": "counters data0", "name": "data0", "tx_bytes": index * 10**9}]
            },
        )
    # What the tools printed, as the probes store it: once per distinct text
    first = ProbeRun.objects.filter(lease=lease, kind="throughput").order_by("slot_at").first()
    first.raw_output = IPERF3.read_text()
    first.stderr = "iperf3: warning - this system does not seem to support IPv6\n"
    first.save()
    for run in ProbeRun.objects.filter(lease=lease, kind="link"):
        run.raw_output = ETHTOOL.read_text()  # the same for every healthy check
        run.save()
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER)
    return lease


def test_the_migration_made_months_ahead_and_a_default_for_anything_else():
    for table in partitions.TABLES:
        months = [p.month for p in partitions.partitions(table.name)]
        assert months[-1] is None  # the default partition
        now = Period.containing(timezone.now(), "UTC")  # when the test database migrated
        assert {now, now.shift(3)} <= set(months)


def test_a_month_caught_early_by_the_default_partition_moves_into_its_own(november):
    runs = ProbeRun.objects.filter(lease=november).count()
    assert runs == 10 + 6 + 6
    # November (UTC) was not made ahead: its rows wait in the default partition
    assert "benchmarks_proberun_p2026_11" not in attached(NOVEMBER)
    made = partitions.ensure(now=at("2026-12-15 00:00"), ahead=1)
    assert "benchmarks_proberun_p2026_11" in made
    assert "billing_trafficsample_p2026_11" in made
    assert ProbeRun.objects.filter(lease=november).count() == runs
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM benchmarks_proberun_p2026_11")
        assert cursor.fetchone()[0] == runs
        cursor.execute("SELECT count(*) FROM benchmarks_proberun_default")
        assert cursor.fetchone()[0] == 0
    assert partitions.ensure(now=at("2026-12-15 00:00"), ahead=1) == []  # made once


@pytest.mark.parametrize(
    "instant",
    ["2026-12-31 23:59:59.999999+00:00", "2027-01-01 00:00:00+00:00", "2027-03-01 00:00:00+00:00"],
)
def test_a_row_at_a_month_boundary_lands_in_the_month_it_starts(instant):
    when = datetime.fromisoformat(instant)
    lease = make_lease()
    run = make_run(lease, slot=when)
    month = Period.containing(when, "UTC")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM benchmarks_proberun WHERE id = %s", [run.pk]
        )
        assert cursor.fetchone()[0] == partitions.partition_name("benchmarks_proberun", month)


def test_hot_reads_prune_to_the_months_they_need(november):
    beat_made_months()
    start, end = Period.parse(NOVEMBER).bounds("Asia/Shanghai")
    from billing.metering import samples_in

    plans = {
        "runs of a lease's month": ProbeRun.objects.filter(
            lease=november, slot_at__gte=start, slot_at__lt=end
        ),
        "traffic of a lease's month": samples_in(lease_id=november.pk, start=start, end=end),
    }
    for what, queryset in plans.items():
        plan = queryset.explain()
        scanned = set(re.findall(r"(\w+_p\d{4}_\d{2}|\w+_default)", plan))
        # Shanghai's November starts at 16:00 UTC on October 31st: two UTC months
        assert all(name.endswith(("_p2026_10", "_p2026_11")) for name in scanned), (what, plan)
        assert any(name.endswith("_p2026_11") for name in scanned), (what, plan)


def scanned_by(fn) -> set[str]:  # type: ignore[no-untyped-def]
    """The run partitions that the queries ``fn`` makes of runs read, from their plans."""
    with CaptureQueriesContext(connection) as made:
        fn()
    names: set[str] = set()
    with connection.cursor() as cursor:
        for query in made.captured_queries:
            if "benchmarks_proberun" in query["sql"] and query["sql"].startswith("SELECT"):
                cursor.execute("EXPLAIN " + query["sql"])
                plan = "\n".join(row[0] for row in cursor.fetchall())
                names |= set(re.findall(r"benchmarks_proberun_(p\d{4}_\d{2}|default)", plan))
    return names


def test_a_restore_shows_its_progress_on_a_terminal_and_a_bundle_from_the_archive_does_not(
    november, tmp_path, monkeypatch
):
    beat_made_months()
    record = archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=LATER)
    monkeypatch.delenv("CI", raising=False)
    # Built inside a request, from the file: no bar even on a terminal
    built = stderr_of(
        monkeypatch,
        lambda: audit.signed_bundle(lease=november, period=NOVEMBER, now=AFTER_NOVEMBER),
        terminal=True,
    )
    assert built == "", repr(built)
    monkeypatch.delenv("CI", raising=False)
    shown = stderr_of(
        monkeypatch, lambda: archives.restore(Path(record.path), now=LATER), terminal=True
    )
    assert "\rrestore 2026-11: " in shown and "file" in shown, repr(shown)
    assert month_rows("benchmarks_proberun", NOVEMBER) == 22


def test_reads_by_run_time_bound_the_slot_and_skip_older_months(november):
    # Months from June: a November link check's previous reading and the self-check in
    # November read at most October and November (a slot lies at most 31 days before its
    # run), never June to September.
    partitions.ensure(now=at("2026-06-15 00:00"), ahead=8)
    check = ProbeRun.objects.filter(lease=november, kind="link").order_by("slot_at").last()
    previous = scanned_by(lambda: selectors.previous_link_down(check, [check.target]))
    assert previous and previous <= {"p2026_10", "p2026_11"}, previous
    arriving = scanned_by(lambda: check_results_arriving(now=at("2026-11-20 12:00")))
    assert arriving and not arriving & {"p2026_06", "p2026_07", "p2026_08", "p2026_09"}, arriving


def test_an_archived_month_leaves_the_database_and_its_bundle_is_built_from_the_archive(
    november, tmp_path, capsys
):
    beat_made_months()
    before = audit.signed_bundle(
        lease=november, period=NOVEMBER, now=AFTER_NOVEMBER, include_raw=True
    )
    assert RawOutput.objects.count() == 3  # an iperf3 output, its stderr, one ethtool output
    november_runs = month_rows("benchmarks_proberun", NOVEMBER)
    samples = month_rows("billing_trafficsample", NOVEMBER)
    assert november_runs == 22 and samples > 0

    record = archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=LATER)

    path = tmp_path / "gpulease-archive-2026-11.tar"
    assert record.path == str(path) and path.is_file()
    assert record.rows["benchmarks_proberun"] == november_runs
    assert record.rows["billing_trafficsample"] == samples
    assert record.rows["benchmarks_proberun_nodes"] == 10 * 2 + 6 + 6
    assert record.rows["benchmarks_rawoutput"] == 3
    assert attached(NOVEMBER) == set()
    assert month_rows("benchmarks_proberun", NOVEMBER) == 0
    assert month_rows("billing_trafficsample", NOVEMBER) == 0

    # The bundle of an archived month comes from its file and is the same document
    RawOutput.objects.all().delete()  # the texts are in the archive too
    after = audit.signed_bundle(
        lease=november, period=NOVEMBER, now=AFTER_NOVEMBER, include_raw=True
    )
    assert after["bundle"] == before["bundle"]
    assert any(run.get("stderr") for run in after["bundle"]["runs"])
    plain = audit.signed_bundle(lease=november, period=NOVEMBER, now=AFTER_NOVEMBER)
    mismatches, _notes = verify_report(plain, audit.published_key_info()["public_key_pem"])
    assert mismatches == []
    assert month_rows("benchmarks_proberun", NOVEMBER) == 0  # loaded for the bundle only

    # ... and the file checks out offline against the published key
    key = tmp_path / "provider.pem"
    key.write_text(audit.published_key_info()["public_key_pem"])
    assert offline.run([str(path), "--public-key", str(key)]) == 0
    out = capsys.readouterr().out
    assert "benchmarks_proberun.csv.zst: 22 rows" in out
    assert "22 run(s): each row gives its run_hash" in out
    assert "the signed checkpoint of 2026-11 names link" in out
    assert out.rstrip().endswith("the archive agrees with its manifest and its checkpoints")

    # Re-attached: the rows are back, with their nodes, and the bundle is unchanged
    restored = archives.restore(path, now=LATER)
    assert restored.pk == record.pk and restored.restored_at == LATER
    assert month_rows("benchmarks_proberun", NOVEMBER) == november_runs
    assert month_rows("billing_trafficsample", NOVEMBER) == samples
    run = ProbeRun.objects.filter(lease=november, kind="throughput").first()
    assert run.nodes.count() == 2
    assert RawOutput.objects.count() == 3
    again = audit.signed_bundle(
        lease=november, period=NOVEMBER, now=AFTER_NOVEMBER, include_raw=True
    )
    assert again["bundle"] == before["bundle"]
    assert TrafficSample.objects.filter(lease=november).count() == samples


def test_archiving_refuses_a_month_not_over_and_restoring_one_attached(november, tmp_path):
    beat_made_months()
    with pytest.raises(archives.NotArchivable, match="not over yet"):
        archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=AFTER_NOVEMBER)
    archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=LATER)
    with pytest.raises(archives.NotArchivable, match="archived"):
        archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=LATER)
    archives.restore(tmp_path / "gpulease-archive-2026-11.tar", now=LATER)
    with pytest.raises(archives.NotArchivable, match="attached already"):
        archives.restore(tmp_path / "gpulease-archive-2026-11.tar", now=LATER)


def test_retention_archives_only_months_older_than_it(november, tmp_path, settings):
    beat_made_months()
    settings.PARTITION_RETENTION_MONTHS = 13
    # November 2026 (UTC) ended on December 1st 2026: 13 whole months later is 2028-01
    last_kept = datetime(2027, 12, 31, 23, 59, 59, tzinfo=UTC)
    first_due = datetime(2028, 1, 1, tzinfo=UTC)
    assert Period.parse(NOVEMBER) not in archives.due(now=last_kept)
    assert Period.parse(NOVEMBER) in archives.due(now=first_due)
    done = archives.archive_due(now=first_due, directory=tmp_path)
    assert NOVEMBER in done
    assert PartitionArchive.objects.filter(month=NOVEMBER, restored_at=None).exists()


def _repack(path, change):  # type: ignore[no-untyped-def]
    """Rewrite the archive's runs with ``change`` and a manifest whose hashes and counts
    match: what an insider with the file and no signing key could do."""
    with tarfile.open(path) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    manifest = json.loads(files["manifest.json"])
    member = "benchmarks_proberun.csv.zst"
    text = zstandard.ZstdDecompressor().decompressobj().decompress(files[member]).decode()
    text = change(text)
    packed = zstandard.ZstdCompressor().compress(text.encode())
    files[member] = packed
    manifest["files"][member]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    manifest["files"][member]["file_sha256"] = hashlib.sha256(packed).hexdigest()
    files["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_tampered_archive_is_named_offline(november, tmp_path, capsys):
    beat_made_months()
    failed = ProbeRun.objects.get(lease=november, verdict="fail")
    archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=LATER)
    path = tmp_path / "gpulease-archive-2026-11.tar"
    key = tmp_path / "provider.pem"
    key.write_text(audit.published_key_info()["public_key_pem"])

    flipped = tmp_path / "flipped.tar"
    with tarfile.open(path) as tar:
        runs = tar.getmember("benchmarks_proberun.csv.zst")
    data = bytearray(path.read_bytes())
    data[runs.offset_data + runs.size // 2] ^= 0xFF  # one bit pattern inside the runs' file
    flipped.write_bytes(bytes(data))
    assert offline.run([str(flipped), "--public-key", str(key)]) == 1
    assert "MISMATCH" in capsys.readouterr().out

    # A failed throughput run made to pass, with hashes recomputed in the manifest: its row
    # no longer gives its hash
    _repack(path, lambda text: text.replace(",fail,", ",pass,", 1))
    assert offline.run([str(path), "--public-key", str(key)]) == 1
    assert (
        f"MISMATCH: run {failed.pk} (lease {november.pk}, link {failed.chain_index}): its row "
        "does not give its run_hash: it was changed after it was linked"
    ) in capsys.readouterr().out
    # ... and its bundle from the archive breaks the chain at that run
    bundle = audit.signed_bundle(lease=november, period=NOVEMBER, now=AFTER_NOVEMBER)
    mismatches, _ = verify_report(bundle, audit.published_key_info()["public_key_pem"])
    assert any("chain" in m for m in mismatches), mismatches

    # A run's hash replaced: the next link no longer follows it
    def rehash(text: str) -> str:
        rows = [r for r in csv.DictReader(io.StringIO(text, newline="")) if r["chain_index"]]
        first = min(rows, key=lambda r: int(r["chain_index"]))
        return text.replace(
            f"{first['prev_hash']},{first['run_hash']}", f"{first['prev_hash']},{'0' * 64}"
        )

    _repack(path, rehash)
    assert offline.run([str(path), "--public-key", str(key)]) == 1
    assert "the chain is broken there" in capsys.readouterr().out


def test_the_partitions_command_lists_archives_and_restores(november, tmp_path, capsys):
    beat_made_months()
    archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=LATER)
    call_command("partitions", "list", "--json")
    listed = json.loads(capsys.readouterr().out)
    assert [a["month"] for a in listed["archives"]] == [NOVEMBER]
    assert not any(p["month"] == NOVEMBER for p in listed["partitions"])
    path = str(tmp_path / "gpulease-archive-2026-11.tar")
    call_command("partitions", "check", path)
    assert "agrees with its manifest" in capsys.readouterr().out
    call_command("partitions", "restore", path)
    assert f"restored {NOVEMBER}" in capsys.readouterr().out
    assert month_rows("benchmarks_proberun", NOVEMBER) == 22


def test_a_bundle_loads_the_archived_month_where_a_metering_gap_began(tmp_path):
    # n1 read at 10:00 and 10:05 on 20 October (0 and 1 GB), then not until 10:05 and
    # 10:10 on 3 December (1 + 12,672 and 12,674 GB): a metering gap of 44 days (12,672
    # slots of 5 minutes, 1 GB each), billed by time. With October and November archived,
    # December's bundle needs the reading of 20 October 10:05 that opens the gap: it loads
    # October from its file too, not only the three days before December, and verifies.
    node = NodeFactory(hostname="n1")
    lease = make_lease(
        nodes=[node], starts_at=at("2026-10-01 00:00"), billing_mode="per_gb", price_per_gb="1"
    )
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-10-01 00:00"))
    for slot, sent in (
        ("2026-10-20 10:00", 0),
        ("2026-10-20 10:05", 1),
        ("2026-12-03 10:05", 12673),
        ("2026-12-03 10:10", 12674),
    ):
        make_run(
            lease,
            kind="counters",
            target="n1",
            pattern="node",
            slot=at(slot),
            cadence_s=300,
            verdict="none",
            nodes=[node],
            parsed={
                "ports": [{"section": "counters data0", "name": "data0", "tx_bytes": sent * 10**9}]
            },
        )
    ingest_all(notify=False)
    december = at("2026-12-04 00:00")
    before = audit.signed_bundle(lease=lease, period="2026-12", now=december)  # links the runs
    beat_made_months()  # October's and November's rows move out of the default partition
    for month in ("2026-10", "2026-11"):
        archives.archive_month(Period.parse(month), directory=tmp_path, now=LATER)
    after = audit.signed_bundle(lease=lease, period="2026-12", now=december)
    assert after["bundle"] == before["bundle"]
    mismatches, notes = verify_report(after, audit.published_key_info()["public_key_pem"])
    assert mismatches == []
    assert any(
        note.startswith("traffic: metering gap, n1 not read from 2026-10-20") for note in notes
    )
