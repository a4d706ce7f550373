"""Telemetry batches as links of a lease's hash chain (``ledger.chain``): what a batch's
hash covers, appending batches, and reading them back (registered with the ledger by
``telemetry.apps``). The content rule is ``gpulease_verify.chain.telemetry_content``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Prefetch, QuerySet

from gpulease_verify.canonical import iso_utc
from gpulease_verify.chain import Link, clearance_entry, telemetry_content
from gpulease_verify.telemetry import PortSample as Sample
from gpulease_verify.telemetry import sample_entry, switch_entry
from ledger import kinds
from ledger.chain import appending
from telemetry.models import PortClearance, PortSample, SwitchReading, TelemetryBatch


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


def _with_rows(batches: QuerySet[TelemetryBatch]) -> QuerySet[TelemetryBatch]:
    return batches.select_related("lease").prefetch_related(
        Prefetch("samples", queryset=PortSample.objects.select_related("node")),
        Prefetch("switch_readings", queryset=SwitchReading.objects.select_related("switch")),
        Prefetch("clearances", queryset=PortClearance.objects.select_related("node")),
    )


def telemetry_batches(lease_id: int) -> QuerySet[TelemetryBatch]:
    """The lease's batches with the rows their content is made of."""
    return _with_rows(TelemetryBatch.objects.filter(lease_id=lease_id))


def link_telemetry(batches: list[tuple[TelemetryBatch, dict[str, Any]]]) -> None:
    """Append saved telemetry batches, one per lease, each with its content (built from
    the rows saved with it), to their leases' chains: the chains held, every head read and
    every batch saved in one query each, however many leases."""
    if not batches:
        return
    with appending(batch.lease_id for batch, _ in batches) as chain:
        for batch, content in batches:
            chain.link(batch, content)
        TelemetryBatch.objects.bulk_update(
            [batch for batch, _ in batches], ["chain_index", "prev_hash", "link_hash"]
        )


def _telemetry_links(rows: QuerySet[TelemetryBatch]) -> Iterable[Link]:
    return [
        Link(
            index=batch.chain_index or 0,
            prev_hash=batch.prev_hash,
            run_hash=batch.link_hash,
            content=telemetry_link_content(batch),
            telemetry_id=batch.pk,
        )
        for batch in _with_rows(rows)
    ]


def register() -> None:
    """Telemetry batches as a kind of chain link (``telemetry.apps``)."""
    kinds.register(
        kinds.Kind(
            "telemetry", TelemetryBatch, "link_hash", telemetry_link_content, _telemetry_links
        )
    )
