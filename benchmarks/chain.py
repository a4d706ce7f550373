"""The hash chain of a lease's probe runs: tamper evidence for every measurement.

Every run that is over (ok, failed, timeout, unreachable, unparsable, missed, skipped)
becomes one link of its lease's chain, once. Links are appended in the order the runs
finished, ``(finished_at, id)``, under a lock on the lease row, so two workers never give
two runs the same index:

- ``chain_index``: 1, 2, 3, ... per lease, without gaps;
- ``prev_hash``: the previous link's ``run_hash``; the first link's is ``GENESIS`` (64 zeros);
- ``run_hash = sha256(prev_hash + canonical_json(run_content(run)))`` in lowercase hex, over
  the UTF-8 bytes of the 64 hex characters of ``prev_hash`` followed by the canonical JSON.

``canonical_json`` is JSON with the keys sorted, no whitespace (``","`` and ``":"``),
non-ASCII characters written as themselves and the whole text encoded as UTF-8. The
content holds only strings, integers, booleans and nulls (see ``run_content``), so any
JSON library reproduces it byte for byte.

Changing anything a link covers (a verdict, the SHA-256 of the raw output, a time) after
the fact changes that run's hash, and every later link names the old one: ``verify_chain``
says which link. An unreachable run whose node may still be retried is not over yet, so it
is linked only when its last attempt has been recorded or its slot has passed.

The functions that only compute (``canonical_json``, ``run_content``, ``link_hash``,
``verify_chain``) read no database; an auditor's ``audit_verify`` reuses them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from benchmarks.choices import FINAL_STATES, RunState
from benchmarks.models import ProbeRun
from leases.models import Lease

GENESIS = "0" * 64
HASH_RULE = "sha256(prev_hash + canonical_json(content)), UTF-8, lowercase hex"
CANONICAL = "JSON, sorted keys, no spaces, UTF-8"

# The fields of a run that its hash covers, in the order the README lists them.
CONTENT_FIELDS = (
    "lease",
    "kind",
    "tool",
    "target",
    "pattern",
    "trigger",
    "slot_at",
    "deadline_at",
    "started_at",
    "finished_at",
    "state",
    "command",
    "exit_code",
    "raw_sha256",
    "stderr_sha256",
    "output_truncated",
    "parsed",
    "measured_bps",
    "latency_us",
    "verdict",
    "rule",
    "verdict_reason",
    "error",
    "terms_version",
)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace; NaN and infinities are refused."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def iso_utc(instant: datetime | None) -> str | None:
    """An aware instant as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (always six fraction digits)."""
    if instant is None:
        return None
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def number_text(value: float | None) -> str | None:
    """A float as the shortest text that reads back to the same double (Python's repr), so
    that the hashed content holds no JSON float whose printing differs between languages."""
    return None if value is None else repr(float(value))


def run_content(run: Any) -> dict[str, Any]:
    """What a run's hash covers. ``run`` is a ProbeRun with ``lease`` and ``terms`` loaded
    (or anything with the same attributes). ``parsed`` is its canonical JSON text, times
    are ISO UTC, ``latency_us`` is text (``number_text``), ``terms_version`` an integer."""
    stderr = run.stderr or ""
    return {
        "lease": run.lease.reference,
        "kind": run.kind,
        "tool": run.tool,
        "target": run.target,
        "pattern": run.pattern,
        "trigger": run.trigger,
        "slot_at": iso_utc(run.slot_at),
        "deadline_at": iso_utc(run.deadline_at),
        "started_at": iso_utc(run.started_at),
        "finished_at": iso_utc(run.finished_at),
        "state": run.state,
        "command": run.command,
        "exit_code": run.exit_code,
        "raw_sha256": run.raw_sha256,
        "stderr_sha256": hashlib.sha256(stderr.encode()).hexdigest() if stderr else "",
        "output_truncated": bool(run.output_truncated),
        "parsed": None if run.parsed is None else canonical_json(run.parsed),
        "measured_bps": None if run.measured_bps is None else int(run.measured_bps),
        "latency_us": number_text(run.latency_us),
        "verdict": run.verdict,
        "rule": run.rule,
        "verdict_reason": run.verdict_reason,
        "error": run.error,
        "terms_version": run.terms.version if run.terms_id else None,
    }


def link_hash(content: Mapping[str, Any], prev: str) -> str:
    """``sha256(prev + canonical_json(content))`` as lowercase hex."""
    return hashlib.sha256((prev + canonical_json(content)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Link:
    """One link as stored (or as written in an audit bundle)."""

    index: int
    prev_hash: str
    run_hash: str
    content: Mapping[str, Any]
    run_id: int | None = None

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> Link:
        """From an audit bundle's run entry (``chain_index``, ``prev_hash``, ``run_hash``,
        ``content``, ``id``)."""
        return cls(
            index=entry["chain_index"],
            prev_hash=entry["prev_hash"],
            run_hash=entry["run_hash"],
            content=entry["content"],
            run_id=entry.get("id"),
        )

    def name(self) -> str:
        run = f" (run {self.run_id})" if self.run_id is not None else ""
        return f"chain link {self.index}{run}"


def _short(digest: str) -> str:
    return f"{digest[:16]}…" if len(digest) > 16 else digest or "(empty)"


def verify_chain(links: Iterable[Link | Mapping[str, Any]]) -> list[str]:
    """Every problem of a run of consecutive links, as sentences; empty when it holds.

    Checks, in index order: the indexes are contiguous; the first link of a chain (index 1)
    starts from ``GENESIS``; each ``prev_hash`` is the previous link's ``run_hash``; each
    ``run_hash`` recomputes from its content and ``prev_hash``. The first link of a segment
    that does not start at index 1 is anchored on its own ``prev_hash``, which only an
    earlier segment can confirm."""
    items = [link if isinstance(link, Link) else Link.from_dict(link) for link in links]
    items.sort(key=lambda link: link.index)
    problems: list[str] = []
    previous: Link | None = None
    for link in items:
        if previous is None:
            if link.index == 1 and link.prev_hash != GENESIS:
                problems.append(
                    f"{link.name()} is the first of the chain but its previous hash is "
                    f"{_short(link.prev_hash)}, not the genesis hash (64 zeros)"
                )
        else:
            if link.index != previous.index + 1:
                problems.append(
                    f"{link.name()} follows chain link {previous.index}: "
                    f"{link.index - previous.index - 1} link(s) are missing"
                    if link.index > previous.index + 1
                    else f"{link.name()} repeats chain index {link.index}"
                )
            elif link.prev_hash != previous.run_hash:
                problems.append(
                    f"{link.name()} names {_short(link.prev_hash)} as the previous hash, but "
                    f"{previous.name()} has hash {_short(previous.run_hash)}"
                )
        recomputed = link_hash(link.content, link.prev_hash)
        if recomputed != link.run_hash:
            problems.append(
                f"{link.name()}: stored hash {_short(link.run_hash)} does not match its "
                f"content (recomputed {_short(recomputed)}); the run was changed after it "
                "was recorded"
            )
        previous = link
    return problems


def content_differences(stated: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The fields of two contents that differ, for saying what changed."""
    keys = sorted(set(stated) | set(actual))
    return [key for key in keys if stated.get(key) != actual.get(key)]


# --- writes and reads (Django) -------------------------------------------------------


def _final_unlinked(lease_id: int, now: datetime) -> QuerySet[ProbeRun]:
    may_retry = Q(
        state=RunState.UNREACHABLE,
        attempts__lt=settings.PROBE_MAX_ATTEMPTS,
        deadline_at__gt=now,
    )
    return (
        ProbeRun.objects.filter(
            lease_id=lease_id,
            chain_index__isnull=True,
            state__in=FINAL_STATES,
            finished_at__isnull=False,
        )
        .exclude(may_retry)
        .select_related("lease", "terms")
        .order_by("finished_at", "pk")
    )


def link_pending(*, lease_id: int, now: datetime | None = None) -> list[ProbeRun]:
    """Append every run of the lease that is over and not yet linked to its chain, in
    ``(finished_at, id)`` order, under a lock on the lease row. Returns the runs linked.
    Idempotent: a second call finds nothing to do."""
    now = now or timezone.now()
    with transaction.atomic():
        # The lease row is the lock: one appender per chain at a time.
        Lease.objects.select_for_update().filter(pk=lease_id).values_list("pk").first()
        pending = list(_final_unlinked(lease_id, now))
        if not pending:
            return []
        last = (
            ProbeRun.objects.filter(lease_id=lease_id, chain_index__isnull=False)
            .order_by("-chain_index")
            .values_list("chain_index", "run_hash")
            .first()
        )
        index, prev = (last[0] or 0, last[1]) if last is not None else (0, GENESIS)
        for run in pending:
            index += 1
            run.chain_index, run.prev_hash = index, prev
            run.run_hash = link_hash(run_content(run), prev)
            prev = run.run_hash
        ProbeRun.objects.bulk_update(
            pending, ["chain_index", "prev_hash", "run_hash"], batch_size=500
        )
    return pending


def stored_links(*, lease_id: int, first: int | None = None, last: int | None = None) -> list[Link]:
    """The lease's links as stored, each with its content recomputed from the run row as
    it is now (so a row changed after linking shows up in ``verify_chain``)."""
    runs = ProbeRun.objects.filter(lease_id=lease_id, chain_index__isnull=False)
    if first is not None:
        runs = runs.filter(chain_index__gte=first)
    if last is not None:
        runs = runs.filter(chain_index__lte=last)
    return [
        Link(
            index=run.chain_index or 0,
            prev_hash=run.prev_hash,
            run_hash=run.run_hash,
            content=run_content(run),
            run_id=run.pk,
        )
        for run in runs.select_related("lease", "terms").order_by("chain_index")
    ]


def verify_lease(*, lease_id: int) -> list[str]:
    """Every problem of the lease's whole chain as stored now; empty when it holds."""
    return verify_chain(stored_links(lease_id=lease_id))


__all__ = [
    "CANONICAL",
    "CONTENT_FIELDS",
    "GENESIS",
    "HASH_RULE",
    "Link",
    "canonical_json",
    "content_differences",
    "iso_utc",
    "link_hash",
    "link_pending",
    "number_text",
    "run_content",
    "stored_links",
    "verify_chain",
    "verify_lease",
]
