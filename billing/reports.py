"""The SLA report of a lease for a billing period: one JSON-ready document for the
sla_report command, the API and the customer's pages."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from billing import impact, sla
from billing.lease_month import LeaseMonth, lease_month
from incidents import repair
from incidents import selectors as incident_selectors
from leases.models import Lease

POLICY = (
    "Samples that measured nothing (failed, timed out, unreachable, unparsable or missed "
    "probes) are unknown and count against the provider: compliance = passed / (passed + "
    "failed + unknown). Samples inside maintenance windows are excluded, and so are scheduled "
    "slots that the tenant's own run-now probes crowded out (skipped, 'busy with "
    "tenant-requested runs'). Credits use the "
    "lower of throughput compliance and availability."
)


def _iso(instant: datetime | None) -> str | None:
    return instant.isoformat() if instant else None


def _compliance(figures: sla.Compliance) -> dict[str, Any]:
    return {
        "passed": figures.passed,
        "failed": figures.failed,
        "unknown": figures.unknown,
        "excluded": figures.excluded,
        "informational": figures.informational,
        "compliance_percent": str(figures.percent) if figures.percent is not None else None,
        "measured_compliance_percent": (
            str(figures.measured_percent) if figures.measured_percent is not None else None
        ),
        "mean_bps": int(figures.mean_bps) if figures.mean_bps is not None else None,
        "min_bps": figures.min_bps,
        "max_bps": figures.max_bps,
    }


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def sla_report(
    *,
    lease: Lease,
    period: str,
    model: impact.Model | None = None,
    now: datetime | None = None,
    month: LeaseMonth | None = None,
) -> dict[str, Any]:
    """The report of the lease month (``billing.lease_month``): its billed window, the terms
    versions in force in it, compliance, availability, credit, incidents and training
    impact. A month that bills nothing (not accepted yet, or outside the lease) has no
    window and no figures. ``month``: the lease month the caller has already read."""
    model = model or impact.Model()
    month = month or lease_month(lease, period, instant=now or timezone.now())
    window = month.window
    start, end = window.month_start, window.month_end
    summary, month_credit = month.summary, month.credit
    window_start = window.start or start
    window_end = window.end or start
    compliance = summary.credit_compliance_percent
    credit = None
    if month_credit is not None:
        result = month_credit.result
        credit = {
            "on_network_fee": str(month_credit.network_fee),
            "credit_base": month_credit.base.basis,
            "credit_base_amount": str(month_credit.base.amount),
            "terms_version": month_credit.terms.version,
            "tier_percent": str(result.tier_percent),
            "percent_applied": str(result.percent_applied),
            "capped": result.capped,
            "amount": str(result.amount),
            "reason": str(result.reason),
            # The repair-time objective's credit (gpulease_verify.repair), and the month's
            # whole credit: what the invoice line (or voucher) carries.
            "repair": month_credit.repair.as_dict(),
            "total_percent_applied": str(month_credit.percent_applied),
            "total_amount": str(month_credit.amount),
        }
    # Training impact counts elapsed time only: never the rest of a month in progress.
    elapsed_end = (month.elapsed or (window_start, window_end))[1]
    gpus, per_node = impact.lease_gpus(lease, elapsed_end - (elapsed_end - window_start) / 2)
    incidents = []
    overlapping = (
        list(
            incident_selectors.overlapping(lease=lease, start=window_start, end=window_end)
            .select_related("terms")
            .prefetch_related("runs")
        )
        if month.billed
        else []
    )
    missed = (
        {fault.id for fault in month_credit.repair.misses} if month_credit is not None else set()
    )
    objective = month_credit.terms.repair_objective_minutes if month_credit is not None else None
    for incident in overlapping:
        duration_end = incident.closed_at or elapsed_end
        incidents.append(
            {
                "id": incident.pk,
                "kind": incident.kind,
                "target": incident.target,
                "pattern": incident.pattern,
                "state": incident.state,
                "opened_at": _iso(incident.opened_at),
                "closed_at": _iso(incident.closed_at),
                "acknowledged_at": _iso(incident.acknowledged_at),
                "mitigated_at": _iso(incident.mitigated_at),
                "repair_minutes": _text(repair.repair_minutes(incident)),
                # Counted against the month's repair-time objective and over it (null:
                # the terms set none, or the fault is no network fault resolved this month).
                "missed_repair_objective": (
                    incident.pk in missed
                    if objective is not None
                    and incident.kind in repair.REPAIR_KINDS
                    and incident.closed_at is not None
                    and window_start <= incident.closed_at < window_end
                    else None
                ),
                "violations": incident.violations,
                "worst_bps": incident.worst_bps,
                "worst_latency_us": incident.worst_latency_us,
                "rule": incident.rule,
                "evidence_run_ids": sorted(run.pk for run in incident.runs.all()),
                "training_impact": impact.estimate(
                    terms=incident.terms,
                    gpus=gpus,
                    gpus_per_node=per_node,
                    measured_bps=incident.worst_bps or 0,
                    wall_hours=Decimal((duration_end - incident.opened_at).total_seconds()) / 3600,
                    model=model,
                ),
            }
        )
    return {
        "lease": lease.reference,
        "tenant": lease.tenant.slug,
        "period": period,
        "time_zone": lease.tenant.time_zone,
        "period_start": _iso(start),
        "period_end": _iso(end),
        "billed_from": _iso(window.start),
        "billed_until": _iso(window.end),
        "requires_acceptance": window.requires_acceptance,
        "billing_start": _iso(window.accepted),
        "not_billed": window.note or None,
        "terms_versions": [
            {
                "version": version.version,
                "effective_from": _iso(version.effective_from),
                "contracted_bandwidth_gbps": str(version.contracted_bandwidth_gbps),
                "sla_threshold_percent": str(version.sla_threshold_percent),
                "billing_mode": version.billing_mode,
            }
            for version in month.terms
        ],
        "throughput": _compliance(summary.throughput),
        "link": _compliance(summary.kind("link")),
        "latency": _compliance(summary.kind("latency")),
        "collective": _compliance(summary.kind("collective")),
        "availability": {
            "available_minutes": summary.availability.available_minutes,
            "unavailable_minutes": summary.availability.unavailable_minutes,
            "unknown_minutes": summary.availability.unknown_minutes,
            **summary.availability.counts(),
            "degraded_weighted": str(summary.availability.degraded_weighted),
            "percent": (
                str(summary.availability.percent)
                if summary.availability.percent is not None
                else None
            ),
        },
        "credit_compliance_percent": str(compliance) if compliance is not None else None,
        "credit": credit,
        "incidents": incidents,
        "time_to_repair": repair.time_to_repair(
            overlapping, start=window_start, end=window_end
        ).as_dict(),
        # The terms' repair-time objective, the faults over it and their credit (null:
        # no objective, or no credit base this month).
        "repair_objective": (
            month_credit.repair.as_dict()
            if month_credit is not None and objective is not None
            else None
        ),
        "training_impact": (
            impact.window_impact(lease=lease, start=window_start, end=elapsed_end, model=model)
            if month.billed
            else None
        ),
        "policy": POLICY,
    }
