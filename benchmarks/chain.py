"""The hash chain of a lease, as stored: linking finished runs, terms versions,
rejudgements, telemetry batches and tenant records (one index sequence for all five) and reading the
links back. The rules
(hashing, canonical JSON, checking a chain, terms and rejudgement content) live in
``gpulease_verify.chain``, ``gpulease_verify.canonical`` and ``gpulease_verify.terms``,
which an auditor installs alone.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import OuterRef, Prefetch, Q, QuerySet, Subquery
from django.utils import timezone

from benchmarks.choices import FINAL_STATES, RunState, Trigger
from benchmarks.models import ProbeRun, Rejudgement
from common.locks import lock_in_key_order, locking
from gpulease_verify import chain as chain_rules
from gpulease_verify.canonical import CANONICAL, canonical_json, iso_utc, number_text
from gpulease_verify.chain import (
    CONTENT_FIELDS,
    GENESIS,
    HASH_RULE,
    Link,
    TermsRef,
    clearance_entry,
    content_differences,
    link_hash,
    rejudgement_content,
    telemetry_content,
    verify_chain,
)
from gpulease_verify.telemetry import PortSample as Sample
from gpulease_verify.telemetry import sample_entry, switch_entry
from gpulease_verify.terms import CONTRACT_FIELDS as CONTRACT_FIELDS_OF_TERMS
from gpulease_verify.terms import terms_content
from leases.models import Lease, LeaseTerms, TenantLink
from telemetry.models import PortClearance, PortSample, SwitchReading, TelemetryBatch


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


# The run's stored values its content is made of (with its chain index).
RUN_COLUMNS = tuple(name for name in CONTENT_FIELDS if name not in ("lease", "terms_version"))


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    return value


def terms_fields(version: Any) -> dict[str, Any]:
    """A terms version as an audit bundle writes it (and as ``terms_content`` reads it):
    instants ISO UTC, decimals as text, windows and tiers as JSON."""
    return {
        "lease": version.lease.reference,
        "version": version.version,
        "effective_from": iso_utc(version.effective_from),
        "created_at": iso_utc(version.created_at),
        "amendment_reason": version.amendment_reason,
        **{name: _plain(getattr(version, name)) for name in CONTRACT_FIELDS_OF_TERMS},
        "acknowledgement": version.acknowledgement,
    }


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


# --- writes and reads (Django) -------------------------------------------------------


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
    ``(finished_at, id)`` order, under a lock on the lease row. Returns the runs linked.
    Idempotent: a second call finds nothing to do."""
    now = now or timezone.now()
    with transaction.atomic():
        # The lease row is the lock: one appender per chain at a time.
        locking(Lease.objects).filter(pk=lease_id).values_list("pk").first()
        pending = list(_final_unlinked(lease_id, now))
        if not pending:
            return []
        # Ingest may be marking some of them read: both lock runs in id order.
        lock_in_key_order(ProbeRun.objects.keyed((run.pk, run.slot_at) for run in pending))
        index, prev = chain_head(lease_id=lease_id)
        for run in pending:
            index += 1
            run.chain_index, run.prev_hash = index, prev
            run.run_hash = link_hash(run_content(run), prev)
            prev = run.run_hash
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


def chain_head(*, lease_id: int) -> tuple[int, str]:
    """(index, hash) of the lease's last link, run, terms version, rejudgement or
    telemetry batch; (0, GENESIS) for an empty chain. Read it under the lock on the lease
    row before appending."""
    return chain_heads([lease_id]).get(lease_id, (0, GENESIS))


def link_terms(version: LeaseTerms) -> LeaseTerms:
    """Append a saved, unlinked terms version to its lease's chain. The caller holds the
    lock on the lease row (``leases.services.add_terms_version`` does)."""
    version.refresh_from_db()  # hash the values as stored (decimal places, JSON)
    index, prev = chain_head(lease_id=version.lease_id)
    version.chain_index, version.prev_hash = index + 1, prev
    version.terms_hash = link_hash(terms_content(terms_fields(version)), prev)
    version.save(update_fields=["chain_index", "prev_hash", "terms_hash"])
    return version


def link_rejudgements(items: list[Rejudgement]) -> list[Rejudgement]:
    """Append new (unsaved) rejudgements of one lease to its chain in the order given, and
    save them. The caller holds the lock on the lease row (``billing.rerate.rerate``
    does); each rejudgement's run is linked already, with ``lease``, ``run`` and
    ``terms`` set."""
    if not items:
        return items
    index, prev = chain_head(lease_id=items[0].lease_id)
    for item in items:
        index += 1
        item.chain_index, item.prev_hash = index, prev
        item.link_hash = prev = link_hash(rejudgement_link_content(item), prev)
    return Rejudgement.objects.bulk_create(items, batch_size=500)


def link_tenant_record(*, lease_id: int, kind: str, content: dict[str, Any]) -> TenantLink:
    """Append a tenant record (``gpulease_verify.cosign.tenant_link_content``) to the
    lease's chain and save it. The caller holds the lock on the lease row
    (``leases.cosign`` does)."""
    index, prev = chain_head(lease_id=lease_id)
    return TenantLink.objects.create(
        lease_id=lease_id,
        kind=kind,
        content=content,
        chain_index=index + 1,
        prev_hash=prev,
        link_hash=link_hash(content, prev),
    )


def _tenant_link(item: TenantLink) -> Link:
    return Link(
        index=item.chain_index,
        prev_hash=item.prev_hash,
        run_hash=item.link_hash,
        content=item.content,
        tenant_link_id=item.pk,
    )


def as_sample(row: PortSample) -> Sample:
    """A stored interval as the pure rules read it."""
    return Sample(
        port=row.port,
        at=row.at,
        seconds=row.seconds,
        up=row.up,
        down_cycles=row.down_cycles,
        deltas=dict(row.deltas),
        reset=row.reset,
        rate_gbps=row.rate_gbps,
        expected_gbps=row.expected_gbps,
        saturated=tuple(row.saturated or ()),
        disputed=row.disputed,
    )


def telemetry_link_content(batch: Any) -> dict[str, Any]:
    """What a telemetry batch's hash covers (``gpulease_verify.chain.telemetry_content``),
    from its rows as stored: samples with ``node``, readings with ``switch`` loaded."""
    return telemetry_content(
        lease=batch.lease.reference,
        at=iso_utc(batch.at) or "",
        samples=[sample_entry(row.node.hostname, as_sample(row)) for row in batch.samples.all()],
        switch=[
            switch_entry(
                switch=row.switch.name,
                port=row.if_name,
                in_octets=int(row.in_octets),
                out_octets=int(row.out_octets),
                oper_up=row.oper_up,
                in_errors=row.in_errors,
                out_discards=row.out_discards,
                link=row.link,
            )
            for row in batch.switch_readings.all()
        ],
        cleared=[
            clearance_entry(
                node=row.node.hostname,
                port=row.port,
                at=iso_utc(row.at) or "",
                by=row.by,
                reason=row.reason,
            )
            for row in batch.clearances.all()
        ],
    )


def telemetry_batches(lease_id: int) -> QuerySet[TelemetryBatch]:
    return (
        TelemetryBatch.objects.filter(lease_id=lease_id)
        .select_related("lease")
        .prefetch_related(
            Prefetch("samples", queryset=PortSample.objects.select_related("node")),
            Prefetch("switch_readings", queryset=SwitchReading.objects.select_related("switch")),
            Prefetch("clearances", queryset=PortClearance.objects.select_related("node")),
        )
    )


def link_telemetry(batches: list[tuple[TelemetryBatch, dict[str, Any]]]) -> None:
    """Append saved telemetry batches, one per lease, each with its content (built from
    the rows saved with it), to their leases' chains: the lease rows locked, every head
    read and every batch saved in one query each, however many leases."""
    if not batches:
        return
    lease_ids = [batch.lease_id for batch, _ in batches]
    with transaction.atomic():
        lock_in_key_order(Lease.objects.filter(pk__in=lease_ids))  # one appender a chain
        heads = chain_heads(lease_ids)
        for batch, content in batches:
            index, prev = heads[batch.lease_id]
            batch.chain_index, batch.prev_hash = index + 1, prev
            batch.link_hash = link_hash(content, prev)
        TelemetryBatch.objects.bulk_update(
            [batch for batch, _ in batches], ["chain_index", "prev_hash", "link_hash"]
        )


def chain_heads(lease_ids: list[int]) -> dict[int, tuple[int, str]]:
    """``chain_head`` of many leases in one query: per lease, its last link of each kind
    as two subqueries, the highest of the four."""
    kinds = (
        (ProbeRun, "run_hash"),
        (LeaseTerms, "terms_hash"),
        (Rejudgement, "link_hash"),
        (TelemetryBatch, "link_hash"),
        (TenantLink, "link_hash"),
    )
    annotations: dict[str, Any] = {}
    for number, (model, hash_field) in enumerate(kinds):
        last = model.objects.filter(  # type: ignore[attr-defined]
            lease_id=OuterRef("pk"), chain_index__isnull=False
        ).order_by("-chain_index")
        annotations[f"index_{number}"] = Subquery(last.values("chain_index")[:1])
        annotations[f"hash_{number}"] = Subquery(last.values(hash_field)[:1])
    heads = {}
    for row in (
        Lease.objects.filter(pk__in=lease_ids).annotate(**annotations).values("pk", *annotations)
    ):
        found = [
            (row[f"index_{n}"], row[f"hash_{n}"])
            for n in range(len(kinds))
            if row[f"index_{n}"] is not None
        ]
        heads[row["pk"]] = max(found) if found else (0, GENESIS)
    return heads


def _telemetry_link(batch: TelemetryBatch) -> Link:
    return Link(
        index=batch.chain_index or 0,
        prev_hash=batch.prev_hash,
        run_hash=batch.link_hash,
        content=telemetry_link_content(batch),
        telemetry_id=batch.pk,
    )


def _rejudgement_link(item: Rejudgement) -> Link:
    return Link(
        index=item.chain_index or 0,
        prev_hash=item.prev_hash,
        run_hash=item.link_hash,
        content=rejudgement_link_content(item),
        rejudgement_id=item.pk,
    )


def _terms_link(version: LeaseTerms) -> Link:
    return Link(
        index=version.chain_index or 0,
        prev_hash=version.prev_hash,
        run_hash=version.terms_hash,
        content=terms_content(terms_fields(version)),
        terms_version=version.version,
    )


def stored_links(*, lease_id: int, first: int | None = None, last: int | None = None) -> list[Link]:
    """The lease's links as stored, runs, terms versions and rejudgements, each with its
    content recomputed from its row as it is now (so a row changed after linking shows up
    in ``verify_chain``)."""
    runs = ProbeRun.objects.filter(lease_id=lease_id, chain_index__isnull=False)
    versions = LeaseTerms.objects.filter(lease_id=lease_id, chain_index__isnull=False)
    rejudged = Rejudgement.objects.filter(lease_id=lease_id, chain_index__isnull=False)
    batches = telemetry_batches(lease_id).filter(chain_index__isnull=False)
    tenant = TenantLink.objects.filter(lease_id=lease_id)
    if first is not None:
        tenant = tenant.filter(chain_index__gte=first)
        runs = runs.filter(chain_index__gte=first)
        versions = versions.filter(chain_index__gte=first)
        rejudged = rejudged.filter(chain_index__gte=first)
        batches = batches.filter(chain_index__gte=first)
    if last is not None:
        runs = runs.filter(chain_index__lte=last)
        versions = versions.filter(chain_index__lte=last)
        rejudged = rejudged.filter(chain_index__lte=last)
        batches = batches.filter(chain_index__lte=last)
        tenant = tenant.filter(chain_index__lte=last)
    links = [
        Link(
            index=run.chain_index or 0,
            prev_hash=run.prev_hash,
            run_hash=run.run_hash,
            content=run_content(run),
            run_id=run.pk,
        )
        for run in runs.select_related("lease", "terms")
    ]
    links += [_terms_link(version) for version in versions.select_related("lease")]
    links += [_rejudgement_link(item) for item in rejudged.select_related("lease", "run", "terms")]
    links += [_telemetry_link(batch) for batch in batches]
    links += [_tenant_link(item) for item in tenant]
    return sorted(links, key=lambda link: link.index)


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
    "chain_head",
    "chain_heads",
    "content_differences",
    "iso_utc",
    "link_hash",
    "link_pending",
    "link_rejudgements",
    "link_telemetry",
    "link_tenant_record",
    "link_terms",
    "number_text",
    "rejudgement_link_content",
    "run_content",
    "stored_links",
    "telemetry_batches",
    "telemetry_link_content",
    "terms_fields",
    "verify_chain",
    "verify_lease",
]
