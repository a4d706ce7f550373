"""Contract audit: a signed, self-contained bundle of a lease's month, and its verification.

``build_bundle`` gathers everything an auditor needs to recompute the month without our
database: the lease and tenant, the period bounds in the tenant's zone, every terms version
in force, every probe run with its hash-chain link (``benchmarks.chain``), the hourly
rollups and traffic samples billing read, the compliance computation step by step, the SLA
credit and the lease's invoice lines. ``sign_bundle`` signs its canonical JSON with the
provider's Ed25519 key.

``verify`` is the other side and reads no database: it checks the signature, the chain,
then recomputes compliance, the credit and every invoice line's arithmetic from the bundle
alone, with the same pure rules billing uses (``gpulease_verify.samples``, ``billing.sla``'s
dataclasses, ``gpulease_verify.calculations``). README, "Contract audit", documents the format.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db.models import Max, Min, Q
from django.utils import timezone

from benchmarks import chain
from benchmarks.models import ProbeRun
from benchmarks.selectors import plan_nodes, ports_of
from billing import audit_keys, checkpoints, invoicing, metering, sla
from billing.audit_keys import key_path, signing_key
from billing.models import Dispute, Evidence, HourlyRollup, Invoice
from gpulease_verify import credit_base
from gpulease_verify import window as billed_window
from gpulease_verify.bundle import (
    FORMAT,
    billed_lines,
    canonical_bytes,
    hour_start,
    verify,
    verify_report,
)
from gpulease_verify.calculations import (
    sla_credit,
)
from gpulease_verify.keys import ALGORITHM, fingerprint, load_public_key, public_key_info
from gpulease_verify.periods import Period
from gpulease_verify.samples import OUTCOMES, classify_sample
from gpulease_verify.terms import terms_content
from leases.contract_rules import credit_tiers
from leases.models import Lease, LeaseTerms, Node, NodeAssignment
from leases.selectors import TermsTimeline

ZERO = Decimal("0.00")
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
        "available if all passed, unknown otherwise; percent = available / all x 100, "
        "half-up to 0.001"
    ),
    "credit_compliance_percent": "the lower of throughput compliance_percent and availability",
    "credit": (
        "min(largest credit_percent of the tiers whose below_percent > compliance, cap) % of "
        "the credit base, half-up to 0.01, negative; tiers and cap of the terms version in "
        "force at the end of the window; the base is, per terms version over its part of the "
        "window, what its credit_base names: its network_fee lines, its usage_gb and "
        "usage_p95 lines, or contracted_base_per_month x seconds / month_seconds half-up "
        "to 0.01"
    ),
}


# --------------------------------------------------------------------------------------
# The provider's key
# --------------------------------------------------------------------------------------


def sign_bundle(bundle: dict[str, Any], key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """The signed document: the bundle, the Ed25519 signature of its canonical JSON, the
    key's fingerprint (``key_id``) and the public key (an auditor trusts it only once its
    fingerprint is the published one)."""
    key = key or signing_key()
    info = public_key_info(key.public_key())
    return {
        "bundle": bundle,
        "signature": base64.b64encode(key.sign(canonical_bytes(bundle))).decode(),
        "key_id": info["fingerprint"],
        "public_key": info["public_key"],
        "fingerprint": info["fingerprint"],
        "algorithm": ALGORITHM,
        "canonical": chain.CANONICAL,
    }


# --------------------------------------------------------------------------------------
# Building a bundle (reads the database)
# --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """JSON without floats: Decimals and floats as text, instants as ISO UTC."""
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        return chain.number_text(value)
    if isinstance(value, datetime):
        return chain.iso_utc(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return str(value)


def _terms(version: LeaseTerms, in_force: bool) -> dict[str, Any]:
    """A terms version with its link of the chain: its fields (created_at and the
    acknowledgement among them), chain_index, prev_hash, terms_hash and the content its
    hash covers (``gpulease_verify.terms.terms_content`` of those fields)."""
    entry = chain.terms_fields(version)
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


Window = tuple[datetime | None, datetime | None, datetime | None, str]


def _window(lease: Lease, timeline: TermsTimeline, start: datetime, end: datetime) -> Window:
    """The billed window exactly as invoicing cuts it: (start, end, billing_start, note)."""
    lo = max(start, lease.starts_at)
    hi = min(end, lease.ends_at) if lease.ends_at else end
    accepted = None
    if invoicing._requires_acceptance(timeline):
        accepted = invoicing.billing_start(lease)
        if accepted is None:
            return None, None, None, "the acceptance the terms require has not passed"
        lo = max(lo, accepted)
    parts = invoicing.segments(timeline=timeline, start=lo, end=hi) if lo < hi else []
    if not parts:
        return None, None, accepted, "the lease was not billed in this period"
    return parts[0].start, parts[-1].end, accepted, ""


def _run_entry(
    run: ProbeRun,
    zone: str,
    window: tuple[Any, Any],
    start: datetime,
    end: datetime,
    include_raw: bool = False,
) -> dict[str, Any]:
    content = chain.run_content(run)
    counted = bool(
        window[0] is not None
        and run.trigger == "schedule"
        and window[0] <= hour_start(run.slot_at) < window[1]
    )
    outcome = classify_sample(
        state=run.state,
        verdict=run.verdict,
        slot_at=run.slot_at,
        maintenance_windows=run.terms.maintenance_windows if run.terms else None,
        zone=zone,
    )
    return {
        "id": run.pk,
        "chain_index": run.chain_index,
        "prev_hash": run.prev_hash,
        "run_hash": run.run_hash,
        "content": content,
        "nodes": sorted(node.hostname for node in run.nodes.all()),
        "raw_url": f"/api/v1/probe-runs/{run.pk}/raw/",
        "in_period": start <= run.slot_at < end,
        "sla": {"counted": counted, "outcome": outcome if counted else None},
        **(_raw(run) if include_raw else {}),
    }


def _raw(run: ProbeRun) -> dict[str, str]:
    """What the tool printed, so an auditor re-hashes and re-parses it."""
    return {"raw_output": run.raw_output, **({"stderr": run.stderr} if run.stderr else {})}


def _link_entry(run: ProbeRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "chain_index": run.chain_index,
        "prev_hash": run.prev_hash,
        "run_hash": run.run_hash,
        "content": chain.run_content(run),
    }


def _acceptance_doc(lease: Lease, accepted: datetime | None) -> dict[str, Any] | None:
    """The runs of the first passing acceptance attempt, as chain links: billing starts at
    their latest finish (``gpulease_verify.window.billing_start``)."""
    if accepted is None:
        return None
    runs = (
        ProbeRun.objects.filter(lease=lease, trigger="acceptance", chain_index__isnull=False)
        .exclude(state="skipped")
        .select_related("lease", "terms")
        .order_by("slot_at", "pk")
    )
    attempts: dict[datetime, list[ProbeRun]] = {}
    for run in runs:
        attempts.setdefault(run.slot_at, []).append(run)
    for slot_at, attempt in sorted(attempts.items()):
        rows = [(run.state, run.verdict, run.finished_at) for run in attempt]
        if billed_window.attempt_passes(rows):
            return {
                "slot_at": chain.iso_utc(slot_at),
                "billing_start": chain.iso_utc(accepted),
                "runs": [_link_entry(run) for run in attempt],
            }
    return None


def _nodes_doc(lease: Lease, runs: list[ProbeRun]) -> dict[str, Any]:
    """Hostname -> leaf, GPUs and ports (now) of every node the lease was assigned or a
    run names: what re-reading a link check's raw output needs."""
    ids = set(NodeAssignment.objects.filter(lease=lease).values_list("node_id", flat=True))
    ids |= {node.pk for run in runs for node in run.nodes.all()}
    nodes = list(Node.objects.filter(pk__in=ids).select_related("leaf_switch"))
    plan = plan_nodes(nodes, ports_of(nodes))
    return {
        hostname: {
            "leaf": node.leaf,
            "gpus": node.gpus,
            "ports": [
                {
                    "device": port.device,
                    "port": port.port,
                    "netdev": port.netdev,
                    "address": port.address,
                    "link_layer": port.link_layer,
                    "rate_gbps": port.rate_gbps,
                }
                for port in node.ports
            ],
        }
        for hostname, node in sorted(plan.items())
    }


def _assignments_doc(lease: Lease) -> list[dict[str, Any]]:
    """Every node assignment of the lease, void ones flagged: what node rent reads."""
    return [
        {
            "node": item.node.hostname,
            "assigned_from": chain.iso_utc(item.assigned_from),
            "assigned_until": chain.iso_utc(item.assigned_until),
            "void": item.void,
        }
        for item in NodeAssignment.objects.filter(lease=lease)
        .select_related("node")
        .order_by("assigned_from", "node__hostname", "pk")
    ]


def _compliance_doc(summary: sla.SlaSummary) -> dict[str, Any]:
    def kind(figures: sla.Compliance) -> dict[str, Any]:
        return {
            **{name: getattr(figures, name) for name in OUTCOMES},
            "samples": figures.samples,
            "measured": figures.measured,
            "compliance_percent": _plain(figures.percent),
            "measured_percent": _plain(figures.measured_percent),
        }

    availability = summary.availability
    return {
        "by_kind": {name: kind(figures) for name, figures in sorted(summary.by_kind.items())},
        "availability": {
            "available_minutes": availability.available_minutes,
            "unavailable_minutes": availability.unavailable_minutes,
            "unknown_minutes": availability.unknown_minutes,
            "percent": _plain(availability.percent),
        },
        "credit_compliance_percent": _plain(summary.credit_compliance_percent),
    }


def _line(line: Any, position: int) -> dict[str, Any]:
    return {
        "position": position,
        "kind": str(line.kind),
        "description": line.description,
        "quantity": _plain(line.quantity),
        "unit": line.unit,
        "unit_price": _plain(line.unit_price),
        "amount": _plain(line.amount),
        "detail": _plain(line.detail),
    }


def _invoice_doc(lease: Lease, period: str) -> dict[str, Any]:
    invoice = Invoice.objects.filter(tenant_id=lease.tenant_id, period=period).first()
    if invoice is not None:
        lines = invoice.lines.filter(lease=lease).order_by("position")
        return {
            "source": "invoice",
            "id": invoice.pk,
            "status": invoice.status,
            "period": invoice.period,
            "currency": invoice.currency,
            "tax_rate_percent": _plain(invoice.tax_rate_percent),
            "invoice_subtotal": _plain(invoice.subtotal),
            "invoice_tax": _plain(invoice.tax),
            "invoice_total": _plain(invoice.total),
            "note": "the totals are the whole invoice's; lines are this lease's only",
            "lines": [_line(line, line.position) for line in lines],
            "other_lines": [
                {
                    "position": line.position,
                    "kind": str(line.kind),
                    "lease": line.lease.reference if line.lease else None,
                    "amount": _plain(line.amount),
                    "terms_tax_rate_percent": line.detail.get("terms_tax_rate_percent"),
                }
                for line in invoice.lines.exclude(lease=lease)
                .select_related("lease")
                .order_by("position")
            ],
        }
    computed = []
    if lease.status in invoicing.BILLED_STATUSES:
        computed = invoicing.lease_lines(lease=lease, period=period, zone=lease.tenant.time_zone)
    return {
        "source": "computed",
        "id": None,
        "status": None,
        "period": period,
        "currency": "CNY",
        "note": "no invoice drafted yet: the lease's lines as they would be drafted now",
        "lines": [_line(line, position) for position, line in enumerate(computed, start=1)],
    }


def _base_doc(base: credit_base.CreditBase) -> dict[str, Any]:
    return {
        "credit_base": base.basis,
        "amount": _plain(base.amount),
        "parts": [
            {
                "terms_version": part.span.terms_version,
                "credit_base": part.span.basis,
                "start": chain.iso_utc(part.span.start),
                "end": chain.iso_utc(part.span.end),
                "amount": _plain(part.amount),
            }
            for part in base.parts
        ],
    }


def _credit_doc(
    terms: LeaseTerms | None,
    compliance: Decimal | None,
    lines: list[dict[str, Any]],
    spans: list[credit_base.Span],
    month_seconds: int,
) -> dict[str, Any] | None:
    if terms is None:
        return None
    fee = sum((Decimal(line["amount"]) for line in lines if line["kind"] == "network_fee"), ZERO)
    base = credit_base.credit_base(
        spans=spans, lines=billed_lines(lines), month_seconds=month_seconds
    )
    tiers = credit_tiers(terms.credit_tiers)
    result = sla_credit(
        base=base.amount,
        compliance_percent=compliance,
        tiers=tiers,
        cap_percent=terms.credit_cap_percent,
    )
    return {
        "terms_version": terms.version,
        "credit_base": _base_doc(base),
        "network_fee": _plain(fee),
        "compliance_percent": _plain(compliance),
        "tiers": [{"below_percent": str(b), "credit_percent": str(c)} for b, c in tiers],
        "cap_percent": _plain(terms.credit_cap_percent),
        "tier_percent": _plain(result.tier_percent),
        "percent_applied": _plain(result.percent_applied),
        "capped": result.capped,
        "reason": str(result.reason),
        "amount": _plain(result.amount),
    }


def _evidence_doc(lease: Lease, start: datetime, end: datetime) -> list[dict[str, Any]]:
    items = (
        Evidence.objects.filter(lease=lease, measured_at__gte=start, measured_at__lt=end)
        .select_related("terms")
        .prefetch_related("nodes")
        .order_by("measured_at", "pk")
    )
    return [
        {
            "id": item.pk,
            "tool": item.tool,
            "measured_at": chain.iso_utc(item.measured_at),
            "submitted_at": chain.iso_utc(item.created_at),
            "nodes": sorted(node.hostname for node in item.nodes.all()),
            "raw_sha256": item.raw_sha256,
            "parsed": chain.canonical_json(item.parsed),
            "measured_bps": item.measured_bps,
            "latency_us": chain.number_text(item.latency_us),
            "terms_version": item.terms.version,
            "verdict": item.verdict,
            "rule": item.rule,
            "verdict_reason": item.verdict_reason,
        }
        for item in items
    ]


def _disputes_doc(lease: Lease, period: str, start: datetime, end: datetime) -> list[Any]:
    disputes = (
        Dispute.objects.filter(lease=lease)
        .filter(Q(created_at__gte=start, created_at__lt=end) | Q(credit_period=period))
        .prefetch_related("events", "evidence")
        .order_by("created_at", "pk")
    )
    return [
        {
            "id": dispute.pk,
            "state": dispute.state,
            "probe_run": dispute.probe_run_id,
            "incident": dispute.incident_id,
            "invoice": dispute.invoice_id,
            "reason": dispute.reason,
            "evidence": sorted(item.pk for item in dispute.evidence.all()),
            "decision_reason": dispute.decision_reason,
            "credit_cny": _plain(dispute.credit_cny),
            "credit_period": dispute.credit_period or None,
            "events": [
                {
                    "at": chain.iso_utc(event.at),
                    "action": event.action,
                    "reason": event.reason,
                    "detail": _plain(event.detail),
                }
                for event in dispute.events.all()
            ],
        }
        for dispute in disputes
    ]


def build_bundle(
    *, lease: Lease, period: str, now: datetime | None = None, include_raw: bool = False
) -> dict[str, Any]:
    """The self-contained audit bundle of a lease for a month (tenant zone). Links any
    finished run not yet in the chain first, so every finished run of the month is in it."""
    invoicing.check_period(period)
    now = now or timezone.now()
    lease = Lease.objects.select_related("tenant").get(pk=lease.pk)
    chain.link_pending(lease_id=lease.pk, now=now)
    tenant, zone = lease.tenant, lease.tenant.time_zone
    start, end = Period.parse(period).bounds(zone)
    timeline = TermsTimeline.for_lease(lease)
    versions = list(timeline)
    in_force = {
        version.version
        for i, version in enumerate(versions)
        if version.effective_from < end
        and (i + 1 == len(versions) or versions[i + 1].effective_from > start)
    }
    window_start, window_end, accepted, window_note = _window(lease, timeline, start, end)

    in_period = ProbeRun.objects.filter(lease=lease, slot_at__gte=start, slot_at__lt=end)
    bounds = in_period.filter(chain_index__isnull=False).aggregate(
        lo=Min("chain_index"), hi=Max("chain_index")
    )
    runs: list[ProbeRun] = []
    if bounds["lo"] is not None:
        runs = list(
            ProbeRun.objects.filter(
                lease=lease, chain_index__gte=bounds["lo"], chain_index__lte=bounds["hi"]
            )
            .select_related("lease", "terms")
            .prefetch_related("nodes")
            .order_by("chain_index")
        )
    window = (window_start, window_end)
    run_entries = [_run_entry(run, zone, window, start, end, include_raw) for run in runs]
    head = chain.chain_head(lease_id=lease.pk)  # run or terms link; index 0: none yet
    referenced = {run.terms.version for run in runs if run.terms is not None}
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
    if window_start is not None and window_end is not None:
        summary = sla.evaluate(lease=lease, start=window_start, end=window_end)
        compliance_doc = {
            "window_start": chain.iso_utc(window_start),
            "window_end": chain.iso_utc(window_end),
            **_compliance_doc(summary),
            "formulas": FORMULAS,
        }
        credit_doc = _credit_doc(
            timeline.at(window_end - timedelta(microseconds=1)),
            summary.credit_compliance_percent,
            invoice_doc["lines"],
            invoicing.credit_spans(
                invoicing.segments(timeline=timeline, start=window_start, end=window_end)
            ),
            Period.parse(period).seconds(zone),
        )
    return {
        "format": FORMAT,
        "generated_at": chain.iso_utc(now),
        "lease": {
            "id": lease.pk,
            "reference": lease.reference,
            "name": lease.name,
            "status": lease.status,
            "starts_at": chain.iso_utc(lease.starts_at),
            "ends_at": chain.iso_utc(lease.ends_at),
        },
        "tenant": {"slug": tenant.slug, "name": tenant.name, "time_zone": zone},
        "period": {
            "period": period,
            "time_zone": zone,
            "start": chain.iso_utc(start),
            "end": chain.iso_utc(end),
            "month_seconds": Period.parse(period).seconds(zone),
        },
        "terms": terms_doc,
        "billing_window": {
            "requires_acceptance": invoicing._requires_acceptance(timeline),
            "start": chain.iso_utc(window_start),
            "end": chain.iso_utc(window_end),
            "billing_start": chain.iso_utc(accepted),
            "note": window_note,
            "rule": (
                "[max(period start, lease start, billing_start), min(period end, lease end)), "
                "from the first instant a terms version is in force"
            ),
        },
        "chain": {
            "algorithm": "sha256",
            "hash_rule": chain.HASH_RULE,
            "canonical": chain.CANONICAL,
            "genesis": chain.GENESIS,
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
        "acceptance_run": _acceptance_doc(lease, accepted),
        "nodes": _nodes_doc(lease, runs),
        "assignments": _assignments_doc(lease),
        "rollups": [
            {
                "kind": rollup.kind,
                "hour": chain.iso_utc(rollup.hour),
                **{name: getattr(rollup, name) for name in ROLLUP_FIELDS},
                "sum_bps": _plain(rollup.sum_bps),
                "min_bps": rollup.min_bps,
                "max_bps": rollup.max_bps,
            }
            for rollup in rollups
        ],
        "traffic_samples": [
            {
                "slot_at": chain.iso_utc(sample.slot_at),
                "seconds": sample.seconds,
                "tx_bytes": _plain(sample.tx_bytes),
                "nodes": sample.nodes,
                "resets": sample.resets,
                "wraps": sample.wraps,
            }
            for sample in samples.order_by("slot_at")
        ],
        "compliance": compliance_doc,
        "credit": credit_doc,
        "invoice": invoice_doc,
        "evidence": _evidence_doc(lease, start, end),
        "disputes": _disputes_doc(lease, period, start, end),
        "checkpoints": checkpoints.documents(lease=lease, period=period),
    }


def signed_bundle(
    *, lease: Lease, period: str, now: datetime | None = None, include_raw: bool = False
) -> dict[str, Any]:
    return sign_bundle(build_bundle(lease=lease, period=period, now=now, include_raw=include_raw))


def published_key_info() -> dict[str, Any]:
    """What GET /api/v1/audit/public-key/ publishes: the current signing key's public half,
    and ``keys``, every current and retired key with its validity (``audit_keys``)."""
    return {**public_key_info(signing_key().public_key()), "keys": audit_keys.published_keys()}


__all__ = [
    "FORMAT",
    "build_bundle",
    "canonical_bytes",
    "fingerprint",
    "key_path",
    "load_public_key",
    "published_key_info",
    "sign_bundle",
    "signed_bundle",
    "signing_key",
    "verify",
    "verify_report",
]
