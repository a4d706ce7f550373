"""Probe runs and rejudgements as links of a lease's hash chain (``ledger.chain``): what
each one's hash covers, appending them, and reading them back (registered with the ledger
by ``benchmarks.apps``). The content rules are ``gpulease_verify.chain.run_content`` and
``rejudgement_content``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from benchmarks.choices import FINAL_STATES, RunState, Trigger
from benchmarks.models import ProbeRun, Rejudgement
from common.locks import lock_in_key_order
from gpulease_verify import chain as chain_rules
from gpulease_verify.canonical import iso_utc
from gpulease_verify.chain import CONTENT_FIELDS, Link, TermsRef, rejudgement_content
from ledger import kinds
from ledger.chain import appending

# The run's stored values its content is made of (with its chain index).
RUN_COLUMNS = tuple(name for name in CONTENT_FIELDS if name not in ("lease", "terms_version"))


def run_content(run: Any) -> dict[str, Any]:
    """What a run's hash covers (``gpulease_verify.chain.run_content``). ``run`` is a
    ProbeRun with ``lease`` and ``terms`` loaded (or anything with the same attributes)."""
    terms = run.terms if run.terms_id else None
    return chain_rules.run_content(
        {
            **{name: getattr(run, name) for name in RUN_COLUMNS},
            "chain_index": getattr(run, "chain_index", None),
        },
        lease=run.lease.reference,
        terms=None
        if terms is None
        else TermsRef(terms.version, getattr(terms, "chain_index", None), terms.terms_hash),
    )


def rejudgement_link_content(item: Any) -> dict[str, Any]:
    """What a rejudgement's hash covers (``gpulease_verify.chain.rejudgement_content``),
    from a Rejudgement with ``lease``, ``run`` and ``terms`` loaded: the run named by its
    link hash, the terms version by number and link hash."""
    return rejudgement_content(
        lease=item.lease.reference,
        run_hash=item.run.run_hash,
        terms_version=item.terms.version,
        terms_hash=item.terms.terms_hash,
        verdict=item.verdict,
        rule=item.rule,
        verdict_reason=item.verdict_reason,
        judged_at=iso_utc(item.judged_at) or "",
    )


# --- appending -------------------------------------------------------------------------


def _final_unlinked(lease_id: int, now: datetime) -> QuerySet[ProbeRun]:
    may_retry = Q(
        state=RunState.UNREACHABLE,
        attempts__lt=settings.PROBE_MAX_ATTEMPTS,
        deadline_at__gt=now,
    ) & ~Q(trigger=Trigger.CONFIRMATION)  # a confirmation is never retried
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
    ``(finished_at, id)`` order, holding the chain (``ledger.chain.appending``). Returns
    the runs linked. Idempotent: a second call finds nothing to do."""
    now = now or timezone.now()
    with appending([lease_id]) as chain:
        pending = list(_final_unlinked(lease_id, now))
        if not pending:
            return []
        # Ingest may be marking some of them read: both lock runs in id order.
        lock_in_key_order(ProbeRun.objects.keyed((run.pk, run.slot_at) for run in pending))
        chain.link_all(pending)
        _store_links(pending)
    return pending


def _store_links(runs: list[ProbeRun]) -> None:
    """Write the runs' chain fields. On PostgreSQL one UPDATE per thousand runs, joined on
    the whole primary key (id, slot_at) and bounded by slot, so it reads only the month
    partitions the runs are in; elsewhere (SQLite) one prepared UPDATE for every run."""
    table = connection.ops.quote_name(ProbeRun._meta.db_table)
    if connection.vendor != "postgresql":
        # One prepared UPDATE run for each row (the id is the key there): a bulk_update's
        # CASE over hundreds of rows costs more to build than to run.
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {table} SET chain_index = %s, prev_hash = %s, run_hash = %s WHERE id = %s",
                [(run.chain_index, run.prev_hash, run.run_hash, run.pk) for run in runs],
            )
        return
    for start in range(0, len(runs), 1000):
        part = runs[start : start + 1000]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} r SET chain_index = v.chain_index, prev_hash = v.prev_hash,"
                " run_hash = v.run_hash FROM unnest(%s::bigint[], %s::timestamptz[],"
                " %s::integer[], %s::text[], %s::text[])"
                " AS v(id, slot_at, chain_index, prev_hash, run_hash)"
                " WHERE r.id = v.id AND r.slot_at = v.slot_at"
                " AND r.slot_at >= %s AND r.slot_at <= %s",
                [
                    [run.pk for run in part],
                    [run.slot_at for run in part],
                    [run.chain_index for run in part],
                    [run.prev_hash for run in part],
                    [run.run_hash for run in part],
                    min(run.slot_at for run in part),
                    max(run.slot_at for run in part),
                ],
            )


def link_rejudgements(items: list[Rejudgement]) -> list[Rejudgement]:
    """Append new (unsaved) rejudgements of one lease to its chain in the order given, and
    save them. Each rejudgement's run is linked already, with ``lease``, ``run`` and
    ``terms`` set. The caller (``billing.rerate.rerate``) holds the lease's chain already
    while it judges them."""
    if not items:
        return items
    with appending([items[0].lease_id]) as chain:
        chain.link_all(items)
        return Rejudgement.objects.bulk_create(items, batch_size=500)


# --- reading back (the ledger's kinds) ---------------------------------------------------


def _run_links(rows: QuerySet[ProbeRun]) -> Iterable[Link]:
    return [
        Link(
            index=run.chain_index or 0,
            prev_hash=run.prev_hash,
            run_hash=run.run_hash,
            content=run_content(run),
            run_id=run.pk,
        )
        for run in rows.select_related("lease", "terms")
    ]


def _rejudgement_links(rows: QuerySet[Rejudgement]) -> Iterable[Link]:
    return [
        Link(
            index=item.chain_index or 0,
            prev_hash=item.prev_hash,
            run_hash=item.link_hash,
            content=rejudgement_link_content(item),
            rejudgement_id=item.pk,
        )
        for item in rows.select_related("lease", "run", "terms")
    ]


def register() -> None:
    """Runs and rejudgements as kinds of chain link (``benchmarks.apps``)."""
    kinds.register(kinds.Kind("run", ProbeRun, "run_hash", run_content, _run_links))
    kinds.register(
        kinds.Kind(
            "rejudgement", Rejudgement, "link_hash", rejudgement_link_content, _rejudgement_links
        )
    )
