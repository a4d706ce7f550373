"""The probe tax ledger: what gpulease's own heavy probes sent on a lease in a month, kept
out of its metering (``gpulease_verify.probe_tax``, ``gpulease_verify.traffic``).

Per run whose start lies in the month (tenant's clock): the bytes each node sent, the
seconds it ran (``finished_at - started_at``) and what those bytes would have cost at the
price per GB of the terms the run ran under (Decimal, half-up to 0.01; none when the terms
name no price per GB). Heavy probes deferred because the lease was busy are counted too:
they never ran, so they cost nothing and are never counted against the provider."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from benchmarks.choices import RunState
from benchmarks.models import SLOT_REACH, ProbeRun
from benchmarks.models.outputs import load_texts
from gpulease_verify import probe_tax
from gpulease_verify.calculations import traffic_charge
from gpulease_verify.canonical import iso_utc
from gpulease_verify.parsers import ParseError
from gpulease_verify.periods import Period
from leases.choices import HEAVY_PROBE_KINDS, ProbeKind
from leases.models import Lease

log = logging.getLogger(__name__)

DEFERRED = "deferred:"
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


@dataclass
class ProbeTax:
    lease: Lease
    period: str
    runs: list[TaxedRun] = field(default_factory=list)
    deferred: int = 0

    @property
    def bytes(self) -> int:
        return sum(item.bytes for item in self.runs)

    @property
    def seconds(self) -> int:
        return sum(item.seconds for item in self.runs)

    @property
    def cost(self) -> Decimal | None:
        """Per price: the bytes of its runs together x the price, half-up to 0.01 (as the
        invoice rounds traffic), added up."""
        by_price: dict[Decimal, int] = {}
        for item in self.runs:
            if item.price_per_gb is not None:
                by_price[item.price_per_gb] = by_price.get(item.price_per_gb, 0) + item.bytes
        if not by_price:
            return None
        charges = (traffic_charge(total_bytes=b, price_per_gb=p) for p, b in by_price.items())
        return sum(charges, ZERO)

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


def _read_sent(run: ProbeRun) -> dict[str, int]:
    """Node -> the bytes a finished heavy run sent, from what its tool printed
    (``gpulease_verify.probe_tax.bytes_sent``; its texts and ``run.nodes`` loaded); empty,
    and logged, when its output cannot be read again."""
    try:
        return probe_tax.bytes_sent(
            tool=run.tool,
            state=run.state,
            parsed=run.parsed,
            raw_output=run.raw_output,
            command=run.command,
            target=run.target,
            nodes=[node.hostname for node in run.nodes.all()],
        )
    except ParseError as error:
        log.warning("probe run %s: its probe bytes are not known: %s", run.pk, error)
        return {}


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
    whole = list(
        ProbeRun.objects.filter(
            pk__in=[pk for pk, _slot in keys],
            slot_at__gte=min(slot for _pk, slot in keys),  # the partitions they are in
            slot_at__lte=max(slot for _pk, slot in keys),
        ).prefetch_related("nodes")
    )
    load_texts(whole)
    return {run.pk: _read_sent(run) for run in whole}


def record_sent(runs: Iterable[ProbeRun]) -> None:
    """Read the bytes of the taxed runs among ``runs`` that have none recorded and store
    them in ``sent_bytes``. Ingest calls it on each batch it reads, so a run's output is
    parsed for its probe bytes once."""
    missing = [run for run in runs if run.sent_bytes is None and taxed(run)]
    read = _read_all([(run.pk, run.slot_at) for run in missing])
    for run in missing:
        run.sent_bytes = read.get(run.pk, {})
        # one pruned row update each: heavy runs are a few an hour per lease
        ProbeRun.objects.filter(pk=run.pk, slot_at=run.slot_at).update(sent_bytes=run.sent_bytes)


Sent = dict[str, int]  # node -> bytes


def sent_of(rows: Iterable[tuple[int, datetime, Sent | None]]) -> dict[int, Sent]:
    """Run id -> node -> bytes, for taxed runs given as (id, slot, recorded bytes): what
    ingest recorded, or read now from the output of a run ingest has not reached (not
    stored: readers do not write)."""
    rows = list(rows)
    found = {pk: sent for pk, _slot, sent in rows if sent is not None}
    found.update(_read_all([(pk, slot) for pk, slot, sent in rows if sent is None]))
    return found


def probe_tax_of(*, lease: Lease, period: str) -> ProbeTax:
    """The lease's probe tax in ``period`` (module docstring): two queries of plain rows,
    and three more when some of its runs have not been ingested yet."""
    start, end = Period.parse(period).bounds(lease.tenant.time_zone)
    ledger = ProbeTax(lease=lease, period=period)
    rows = list(
        ProbeRun.objects.filter(
            lease=lease,
            kind__in=HEAVY_PROBE_KINDS,
            state=RunState.OK,
            started_at__gte=start,
            started_at__lt=end,
            finished_at__isnull=False,
            # a run starts before its slot's deadline: this bounds the partitions read
            slot_at__gte=start - SLOT_REACH,
            slot_at__lt=end,
        )
        .order_by("started_at", "pk")
        .values_list(*LEDGER_COLUMNS)
    )
    sent_by = sent_of((pk, slot, sent) for pk, *_, sent, _per_gb, slot in rows)
    for pk, kind, tool, target, trigger, started, finished, _sent, price, _slot in rows:
        sent = sent_by.get(pk, {})
        if sent:
            ledger.runs.append(
                TaxedRun(pk, kind, tool, target, trigger, started, finished, sent, _price(price))
            )
    ledger.deferred = ProbeRun.objects.filter(
        lease=lease,
        kind__in=HEAVY_PROBE_KINDS,
        state=RunState.SKIPPED,
        error__startswith=DEFERRED,
        slot_at__gte=start,
        slot_at__lt=end,
    ).count()
    return ledger


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
            "runs": len(ledger.runs),
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
