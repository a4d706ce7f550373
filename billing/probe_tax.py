"""The probe tax ledger: what gpulease's own heavy probes sent on a lease in a month, kept
out of its metering (``gpulease_verify.probe_tax``, ``gpulease_verify.traffic``).

Per run whose start lies in the month (tenant's clock): the bytes each node sent, the
seconds it ran (``finished_at - started_at``) and what those bytes would have cost at the
price per GB of the terms the run ran under (Decimal, half-up to 0.01; none when the terms
name no price per GB). Heavy probes deferred because the lease was busy are counted too:
they never ran, so they cost nothing and are never counted against the provider.

The totals are added up in the database, per price (a month of a lease's heavy probes is
thousands of runs); the runs are listed whole for the API and the report, and only the
first few on the lease page."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import BooleanField, Count, ExpressionWrapper, Q, Sum

from benchmarks import selectors as run_selectors
from benchmarks import services as probe_services
from benchmarks.choices import RunState
from benchmarks.models import ProbeRun, slot_reach
from benchmarks.models.outputs import load_texts
from common.dbfunctions import JsonValuesSum, WholeSeconds
from gpulease_verify import probe_tax
from gpulease_verify.calculations import traffic_charge
from gpulease_verify.canonical import iso_utc
from gpulease_verify.parsers import ParseError
from gpulease_verify.periods import Period
from leases.choices import HEAVY_PROBE_KINDS, ProbeKind
from leases.models import Lease
from leases.selectors import terms_of

log = logging.getLogger(__name__)

DEFERRED = "deferred:"
UNREAD_IDS_SHOWN = 5  # run ids a warning names before "and N more"
ZERO = Decimal("0.00")


@dataclass(frozen=True)
class TaxedRun:
    run_id: int
    kind: str
    tool: str
    target: str
    trigger: str
    started_at: datetime
    finished_at: datetime
    bytes_by_node: dict[str, int]
    price_per_gb: Decimal | None

    @property
    def kind_label(self) -> str:
        return str(ProbeKind(self.kind).label)

    @property
    def seconds(self) -> int:
        return max(0, int((self.finished_at - self.started_at).total_seconds()))

    @property
    def estimated(self) -> bool:
        return self.tool in probe_tax.ESTIMATED

    @property
    def cost(self) -> Decimal | None:
        if self.price_per_gb is None:
            return None
        return traffic_charge(total_bytes=self.bytes, price_per_gb=self.price_per_gb)

    @property
    def bytes(self) -> int:
        return sum(self.bytes_by_node.values())


@dataclass(frozen=True)
class PriceTotals:
    """The ledger's runs taxed at one price per GB (None: their terms name none)."""

    price_per_gb: Decimal | None
    runs: int
    bytes: int
    seconds: int


@dataclass
class ProbeTax:
    lease: Lease
    period: str
    # every run of the month, or its first ones (``probe_tax_of(listed=...)``)
    runs: list[TaxedRun] = field(default_factory=list)
    totals: list[PriceTotals] = field(default_factory=list)  # of every run, by price
    deferred: int = 0

    @property
    def count(self) -> int:
        return sum(group.runs for group in self.totals)

    @property
    def bytes(self) -> int:
        return sum(group.bytes for group in self.totals)

    @property
    def seconds(self) -> int:
        return sum(group.seconds for group in self.totals)

    @property
    def cost(self) -> Decimal | None:
        """Per price: the bytes of its runs together x the price, half-up to 0.01 (as the
        invoice rounds traffic), added up."""
        priced = [group for group in self.totals if group.price_per_gb is not None]
        if not priced:
            return None
        charges = (traffic_charge(total_bytes=g.bytes, price_per_gb=g.price_per_gb) for g in priced)
        return sum(charges, ZERO)

    @property
    def unlisted(self) -> int:
        """Runs counted in the totals but not listed in ``runs``."""
        return self.count - len(self.runs)

    @property
    def gigabytes(self) -> Decimal:
        return Decimal(self.bytes) / 10**9


def _price(price: Decimal | None) -> Decimal | None:
    return price if price is not None and price > 0 else None


# What the ledger reads of a run: a month of a lease's heavy probes is thousands of runs,
# read as plain rows (no run instances, no parsed results or texts).
LEDGER_COLUMNS = (
    "pk",
    "kind",
    "tool",
    "target",
    "trigger",
    "started_at",
    "finished_at",
    "sent_bytes",
    "terms__price_per_gb",
    "slot_at",
)


def _read_sent(run: ProbeRun) -> tuple[dict[str, int], str | None]:
    """Node -> the bytes a finished heavy run sent, from what its tool printed
    (``gpulease_verify.probe_tax.bytes_sent``; its texts and ``run.nodes`` loaded), and
    None; empty, with the reason, when its output cannot be read again."""
    try:
        return probe_tax.bytes_sent(
            tool=run.tool,
            state=run.state,
            parsed=run.parsed,
            raw_output=run.raw_output,
            command=run.command,
            target=run.target,
            nodes=[node.hostname for node in run.nodes.all()],
        ), None
    except ParseError as error:
        return {}, str(error)


def taxed(run: ProbeRun) -> bool:
    """Whether the run is one whose bytes the probe tax counts: a finished heavy probe."""
    return (
        run.kind in HEAVY_PROBE_KINDS
        and run.state == RunState.OK
        and run.started_at is not None
        and run.finished_at is not None
    )


def _read_all(keys: Sequence[tuple[int, datetime]]) -> dict[int, dict[str, int]]:
    """Run id -> its bytes read from its output, for runs given as (id, slot); each run
    fetched whole, with its texts and nodes, in three queries."""
    if not keys:
        return {}
    whole = list(run_selectors.runs_keyed(keys).prefetch_related("nodes"))
    load_texts(whole)
    read: dict[int, dict[str, int]] = {}
    unread: dict[str, list[int]] = defaultdict(list)  # reason -> run ids
    for run in whole:
        read[run.pk], reason = _read_sent(run)
        if reason is not None:
            unread[reason].append(run.pk)
    # One line per reason, however many runs: a catch-up over thousands of runs of one
    # kind of unreadable output says so once.
    for reason, ids in unread.items():
        shown = ", ".join(str(pk) for pk in sorted(ids)[:UNREAD_IDS_SHOWN])
        more = f" and {len(ids) - UNREAD_IDS_SHOWN} more" if len(ids) > UNREAD_IDS_SHOWN else ""
        log.warning(
            "%d probe run(s) (%s%s): their probe bytes are not known: %s",
            len(ids),
            shown,
            more,
            reason,
        )
    return read


def record_sent(runs: Iterable[ProbeRun]) -> None:
    """Read the bytes of the taxed runs among ``runs`` that have none recorded and store
    them in ``sent_bytes``. Ingest calls it on each batch it reads, so a run's output is
    parsed for its probe bytes once."""
    missing = [run for run in runs if run.sent_bytes is None and taxed(run)]
    read = _read_all([(run.pk, run.slot_at) for run in missing])
    for run in missing:
        run.sent_bytes = read.get(run.pk, {})
        # one pruned row update each: heavy runs are a few an hour per lease
        probe_services.record_sent_bytes(run=run)


Sent = dict[str, int]  # node -> bytes


def sent_of(rows: Iterable[tuple[int, datetime, Sent | None]]) -> dict[int, Sent]:
    """Run id -> node -> bytes, for taxed runs given as (id, slot, recorded bytes): what
    ingest recorded, or read now from the output of a run ingest has not reached (not
    stored: readers do not write)."""
    rows = list(rows)
    found = {pk: sent for pk, _slot, sent in rows if sent is not None}
    found.update(_read_all([(pk, slot) for pk, slot, sent in rows if sent is None]))
    return found


def probe_tax_of(*, lease: Lease, period: str, listed: int | None = None) -> ProbeTax:
    """The lease's probe tax in ``period`` (module docstring), listing every run or the
    first ``listed``. Four queries (the lease's cadences, the totals by price, the listed
    runs, the deferred count); where ingest has not read some runs yet, one more for them
    and three to read their outputs, which are not stored (readers do not write).

    A run counts when it sent bytes: ingest records ``{}`` for an output it cannot read,
    and such a run is neither counted nor listed."""
    start, end = Period.parse(period).bounds(lease.tenant.time_zone)
    # ingest records {} for an output it cannot read: such runs are left out
    runs = run_selectors.heavy_runs_started_within(
        lease=lease,
        start=start,
        end=end,
        # a heavy run starts before its slot's deadline, at most its cadence after it:
        # this bounds the partitions and the index range read
        slots_from=start - slot_reach(_longest_heavy_cadence(lease)),
    )

    totals: dict[Decimal | None, tuple[int, int, int]] = {}  # price -> runs, bytes, seconds

    def add(price: Decimal | None, runs: int, sent: int, seconds: int) -> None:
        before = totals.get(price, (0, 0, 0))
        totals[price] = (before[0] + runs, before[1] + sent, before[2] + seconds)

    unread = False
    for price, pending, count, sent, seconds in (
        runs.order_by()
        .annotate(
            pending=ExpressionWrapper(Q(sent_bytes__isnull=True), output_field=BooleanField())
        )
        .values("terms__price_per_gb", "pending")
        .annotate(
            count=Count("pk"),
            bytes=Sum(JsonValuesSum("sent_bytes")),
            seconds=Sum(WholeSeconds("finished_at", "started_at")),
        )
        .values_list("terms__price_per_gb", "pending", "count", "bytes", "seconds")
    ):
        if pending:
            unread = True
            continue
        add(_price(price), count, int(sent), seconds)
    # node -> bytes of the runs ingest has not read yet, read from their outputs now
    read_now: dict[int, Sent] = {}
    if unread:
        pending_rows = list(runs.filter(sent_bytes__isnull=True).values_list(*LEDGER_COLUMNS))
        read_now = _read_all([(row[0], row[-1]) for row in pending_rows])
        for row in pending_rows:
            item = _taxed_run(row, read_now.get(row[0], {}))
            if item is not None:
                add(item.price_per_gb, 1, item.bytes, item.seconds)

    ledger = ProbeTax(lease=lease, period=period)
    ledger.totals = [PriceTotals(price, *figures) for price, figures in totals.items()]
    listing = runs.order_by("started_at", "pk").values_list(*LEDGER_COLUMNS)
    for row in listing if listed is None else listing[:listed]:
        item = _taxed_run(row, row[7] if row[7] is not None else read_now.get(row[0], {}))
        if item is not None:
            ledger.runs.append(item)
    ledger.deferred = run_selectors.deferred_heavy_count(
        lease=lease, start=start, end=end, prefix=DEFERRED
    )
    return ledger


def _longest_heavy_cadence(lease: Lease) -> int:
    """The longest cadence of a heavy kind in any of the lease's terms versions (s)."""
    versions = terms_of(lease=lease).values_list("probe_cadence_s", flat=True)
    return max(
        (
            seconds
            for cadences in versions
            for kind, seconds in (cadences or {}).items()
            if kind in HEAVY_PROBE_KINDS
        ),
        default=0,
    )


def _taxed_run(row: tuple, sent: Sent) -> TaxedRun | None:
    """A ledger entry from a row of ``LEDGER_COLUMNS`` and the bytes its nodes sent; None
    when they sent none."""
    pk, kind, tool, target, trigger, started, finished, _recorded, price, _slot = row
    if not sent:
        return None
    return TaxedRun(pk, kind, tool, target, trigger, started, finished, sent, _price(price))


def _money(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def document(ledger: ProbeTax) -> dict[str, Any]:
    """The ledger as the API answers it."""
    return {
        "lease": ledger.lease.reference,
        "period": ledger.period,
        "runs": [
            {
                "id": item.run_id,
                "kind": item.kind,
                "tool": item.tool,
                "target": item.target,
                "trigger": item.trigger,
                "started_at": iso_utc(item.started_at),
                "finished_at": iso_utc(item.finished_at),
                "seconds": item.seconds,
                "bytes": item.bytes,
                "bytes_by_node": item.bytes_by_node,
                "estimated": item.estimated,
                "price_per_gb": _money(item.price_per_gb),
                "cost_cny": _money(item.cost),
            }
            for item in ledger.runs
        ],
        "totals": {
            "runs": ledger.count,
            "bytes": ledger.bytes,
            "seconds": ledger.seconds,
            "cost_cny": _money(ledger.cost),
            "deferred_runs": ledger.deferred,
        },
        "rule": (
            "bytes each node sent for gpulease's own heavy probes (gpulease_verify.probe_tax), "
            "kept out of the traffic samples of the slots each run covered; cost = bytes / "
            "10^9 x the price per GB of the run's terms, half-up to 0.01"
        ),
    }
