"""Building a bundle (reads the database): ``build_bundle``, the terms versions and billed
window it records, and the formulas it states."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Min
from django.utils import timezone

from benchmarks import selectors as run_selectors
from benchmarks.choices import Trigger
from benchmarks.links import link_pending
from benchmarks.models import (
    ProbeRun,
    effective_terms_id,
    effective_verdict,
)
from benchmarks.models.outputs import load_texts
from billing import checkpoints, ingest, invoicing, metering, metering_gaps
from billing.lease_month import lease_month
from billing.models import HourlyRollup
from billing.probe_tax import sent_of, taxed
from common import archives
from gpulease_verify.bundle import FORMAT
from gpulease_verify.canonical import CANONICAL, iso_utc
from gpulease_verify.chain import GENESIS, HASH_RULE
from gpulease_verify.periods import Period
from gpulease_verify.terms import terms_content
from leases.links import terms_fields
from leases.models import Lease, LeaseTerms
from leases.selectors import TermsTimeline, lease_with_tenant
from ledger.chain import chain_head

from .billing_docs import (
    _compliance_doc,
    _credit_doc,
    _disputes_doc,
    _evidence_doc,
    _incidents_doc,
    _invoice_doc,
)
from .cosign_docs import amended_versions, tenant_keys_doc, tenant_links_doc
from .plain import _plain
from .runs import (
    _acceptance_doc,
    _assignments_doc,
    _nodes_doc,
    _rejudgement_entry,
    _rejudgements_doc,
    _run_entry,
    sample_key,
)
from .telemetry_docs import fabric_health_doc, telemetry_doc

TERMS_FIELDS = ("version", "effective_from", "amendment_reason", *LeaseTerms.CONTRACT_FIELDS)
ROLLUP_FIELDS = (
    "passed",
    "failed",
    "unknown",
    "excluded",
    "informational",
    "measured",
    "available_minutes",
    "unavailable_minutes",
    "unknown_minutes",
    "degraded_minutes",
)
FORMULAS = {
    "outcome": (
        "per scheduled run: excluded if skipped or its slot is inside a maintenance window of "
        "its terms version (tenant zone); unknown if failed, timeout, unreachable, unparsable "
        "or missed; passed/failed by its verdict; informational otherwise"
    ),
    "counted": "trigger is schedule and window_start <= UTC hour of slot_at < window_end",
    "compliance_percent": "passed / (passed + failed + unknown) x 100, half-up to 0.001",
    "measured_percent": "passed / (passed + failed) x 100, half-up to 0.001",
    "availability": (
        "per link slot (every node's run of that slot): skipped if any run is excluded; its "
        "minutes (deadline_at - slot_at, whole minutes) are unavailable if any failed, "
        "available if all passed, unknown otherwise; a slot not unavailable becomes "
        "unavailable when a telemetry interval of the lease's batches found a port down or a "
        "down-then-up cycle within it; of the available minutes, those that begin inside a "
        "degraded throughput slot [slot_at, deadline_at) (any of its scheduled samples "
        "failed, none excluded) are degraded_minutes, the rest pass_minutes; down_minutes = "
        "unavailable, no_evidence_minutes = unknown; degraded_weighted = the sum over slots "
        "of its degraded minutes x degraded_weight of the terms version its link checks "
        "count under; percent = (available - degraded_weighted) / all x 100, half-up to 0.001"
    ),
    "credit_compliance_percent": "the lower of throughput compliance_percent and availability",
    "repair": (
        "network faults (incidents of kind link, counters, throughput, latency, collective or "
        "telemetry) resolved in the window (window_start <= closed_at < window_end); "
        "repair_minutes = closed_at - opened_at in minutes, half-up to 0.1; missed if "
        "repair_minutes > repair_objective_minutes of the terms version in force at the end "
        "of the window; percent_applied = min(misses x repair_credit_percent, 100 - the SLA "
        "credit's percent_applied); amount = -(credit base x percent_applied / 100), half-up "
        "to 0.01, never more than the base less the SLA credit; the credit line (or voucher) "
        "carries the SLA credit plus this"
    ),
    "credit": (
        "min(largest credit_percent of the tiers whose below_percent > compliance, cap) % of "
        "the credit base, half-up to 0.01, negative; tiers and cap of the terms version in "
        "force at the end of the window; the base is, per terms version over its part of the "
        "window, what its credit_base names: its network_fee lines, its usage_gb and "
        "usage_p95 lines, or contracted_base_per_month x seconds / month_seconds half-up "
        "to 0.01"
    ),
}


def _terms(version: LeaseTerms, in_force: bool) -> dict[str, Any]:
    """A terms version with its link of the chain: its fields (created_at and the
    acknowledgement among them), chain_index, prev_hash, terms_hash and the content its
    hash covers (``gpulease_verify.terms.terms_content`` of those fields)."""
    entry = terms_fields(version)
    return {
        **entry,
        "chain_index": version.chain_index,
        "prev_hash": version.prev_hash,
        "terms_hash": version.terms_hash,
        "content": terms_content(entry),
        "in_force_during_period": in_force,
    }


def _links_between(version: LeaseTerms, first: int | None, last: int | None) -> bool:
    """Whether a terms version is a link of the bundle's stretch of the chain (between its
    first and last run), so the stretch has no gap."""
    index = version.chain_index
    return None not in (index, first, last) and first <= index <= last  # type: ignore[operator]


def build_bundle(
    *, lease: Lease, period: str, now: datetime | None = None, include_raw: bool = False
) -> dict[str, Any]:
    """The self-contained audit bundle of a lease for a month (tenant zone). Links any
    finished run not yet in the chain first, so every finished run of the month is in it."""
    invoicing.check_period(period)
    now = now or timezone.now()
    lease = lease_with_tenant(pk=lease.pk)
    link_pending(lease_id=lease.pk, now=now)
    start, end = Period.parse(period).bounds(lease.tenant.time_zone)
    # A period past the retention is read from its archive files (common.archives), with
    # the months of the readings that close its edge intervals: a metering gap's reach
    # farther than READING_REACH.
    with archives.readable(start, end, margin=metering_gaps.reach(lease, start, end)):
        return _bundle(lease=lease, period=period, now=now, include_raw=include_raw)


def _bundle(*, lease: Lease, period: str, now: datetime, include_raw: bool) -> dict[str, Any]:
    tenant, zone = lease.tenant, lease.tenant.time_zone
    start, end = Period.parse(period).bounds(zone)
    timeline = TermsTimeline.for_lease(lease)
    versions = list(timeline)
    in_force = {version.version for version in timeline.during(start, end)}
    # The billed window and its SLA figures: the lease month's, as the invoice has them.
    month = lease_month(lease, period, instant=now)
    billed = month.window
    window_start, window_end, accepted = billed.start, billed.end, billed.accepted

    in_period = run_selectors.runs_in_period(lease=lease, start=start, end=end)
    bounds = in_period.filter(chain_index__isnull=False).aggregate(
        lo=Min("chain_index"), hi=Max("chain_index")
    )
    if bounds["lo"] is not None:
        # The stretch takes in the runs the period's traffic samples are rebuilt from.
        reach = ingest.traffic_evidence(lease=lease, start=start, end=end).aggregate(
            lo=Min("chain_index"), hi=Max("chain_index")
        )
        if reach["lo"] is not None:
            bounds = {"lo": min(bounds["lo"], reach["lo"]), "hi": max(bounds["hi"], reach["hi"])}
        # And the throughput samples of a slot that began before the period and reaches
        # into it: they can degrade its first link minutes (gpulease_verify.compliance).
        spanning = run_selectors.spanning_throughput_start(lease=lease, start=start)
        if spanning is not None:
            bounds["lo"] = min(bounds["lo"], spanning)
    runs: list[ProbeRun] = []
    if bounds["lo"] is not None:
        runs = run_selectors.chain_stretch(lease=lease, first=bounds["lo"], last=bounds["hi"])
    if include_raw:
        load_texts(runs)
    window = (window_start, window_end)
    by_pk = {version.pk: version for version in versions}
    sent = sent_of((run.pk, run.slot_at, run.sent_bytes) for run in runs if taxed(run))
    # A confirmation shares its slot, so it lies in the same stretch as the run it confirms.
    confirmations = {
        sample_key(run): effective_verdict(run)
        for run in runs
        if run.trigger == Trigger.CONFIRMATION
    }
    run_entries = [
        _run_entry(
            run,
            zone,
            window,
            start,
            end,
            include_raw,
            by_pk.get(effective_terms_id(run) or 0),
            sent.get(run.pk) if taxed(run) else None,
            confirmations.get(sample_key(run)) if run.trigger == Trigger.SCHEDULE else None,
        )
        for run in runs
    ]
    rejudgements = _rejudgements_doc(lease, runs, bounds["lo"], bounds["hi"])
    head = chain_head(lease_id=lease.pk)  # any link; index 0: none yet
    referenced = {run.terms.version for run in runs if run.terms is not None}
    referenced |= {item.terms.version for item in rejudgements}
    tenant_links = tenant_links_doc(lease)
    referenced |= amended_versions(tenant_links)
    terms_doc = [
        _terms(version, version.version in in_force)
        for version in sorted(versions, key=lambda version: version.version)
        if version.version in in_force
        or version.version in referenced
        or _links_between(version, bounds["lo"], bounds["hi"])
    ]

    rollups = HourlyRollup.objects.filter(lease=lease, hour__gte=start, hour__lt=end).order_by(
        "hour", "kind"
    )
    samples = metering.samples_in(lease_id=lease.pk, start=start, end=end)
    invoice_doc = _invoice_doc(lease, period)
    compliance_doc = None
    credit_doc = None
    incidents_doc, incidents = _incidents_doc(lease, (window_start, window_end))
    if window_start is not None and window_end is not None:
        summary = month.summary
        compliance_doc = {
            "window_start": iso_utc(window_start),
            "window_end": iso_utc(window_end),
            **_compliance_doc(summary),
            "formulas": FORMULAS,
        }
        credit_doc = _credit_doc(
            timeline.at(window_end - timedelta(microseconds=1)),
            summary.credit_compliance_percent,
            invoice_doc["lines"],
            invoicing.credit_spans(list(month.segments)),
            Period.parse(period).seconds(zone),
            (incidents, window_start, window_end),
        )
    telemetry = telemetry_doc(lease, start, end, bounds["lo"], bounds["hi"])
    as_of = min(end, now)
    return {
        "format": FORMAT,
        "generated_at": iso_utc(now),
        "lease": {
            "id": lease.pk,
            "reference": lease.reference,
            "name": lease.name,
            "status": lease.status,
            "starts_at": iso_utc(lease.starts_at),
            "ends_at": iso_utc(lease.ends_at),
        },
        "tenant": {"slug": tenant.slug, "name": tenant.name, "time_zone": zone},
        "period": {
            "period": period,
            "time_zone": zone,
            "start": iso_utc(start),
            "end": iso_utc(end),
            "month_seconds": Period.parse(period).seconds(zone),
        },
        "terms": terms_doc,
        "billing_window": {
            "requires_acceptance": billed.requires_acceptance,
            "start": iso_utc(window_start),
            "end": iso_utc(window_end),
            "billing_start": iso_utc(accepted),
            "note": billed.note,
            "rule": (
                "[max(period start, lease start, billing_start), min(period end, lease end)), "
                "from the first instant a terms version is in force"
            ),
        },
        "chain": {
            "algorithm": "sha256",
            "hash_rule": HASH_RULE,
            "canonical": CANONICAL,
            "genesis": GENESIS,
            "first_index": bounds["lo"],
            "last_index": bounds["hi"],
            "head": {"index": head[0], "hash": head[1]} if head[0] else None,
            "unlinked_runs_in_period": in_period.filter(chain_index__isnull=True).count(),
            "note": (
                "runs are every link from the first to the last link of a run whose slot is "
                "in the period; in_period marks those; unlinked runs are not over yet"
            ),
        },
        "runs": run_entries,
        "rejudgements": [_rejudgement_entry(item) for item in rejudgements],
        "telemetry": telemetry,
        "fabric_health": fabric_health_doc(
            telemetry, timeline.at(as_of - timedelta(microseconds=1)), as_of
        ),
        "acceptance_run": _acceptance_doc(lease, accepted),
        "nodes": _nodes_doc(lease, runs),
        "assignments": _assignments_doc(lease),
        "rollups": [
            {
                "kind": rollup.kind,
                "hour": iso_utc(rollup.hour),
                **{name: getattr(rollup, name) for name in ROLLUP_FIELDS},
                "degraded_weighted": _plain(rollup.degraded_weighted),
                "sum_bps": _plain(rollup.sum_bps),
                "min_bps": rollup.min_bps,
                "max_bps": rollup.max_bps,
            }
            for rollup in rollups
        ],
        "traffic_samples": [
            {
                "slot_at": iso_utc(sample.slot_at),
                "seconds": sample.seconds,
                "tx_bytes": _plain(sample.tx_bytes),
                "rx_bytes": _plain(sample.rx_bytes),
                "nodes": sample.nodes,
                "resets": sample.resets,
                "wraps": sample.wraps,
            }
            for sample in samples.order_by("slot_at")
        ],
        "compliance": compliance_doc,
        "incidents": incidents_doc,
        "credit": credit_doc,
        "invoice": invoice_doc,
        "evidence": _evidence_doc(lease, start, end),
        "disputes": _disputes_doc(lease, period, start, end),
        "checkpoints": checkpoints.documents(lease=lease, period=period),
        "tenant_keys": tenant_keys_doc(lease),
        "tenant_links": tenant_links,
    }
