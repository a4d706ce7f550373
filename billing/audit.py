"""Contract audit: a signed, self-contained bundle of a lease's month, and its verification.

``build_bundle`` gathers everything an auditor needs to recompute the month without our
database: the lease and tenant, the period bounds in the tenant's zone, every terms version
in force, every probe run with its hash-chain link (``benchmarks.chain``), the hourly
rollups and traffic samples billing read, the compliance computation step by step, the SLA
credit and the lease's invoice lines. ``sign_bundle`` signs its canonical JSON with the
provider's Ed25519 key.

``verify`` is the other side and reads no database: it checks the signature, the chain,
then recomputes compliance, the credit and every invoice line's arithmetic from the bundle
alone, with the same pure rules billing uses (``billing.samples``, ``billing.sla``'s
dataclasses, ``billing.calculations``). README, "Contract audit", documents the format.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.db.models import Max, Min, Q
from django.utils import timezone

from benchmarks import chain
from benchmarks.models import ProbeRun
from billing import credit_base, invoicing, metering, sla
from billing.calculations import (
    billable_mbps,
    bytes_to_gb,
    percentile_95,
    prorate,
    sla_credit,
    traffic_charge,
)
from billing.choices import LineKind
from billing.models import Dispute, Evidence, HourlyRollup, Invoice
from billing.samples import OUTCOMES, classify_sample, link_slot_outcome
from common.money import to_fen
from common.periods import Period
from leases.contract_rules import credit_tiers
from leases.models import Lease, LeaseTerms
from leases.selectors import TermsTimeline

FORMAT = "gpulease-audit-bundle/1"
ALGORITHM = "Ed25519"
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


def key_path() -> Path:
    configured = getattr(settings, "AUDIT_SIGNING_KEY", "")
    return Path(configured) if configured else Path(settings.VAR_DIR) / "audit" / "ed25519.pem"


def signing_key() -> Ed25519PrivateKey:
    """The provider's Ed25519 key (PKCS#8 PEM at ``key_path()``), created on first use."""
    path = key_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        try:  # O_EXCL: two workers starting together keep one key
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as handle:
                handle.write(pem)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} does not hold an Ed25519 private key")
    return key


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(public: Ed25519PublicKey) -> str:
    return "sha256:" + hashlib.sha256(_raw(public)).hexdigest()


def public_key_info(public: Ed25519PublicKey | None = None) -> dict[str, str]:
    """What GET /api/v1/audit/public-key/ publishes."""
    public = public or signing_key().public_key()
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return {
        "algorithm": ALGORITHM,
        "public_key": base64.b64encode(_raw(public)).decode(),
        "public_key_pem": pem,
        "fingerprint": fingerprint(public),
    }


def load_public_key(data: bytes | str) -> Ed25519PublicKey:
    """A public key from a PEM text, or the base64 of its 32 raw bytes."""
    text = data.decode() if isinstance(data, bytes) else data
    text = text.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_public_key(text.encode())
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("the PEM key is not an Ed25519 public key")
        return key
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise ValueError("the key is neither PEM nor base64") from None
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key has 32 bytes, not {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def canonical_bytes(bundle: Mapping[str, Any]) -> bytes:
    return chain.canonical_json(bundle).encode("utf-8")


def sign_bundle(bundle: dict[str, Any], key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """The signed document: the bundle, the Ed25519 signature of its canonical JSON and
    the public key to check it with (compare that key with the published one)."""
    key = key or signing_key()
    info = public_key_info(key.public_key())
    return {
        "bundle": bundle,
        "signature": base64.b64encode(key.sign(canonical_bytes(bundle))).decode(),
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
    entry = {name: _plain(getattr(version, name)) for name in TERMS_FIELDS}
    entry["in_force_during_period"] = in_force
    return entry


def _hour(instant: datetime) -> datetime:
    return instant.replace(minute=0, second=0, microsecond=0)


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
    run: ProbeRun, zone: str, window: tuple[Any, Any], start: datetime, end: datetime
) -> dict[str, Any]:
    content = chain.run_content(run)
    counted = bool(
        window[0] is not None
        and run.trigger == "schedule"
        and window[0] <= _hour(run.slot_at) < window[1]
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
    }


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


def _billed(lines: Iterable[Mapping[str, Any]]) -> list[credit_base.BilledLine]:
    return [
        credit_base.BilledLine(
            line["kind"], line["detail"].get("terms_version"), Decimal(line["amount"])
        )
        for line in lines
    ]


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
    base = credit_base.credit_base(spans=spans, lines=_billed(lines), month_seconds=month_seconds)
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


def build_bundle(*, lease: Lease, period: str, now: datetime | None = None) -> dict[str, Any]:
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
    run_entries = [_run_entry(run, zone, window, start, end) for run in runs]
    head = (
        ProbeRun.objects.filter(lease=lease, chain_index__isnull=False)
        .order_by("-chain_index")
        .values_list("chain_index", "run_hash")
        .first()
    )
    referenced = {run.terms.version for run in runs if run.terms is not None}
    terms_doc = [
        _terms(version, version.version in in_force)
        for version in versions
        if version.version in in_force or version.version in referenced
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
            "head": {"index": head[0], "hash": head[1]} if head else None,
            "unlinked_runs_in_period": in_period.filter(chain_index__isnull=True).count(),
            "note": (
                "runs are every link from the first to the last link of a run whose slot is "
                "in the period; in_period marks those; unlinked runs are not over yet"
            ),
        },
        "runs": run_entries,
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
    }


def signed_bundle(*, lease: Lease, period: str, now: datetime | None = None) -> dict[str, Any]:
    return sign_bundle(build_bundle(lease=lease, period=period, now=now))


# --------------------------------------------------------------------------------------
# Verification (pure: the bundle alone)
# --------------------------------------------------------------------------------------


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _dec(text: Any) -> Decimal | None:
    if text is None:
        return None
    try:
        return Decimal(str(text))
    except InvalidOperation:
        return None


class _Checker:
    def __init__(self, bundle: Mapping[str, Any]):
        self.b = bundle
        self.mismatches: list[str] = []
        self.notes: list[str] = []

    def bad(self, text: str) -> None:
        self.mismatches.append(text)

    def same(self, what: str, stated: Any, recomputed: Any) -> None:
        a, b = _dec(stated), _dec(recomputed)
        equal = (a == b) if (a is not None and b is not None) else (stated == recomputed)
        if not equal:
            self.bad(f"{what}: the bundle says {stated}, recomputed {recomputed}")

    # --- chain ------------------------------------------------------------------------

    def chain(self) -> None:
        runs = self.b.get("runs", [])
        for problem in chain.verify_chain(runs):
            self.bad(problem)
        reference = self.b["lease"]["reference"]
        for entry in runs:
            if entry["content"].get("lease") != reference:
                self.bad(
                    f"chain link {entry['chain_index']} is a run of lease "
                    f"{entry['content'].get('lease')}, not {reference}"
                )
        meta = self.b.get("chain", {})
        indexes = [entry["chain_index"] for entry in runs]
        if indexes and (meta.get("first_index"), meta.get("last_index")) != (
            min(indexes),
            max(indexes),
        ):
            self.bad(
                f"the chain section names links {meta.get('first_index')}.."
                f"{meta.get('last_index')}, the runs are links {min(indexes)}..{max(indexes)}"
            )
        self.notes.append(f"chain: {len(runs)} link(s) checked")

    # --- compliance -------------------------------------------------------------------

    def terms_by_version(self) -> dict[int, Mapping[str, Any]]:
        return {int(t["version"]): t for t in self.b.get("terms", [])}

    def recompute(self) -> tuple[dict[str, dict[str, Any]], dict[str, int], dict[Any, Any]]:
        """Counts per kind, availability minutes, and per (kind, hour) counts, from runs."""
        compliance = self.b["compliance"]
        zone = self.b["period"]["time_zone"]
        lo, hi = _at(compliance["window_start"]), _at(compliance["window_end"])
        terms = self.terms_by_version()
        kinds: dict[str, dict[str, Any]] = defaultdict(
            lambda: {**dict.fromkeys(OUTCOMES, 0), "measured": 0}
        )
        hours: dict[tuple[str, datetime], dict[str, int]] = defaultdict(
            lambda: {**dict.fromkeys(OUTCOMES, 0), "measured": 0}
        )
        link_slots: dict[datetime, list[str]] = defaultdict(list)
        slot_minutes: dict[datetime, int] = {}
        for entry in self.b.get("runs", []):
            content = entry["content"]
            slot = _at(content["slot_at"])
            counted = content["trigger"] == "schedule" and lo <= _hour(slot) < hi
            stated = entry.get("sla", {})
            if bool(stated.get("counted")) != counted:
                self.bad(
                    f"run {entry['id']}: the bundle says it is "
                    f"{'' if stated.get('counted') else 'not '}an SLA sample of the window, "
                    f"recomputed {'it is' if counted else 'it is not'}"
                )
            if not counted:
                continue
            version = content.get("terms_version")
            windows = None
            if version is not None:
                if version not in terms:
                    self.bad(
                        f"run {entry['id']} was judged by terms v{version}, "
                        "which the bundle does not contain"
                    )
                else:
                    windows = terms[version]["maintenance_windows"]
            outcome = classify_sample(
                state=content["state"],
                verdict=content["verdict"],
                slot_at=slot,
                maintenance_windows=windows,
                zone=zone,
            )
            if stated.get("outcome") != outcome:
                self.bad(
                    f"run {entry['id']}: the bundle says {stated.get('outcome')}, "
                    f"recomputed {outcome}"
                )
            kind = content["kind"]
            measured = content["state"] == "ok" and bool(content["measured_bps"])
            for bucket in (kinds[kind], hours[(kind, _hour(slot))]):
                bucket[outcome] += 1
                bucket["measured"] += measured
            if kind == "link":
                link_slots[slot].append(outcome)
                deadline = _at(content["deadline_at"])
                slot_minutes[slot] = int((deadline - slot).total_seconds() // 60)
        minutes = {"available": 0, "unavailable": 0, "unknown": 0}
        per_hour_minutes: dict[datetime, dict[str, int]] = defaultdict(
            lambda: {"available": 0, "unavailable": 0, "unknown": 0}
        )
        for slot, outcomes in link_slots.items():
            given = link_slot_outcome(outcomes)
            if given is not None:
                minutes[given] += slot_minutes[slot]
                per_hour_minutes[_hour(slot)][given] += slot_minutes[slot]
        for (kind, hour), bucket in hours.items():
            if kind == "link":
                bucket.update(
                    {f"{name}_minutes": value for name, value in per_hour_minutes[hour].items()}
                )
        return kinds, minutes, hours

    def compliance(self) -> Decimal | None:
        stated = self.b.get("compliance")
        if stated is None:
            self.notes.append("compliance: the lease was not billed in this period")
            return None
        kinds, minutes, hours = self.recompute()
        summary = sla.SlaSummary(
            lease_id=0,
            start=_at(stated["window_start"]),
            end=_at(stated["window_end"]),
            by_kind={
                kind: sla.Compliance(**{name: counts[name] for name in (*OUTCOMES, "measured")})
                for kind, counts in kinds.items()
            },
            availability=sla.Availability(
                available_minutes=minutes["available"],
                unavailable_minutes=minutes["unavailable"],
                unknown_minutes=minutes["unknown"],
            ),
        )
        for kind in sorted(set(kinds) | set(stated["by_kind"])):
            figures = summary.kind(kind)
            said = stated["by_kind"].get(kind, {})
            for name in (*OUTCOMES, "measured"):
                self.same(f"{kind} {name} samples", said.get(name, 0), getattr(figures, name))
            self.same(f"{kind} compliance percent", said.get("compliance_percent"), figures.percent)
            self.same(
                f"{kind} measured-only percent",
                said.get("measured_percent"),
                figures.measured_percent,
            )
        said = stated["availability"]
        for name in ("available", "unavailable", "unknown"):
            self.same(f"{name} minutes", said[f"{name}_minutes"], minutes[name])
        self.same("availability percent", said["percent"], summary.availability.percent)
        self.same(
            "credit compliance percent",
            stated["credit_compliance_percent"],
            summary.credit_compliance_percent,
        )
        self.rollups(hours)
        self.notes.append(
            f"compliance: {sum(k['passed'] + k['failed'] + k['unknown'] for k in kinds.values())}"
            f" sample(s) recomputed; credit compliance {summary.credit_compliance_percent}%"
        )
        return summary.credit_compliance_percent

    def rollups(self, hours: Mapping[tuple[str, datetime], Mapping[str, int]]) -> None:
        compliance = self.b["compliance"]
        lo, hi = _at(compliance["window_start"]), _at(compliance["window_end"])
        stated = {
            (row["kind"], _at(row["hour"])): row
            for row in self.b.get("rollups", [])
            if lo <= _at(row["hour"]) < hi
        }
        for key in sorted(set(stated) | set(hours), key=lambda k: (k[1], k[0])):
            row, counts = stated.get(key, {}), hours.get(key, {})
            names = [*OUTCOMES, "measured"]
            if key[0] == "link":
                names += ["available_minutes", "unavailable_minutes", "unknown_minutes"]
            differing = [
                f"{name} {row.get(name, 0)} vs {counts.get(name, 0)}"
                for name in names
                if row.get(name, 0) != counts.get(name, 0)
            ]
            if differing:
                self.bad(
                    f"hourly rollup {key[0]} {chain.iso_utc(key[1])}: rollup vs runs: "
                    + ", ".join(differing)
                )

    # --- credit and lines ---------------------------------------------------------------

    def terms_at_end(self) -> Mapping[str, Any] | None:
        compliance = self.b.get("compliance")
        if compliance is None:
            return None
        end = _at(compliance["window_end"])
        candidates = [t for t in self.b.get("terms", []) if _at(t["effective_from"]) < end]
        return max(candidates, key=lambda t: _at(t["effective_from"])) if candidates else None

    def credit(self, compliance: Decimal | None) -> None:
        lines = self.b["invoice"]["lines"]
        if self.b.get("compliance") is None:
            return
        terms = self.terms_at_end()
        if terms is None:
            self.bad("no terms version in the bundle was in force at the end of the window")
            return
        fee = sum((Decimal(x["amount"]) for x in lines if x["kind"] == "network_fee"), ZERO)
        base = self.recomputed_base()
        result = sla_credit(
            base=base.amount,
            compliance_percent=compliance,
            tiers=credit_tiers(terms["credit_tiers"]),
            cap_percent=Decimal(terms["credit_cap_percent"]),
        )
        stated = self.b.get("credit") or {}
        self.same("credit network fee", stated.get("network_fee"), fee)
        if "credit_base" in stated:  # bundles made before credit bases were terms: none
            self.same("credit base", stated["credit_base"]["credit_base"], base.basis)
            self.same("credit base amount", stated["credit_base"]["amount"], base.amount)
        self.same("credit percent applied", stated.get("percent_applied"), result.percent_applied)
        self.same("credit amount", stated.get("amount"), result.amount)
        on_invoice = sum(
            (Decimal(x["amount"]) for x in lines if x["kind"] == LineKind.SLA_CREDIT), ZERO
        )
        expected = result.amount if base.amount > 0 else ZERO
        self.same("SLA credit line(s) on the invoice", on_invoice, expected)
        self.notes.append(f"credit: {result.percent_applied}% of {base.name()} = {result.amount}")

    def recomputed_base(self) -> credit_base.CreditBase:
        """The base from the bundle's terms versions over the window and its lines (a
        bundle from before credit bases were terms carries none: the network fee)."""
        window = self.b["compliance"]
        versions = [
            (
                _at(t["effective_from"]),
                int(t["version"]),
                t.get("credit_base", credit_base.NETWORK_FEE),
                Decimal(t.get("contracted_base_per_month", "0")),
            )
            for t in self.b.get("terms", [])
        ]
        spans = credit_base.cut(
            start=_at(window["window_start"]), end=_at(window["window_end"]), versions=versions
        )
        return credit_base.credit_base(
            spans=spans,
            lines=_billed(self.b["invoice"]["lines"]),
            month_seconds=int(self.b["period"]["month_seconds"]),
        )

    def lines(self) -> None:
        period = self.b["period"]
        seconds = int(period["month_seconds"])
        recomputed_month = Period.parse(period["period"]).seconds(period["time_zone"])
        self.same("month seconds", seconds, recomputed_month)
        bounds = Period.parse(period["period"]).bounds(period["time_zone"])
        self.same("period start", _at(period["start"]), bounds[0])
        self.same("period end", _at(period["end"]), bounds[1])
        terms = self.terms_by_version()
        samples = [
            (_at(s["slot_at"]), int(s["seconds"]), int(Decimal(s["tx_bytes"])))
            for s in self.b.get("traffic_samples", [])
        ]
        checked = 0
        for line in self.b["invoice"]["lines"]:
            detail, kind = line["detail"], line["kind"]
            name = f"invoice line {line['position']} ({kind})"
            amount = Decimal(line["amount"])
            checked += 1
            if kind in ("node_rent", "network_fee", "usage_gb", "usage_p95"):
                version = terms.get(int(detail["terms_version"]))
                if version is None:
                    self.bad(f"{name}: its terms version is not in the bundle")
                    continue
                self.segment_line(name, line, version, seconds, samples)
            elif kind == "adjustment" and "dispute" in detail:
                self.same(f"{name} amount", amount, -Decimal(detail["credit_cny"]))
            elif kind == "adjustment":
                self.same(
                    f"{name} amount",
                    amount,
                    Decimal(detail["recomputed_amount"]) - Decimal(detail["finalised_amount"]),
                )
        self.notes.append(f"invoice: {checked} line(s) recomputed")

    def segment_line(
        self,
        name: str,
        line: Mapping[str, Any],
        version: Mapping[str, Any],
        seconds: int,
        samples: list[tuple[datetime, int, int]],
    ) -> None:
        detail, kind, amount = line["detail"], line["kind"], Decimal(line["amount"])
        seg_lo, seg_hi = _at(detail["segment_start"]), _at(detail["segment_end"])
        segment = int((seg_hi - seg_lo).total_seconds())
        self.same(f"{name} segment seconds", detail["segment_seconds"], segment)
        self.same(f"{name} month seconds", detail["month_seconds"], seconds)
        if kind == "node_rent":
            rate = Decimal(version["node_rent_per_month"])
            node_seconds = sum(int(a["seconds_in_segment"]) for a in detail["assignments"])
            self.same(f"{name} node-seconds", detail["node_seconds"], node_seconds)
            self.same(f"{name} monthly rate", detail["monthly_rate"], rate)
            expected = prorate(
                monthly_amount=rate, covered_seconds=node_seconds, period_seconds=seconds
            )
        elif kind == "network_fee":
            fee = Decimal(version["network_fee_per_month"])
            self.same(f"{name} monthly fee", detail["monthly_fee"], fee)
            expected = prorate(monthly_amount=fee, covered_seconds=segment, period_seconds=seconds)
        elif kind == "usage_gb":
            total = sum(size for at, _s, size in samples if seg_lo <= at < seg_hi)
            self.same(f"{name} bytes", detail["bytes"], total)
            self.same(
                f"{name} GB", line["quantity"], bytes_to_gb(total).quantize(invoicing.QUANTITY)
            )
            expected = traffic_charge(
                total_bytes=total, price_per_gb=Decimal(version["price_per_gb"])
            )
        else:  # usage_p95
            rates = [
                Decimal(size) * 8 / length
                for at, length, size in samples
                if seg_lo <= at < seg_hi and length > 0
            ]
            p95 = percentile_95(rates) if rates else None
            mbps = billable_mbps(p95) if p95 is not None else ZERO
            self.same(f"{name} p95 bit/s", detail["p95_bps"], p95)
            self.same(f"{name} billable Mbps", detail["billable_mbps"], mbps)
            expected = prorate(
                monthly_amount=mbps * Decimal(version["price_per_mbps_p95"]),
                covered_seconds=segment,
                period_seconds=seconds,
            )
        self.same(f"{name} amount", amount, to_fen(expected))


def verify_report(
    doc: Mapping[str, Any], public_key: bytes | str | Ed25519PublicKey | None = None
) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of a signed bundle document; see ``verify``."""
    notes: list[str] = []
    missing = [k for k in ("bundle", "signature", "public_key", "algorithm") if k not in doc]
    if missing:
        return [f"not a signed audit bundle: {', '.join(missing)} missing"], notes
    if doc["algorithm"] != ALGORITHM:
        return [f"unknown signature algorithm {doc['algorithm']!r}"], notes
    mismatches: list[str] = []
    try:
        stated_key = load_public_key(doc["public_key"])
        if public_key is None:
            key = stated_key
            notes.append(
                f"signature checked with the key inside the bundle ({fingerprint(key)}); "
                "compare it with the provider's published key"
            )
        else:
            key = (
                public_key
                if isinstance(public_key, Ed25519PublicKey)
                else load_public_key(public_key)
            )
            if _raw(key) != _raw(stated_key):
                mismatches.append(
                    f"the bundle names signing key {fingerprint(stated_key)}, not the given "
                    f"key {fingerprint(key)}"
                )
        key.verify(base64.b64decode(doc["signature"]), canonical_bytes(doc["bundle"]))
        notes.append("signature: valid Ed25519 signature of the bundle's canonical JSON")
    except InvalidSignature:
        mismatches.append(
            "the signature does not verify: the bundle was changed after it was signed, or "
            "signed with another key"
        )
    except (ValueError, TypeError) as error:
        mismatches.append(f"the signature or key cannot be read: {error}")
    bundle = doc["bundle"]
    if not isinstance(bundle, Mapping) or bundle.get("format") != FORMAT:
        return [*mismatches, f"not a {FORMAT} bundle"], notes
    checker = _Checker(bundle)
    try:
        checker.chain()
        compliance = checker.compliance()
        checker.credit(compliance)
        checker.lines()
    except (KeyError, TypeError, ValueError, InvalidOperation) as error:
        checker.bad(f"the bundle is malformed: {type(error).__name__} {error}")
    return [*mismatches, *checker.mismatches], notes + checker.notes


def verify(
    doc: Mapping[str, Any], public_key: bytes | str | Ed25519PublicKey | None = None
) -> list[str]:
    """Every mismatch of a signed audit bundle, as sentences; empty when all agree.

    Reads nothing but the document (and ``public_key``, PEM or base64 raw, when given in
    place of the key the bundle names): the signature, the hash chain, the compliance per
    kind recomputed from the runs, the hourly rollups against the runs, the SLA credit and
    every invoice line's arithmetic."""
    return verify_report(doc, public_key)[0]


__all__ = [
    "FORMAT",
    "build_bundle",
    "canonical_bytes",
    "key_path",
    "load_public_key",
    "public_key_info",
    "sign_bundle",
    "signed_bundle",
    "signing_key",
    "verify",
    "verify_report",
]
