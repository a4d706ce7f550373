"""Writes for customer evidence and disputes.

A customer (tenant admin) posts the raw output of their own iperf3, perftest, nccl-tests
or ping run with the nodes it ran on. It is parsed by the probes' own parsers and judged
by the probes' own verdicts against the terms in force when it was measured
(``benchmarks.probes.interpret``), so the customer's figure and the provider's are read the
same way. Unparsable output is refused with the parser's reason, and so is a parsed
figure no row can hold. Text the database cannot keep (a NUL byte, which no tool prints
and PostgreSQL refuses; a lone surrogate, which is not UTF-8) is refused with that reason
before anything is parsed.

A dispute names what it is about (a probe run, an incident, an invoice) and may bring
evidence. Provider staff accept it, with a credit that goes on the tenant's invoice for
the month of acceptance (``billing.invoicing`` adds it as an adjustment line), or reject
it with a reason. Each step is one transaction that writes a DisputeEvent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.choices import Role
from accounts.selectors import has_role, require_tenant_admin
from benchmarks.choices import Tool
from benchmarks.models import ProbeRun
from benchmarks.probes.interpret import Interpretation, interpret
from benchmarks.recording import terms_view
from billing.choices import BILLED_INVOICE_STATUSES
from billing.models import Dispute, DisputeEvent, DisputeState, Evidence, EvidenceTool, Invoice
from common.dbfunctions import OctetLength
from common.locks import lock_in_key_order, locking
from common.querysets import is_provider_staff
from gpulease_verify import cosign as cosign_rules
from gpulease_verify.canonical import iso_utc
from gpulease_verify.money import FEN
from gpulease_verify.parsers import ParseError, RunFailed, parse_perftest
from gpulease_verify.parsers.base import storable
from gpulease_verify.periods import Period
from incidents.models import Incident
from leases import cosign
from leases.models import Lease
from leases.selectors import assignments_in_force, lease_row, terms_in_force
from leases.services import lock_lease

# Raw output a customer may post (the probes cap their own output well below this).
EVIDENCE_MAX_BYTES = 1024 * 1024
# A clock a little ahead of ours is not a measurement from the future.
CLOCK_SKEW = timedelta(minutes=5)
PAIR_TOOLS = frozenset({EvidenceTool.IPERF3, EvidenceTool.PERFTEST, EvidenceTool.PING})
REASON_MAX = 4000


# --- who may do what ------------------------------------------------------------------


def can_write_for(user: Any, lease: Lease) -> bool:
    """Provider staff who hold billing.add_evidence, or an admin of the lease's tenant
    (viewers and auditors only read)."""
    if is_provider_staff(user):
        return user.has_perm("billing.add_evidence")
    if not (user and user.is_authenticated and user.is_active):
        return False
    return has_role(user, lease.tenant_id, [Role.ADMIN])


def _require_writer(user: Any, lease: Lease) -> None:
    if not can_write_for(user, lease):
        raise PermissionDenied(
            _("Only an admin of the tenant or provider staff can do this for lease %(lease)s.")
            % {"lease": lease.reference}
        )


def _require_staff(user: Any, permission: str) -> None:
    if not is_provider_staff(user):
        raise PermissionDenied(_("Only provider staff decide disputes."))
    if not user.has_perm(permission):
        raise PermissionDenied(
            _("This needs the permission %(permission)s.") % {"permission": permission}
        )


def _reason(text: str, field: str = "reason") -> str:
    cleaned = (text or "").strip()
    if not cleaned:
        raise ValidationError({field: _("Give a reason.")})
    if len(cleaned) > REASON_MAX:
        raise ValidationError(
            {field: _("A reason is at most %(n)s characters.") % {"n": REASON_MAX}}
        )
    return cleaned


# --- evidence -------------------------------------------------------------------------


def _probe_tool(tool: str, raw_output: str) -> str:
    """The probe tool whose interpretation applies to a customer's tool output."""
    if tool == EvidenceTool.IPERF3:
        return Tool.IPERF3
    if tool == EvidenceTool.PING:
        return Tool.PING
    if tool == EvidenceTool.NCCL_TESTS:
        return Tool.ALL_REDUCE_PERF
    return Tool.IB_WRITE_LAT if parse_perftest(raw_output).kind == "lat" else Tool.IB_WRITE_BW


def _storable_text(value: str, field: str) -> str:
    if "\x00" in value:
        raise ValidationError(
            {
                field: _(
                    "The text contains NUL bytes (\\0): no tool prints them and the database "
                    "cannot keep them. Remove them and submit again."
                )
            }
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError({field: _("The text is not valid UTF-8.")}) from None
    return value


def _storable_result(result: Interpretation) -> Interpretation:
    """ParseError unless every figure of the parser's result fits its column."""
    if result.measured_bps is not None:
        storable(result.measured_bps, "the measured bandwidth")
    if result.latency_us is not None:
        storable(result.latency_us, "the measured latency")
    try:
        encoded = json.dumps(result.parsed, allow_nan=False)
    except (TypeError, ValueError):
        raise ParseError("the parsed result holds a figure that is not a finite number") from None
    if "\\u0000" in encoded:
        raise ParseError("the parsed result holds a NUL character")
    return result


def _nodes_of(lease: Lease, hostnames: Sequence[str], at: datetime, tool: str) -> list[Any]:
    names = [str(name).strip() for name in hostnames]
    if not names or any(not name for name in names):
        raise ValidationError({"nodes": _("Name the nodes the measurement ran on.")})
    if len(set(names)) != len(names):
        raise ValidationError({"nodes": _("A node is named twice.")})
    if tool in PAIR_TOOLS and len(names) != 2:
        raise ValidationError(
            {"nodes": _("%(tool)s measures between two nodes: name exactly two.") % {"tool": tool}}
        )
    held = {
        assignment.node.hostname: assignment.node
        for assignment in assignments_in_force(lease=lease, at=at)
    }
    foreign = [name for name in names if name not in held]
    if foreign:
        raise ValidationError(
            {
                "nodes": _("%(nodes)s was not a node of lease %(lease)s at %(at)s.")
                % {
                    "nodes": ", ".join(foreign),
                    "lease": lease.reference,
                    "at": at.astimezone(ZoneInfo(lease.tenant.time_zone)).strftime(
                        "%Y-%m-%d %H:%M"
                    ),
                }
            }
        )
    return [held[name] for name in names]


def _check_quota(lease: Lease, raw_output: str) -> None:
    """Refuse evidence beyond the lease's quota: EVIDENCE_MAX_PER_LEASE pieces, or
    EVIDENCE_MAX_BYTES_PER_LEASE bytes of raw output in all. The lease's row is locked
    first (until the caller's transaction ends), so two submissions at once cannot both
    take the last place."""
    lock_in_key_order(lease_row(pk=lease.pk))
    held = Evidence.objects.filter(lease=lease).aggregate(
        count=Count("pk"), size=Coalesce(Sum(OctetLength("raw_output")), 0)
    )
    cap = settings.EVIDENCE_MAX_PER_LEASE
    if held["count"] >= cap:
        raise ValidationError(
            _(
                "Lease %(lease)s has reached its evidence quota (%(cap)d); ask your provider "
                "to raise it."
            )
            % {"lease": lease.reference, "cap": cap}
        )
    size, cap = len(raw_output.encode()), settings.EVIDENCE_MAX_BYTES_PER_LEASE
    if held["size"] + size > cap:
        raise ValidationError(
            {
                "raw_output": _(
                    "This output (%(size)d bytes) would take the evidence of lease "
                    "%(lease)s to %(total)d bytes, over its quota of %(cap)d bytes; ask your "
                    "provider to raise it."
                )
                % {
                    "size": size,
                    "lease": lease.reference,
                    "total": held["size"] + size,
                    "cap": cap,
                }
            }
        )


@transaction.atomic
def submit_evidence(
    *,
    lease: Lease,
    user: Any,
    tool: str,
    raw_output: str,
    nodes: Sequence[str],
    measured_at: datetime | None = None,
    note: str = "",
    now: datetime | None = None,
) -> Evidence:
    """Parse, judge and store a customer's own measurement on the lease. Refused
    (ValidationError, by field) when the output does not parse (the parser's reason), the
    run itself failed, a node is not the lease's at ``measured_at`` (default now), or no
    terms were in force then."""
    _require_writer(user, lease)
    now = now or timezone.now()
    if tool not in EvidenceTool.values:
        raise ValidationError(
            {
                "tool": _("Unknown tool %(tool)r; give one of %(known)s.")
                % {"tool": tool, "known": ", ".join(EvidenceTool.values)}
            }
        )
    if not isinstance(raw_output, str) or not raw_output.strip():
        raise ValidationError({"raw_output": _("The raw output is empty.")})
    _storable_text(raw_output, "raw_output")
    note = _storable_text(str(note or ""), "note")
    if len(raw_output.encode()) > EVIDENCE_MAX_BYTES:
        raise ValidationError(
            {"raw_output": _("The raw output is over %(n)s bytes.") % {"n": EVIDENCE_MAX_BYTES}}
        )
    measured_at = measured_at or now
    if measured_at > now + CLOCK_SKEW:
        raise ValidationError({"measured_at": _("A measurement cannot come from the future.")})
    terms = terms_in_force(lease=lease, at=measured_at)
    if terms is None:
        raise ValidationError(
            {
                "measured_at": _("No terms of lease %(lease)s were in force then.")
                % {"lease": lease.reference}
            }
        )
    node_objects = _nodes_of(lease, nodes, measured_at, tool)
    try:
        result = _storable_result(
            interpret(
                tool=_probe_tool(tool, raw_output), raw_output=raw_output, terms=terms_view(terms)
            )
        )
    except RunFailed as error:
        raise ValidationError(
            {"raw_output": _("The run itself failed: %(reason)s") % {"reason": error}}
        ) from None
    except ParseError as error:
        raise ValidationError(
            {
                "raw_output": _("Unparsable %(tool)s output: %(reason)s")
                % {"tool": tool, "reason": error}
            }
        ) from None
    _check_quota(lease, raw_output)
    evidence = Evidence.objects.create(
        lease=lease,
        submitted_by=user,
        tool=tool,
        measured_at=measured_at,
        raw_output=raw_output,
        raw_sha256=hashlib.sha256(raw_output.encode()).hexdigest(),
        parsed=result.parsed,
        measured_bps=result.measured_bps,
        latency_us=result.latency_us,
        terms=terms,
        verdict=result.judgement.verdict,
        rule=result.judgement.rule,
        verdict_reason=result.judgement.reason,
        note=note.strip()[:REASON_MAX],
    )
    evidence.nodes.set(node_objects)
    return evidence


# --- disputes -------------------------------------------------------------------------


def _event(dispute: Dispute, action: str, user: Any, at: datetime, reason: str = "", **detail: Any):  # type: ignore[no-untyped-def]
    return DisputeEvent.objects.create(
        dispute=dispute, action=action, actor=user, at=at, reason=reason, detail=detail
    )


def _check_evidence(lease: Lease, evidence: Iterable[Evidence]) -> list[Evidence]:
    items = list(evidence)
    foreign = [item.pk for item in items if item.lease_id != lease.pk]
    if foreign:
        raise ValidationError(
            {
                "evidence": _("Evidence %(ids)s is not evidence on lease %(lease)s.")
                % {"ids": ", ".join(map(str, foreign)), "lease": lease.reference}
            }
        )
    return items


def dispute_content(
    *,
    lease: Lease,
    user: Any,
    reason: str,
    at: datetime,
    probe_run: ProbeRun | None = None,
    incident: Incident | None = None,
    invoice: Invoice | None = None,
    evidence: Iterable[Evidence] = (),
) -> dict[str, Any]:
    """What a tenant admin signs to open a dispute (``gpulease_verify.cosign``): the
    reason as it is kept (trimmed), what it is about and the evidence it brings."""
    return cosign_rules.dispute_content(
        tenant=lease.tenant.slug,
        lease=lease.reference,
        by=user.get_username(),
        role=Role.ADMIN,
        at=iso_utc(at) or "",
        reason=_reason(reason),
        probe_run=None
        if probe_run is None
        else {"id": probe_run.pk, "run_hash": probe_run.run_hash or None},
        incident=None if incident is None else incident.pk,
        invoice=None if invoice is None else {"id": invoice.pk, "number": invoice.number},
        evidence=[{"id": item.pk, "raw_sha256": item.raw_sha256} for item in evidence],
    )


@transaction.atomic
def open_dispute(
    *,
    lease: Lease,
    user: Any,
    reason: str,
    probe_run: ProbeRun | None = None,
    incident: Incident | None = None,
    invoice: Invoice | None = None,
    evidence: Iterable[Evidence] = (),
    now: datetime | None = None,
    signed_at: datetime | None = None,
    signature: str | None = None,
) -> Dispute:
    """Open a dispute about a probe run's verdict, an incident or an invoice of the lease
    (at least one), attaching the tenant's evidence on that lease. Only the tenant opens
    one: an admin of the lease's tenant, never provider staff (who decide it). A tenant
    with a signing key signs ``dispute_content`` (at ``signed_at``, the dispute's time);
    the signature becomes a tenant link of the lease's chain (``leases.cosign``)."""
    lease = lock_lease(pk=lease.pk)
    require_tenant_admin(
        user,
        lease.tenant,
        _("Only a tenant admin of %(tenant)s can open a dispute on lease %(lease)s.")
        % {"tenant": lease.tenant.name, "lease": lease.reference},
    )
    now = signed_at or now or timezone.now()
    text = _reason(reason)
    if probe_run is None and incident is None and invoice is None:
        raise ValidationError(
            _("A dispute is about a probe run, an incident or an invoice: name one.")
        )
    if probe_run is not None and probe_run.lease_id != lease.pk:
        raise ValidationError(
            {
                "probe_run": _("This probe run is not of lease %(lease)s.")
                % {"lease": lease.reference}
            }
        )
    if incident is not None and incident.lease_id != lease.pk:
        raise ValidationError(
            {"incident": _("This incident is not of lease %(lease)s.") % {"lease": lease.reference}}
        )
    if invoice is not None and invoice.tenant_id != lease.tenant_id:
        raise ValidationError(
            {
                "invoice": _("This invoice is not of lease %(lease)s's tenant.")
                % {"lease": lease.reference}
            }
        )
    items = _check_evidence(lease, evidence)
    signed = dispute_content(
        lease=lease,
        user=user,
        reason=text,
        at=now,
        probe_run=probe_run,
        incident=incident,
        invoice=invoice,
        evidence=items,
    )
    key = cosign.cosignature(tenant=lease.tenant, content=signed, signature=signature)
    dispute = Dispute.objects.create(
        lease=lease,
        probe_run=probe_run,
        incident=incident,
        invoice=invoice,
        opened_by=user,
        reason=text,
    )
    dispute.evidence.set(items)
    _event(
        dispute,
        DisputeEvent.Action.OPENED,
        user,
        now,
        text,
        probe_run=probe_run.pk if probe_run else None,
        incident=incident.pk if incident else None,
        invoice=invoice.pk if invoice else None,
        evidence=[item.pk for item in items],
        **({"signed_with": key} if key else {}),
    )
    if key is not None:
        cosign.record(
            lease=lease,
            kind=cosign_rules.DISPUTE,
            signed=signed,
            signature=signature,
            key=key,
            extra={"dispute": dispute.pk},
        )
    return dispute


def _locked_open(dispute: Dispute) -> Dispute:
    locked = locking(Dispute.objects).select_related("lease__tenant").get(pk=dispute.pk)
    if locked.state != DisputeState.OPEN:
        raise ValidationError(
            _("Dispute #%(id)s is already %(state)s.")
            % {"id": locked.pk, "state": locked.get_state_display()}
        )
    return locked


@transaction.atomic
def attach_evidence(
    *, dispute: Dispute, user: Any, evidence: Iterable[Evidence], now: datetime | None = None
) -> Dispute:
    """Add evidence to an open dispute."""
    _require_writer(user, dispute.lease)
    now = now or timezone.now()
    locked = _locked_open(dispute)
    items = _check_evidence(locked.lease, evidence)
    if not items:
        raise ValidationError({"evidence": _("Attach at least one piece of evidence.")})
    locked.evidence.add(*items)
    _event(locked, DisputeEvent.Action.EVIDENCE_ADDED, user, now, evidence=[i.pk for i in items])
    return locked


def _credit(value: Any) -> Decimal:
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise ValidationError({"credit_cny": _("The credit must be an amount in CNY.")}) from None
    if not amount.is_finite() or amount < 0:
        raise ValidationError({"credit_cny": _("The credit must be zero or more.")})
    if amount != amount.quantize(FEN):
        raise ValidationError({"credit_cny": _("The credit is in CNY to the fen (0.01).")})
    if amount >= Decimal("1e12"):
        raise ValidationError({"credit_cny": _("The credit is too large.")})
    return amount.quantize(FEN)


def credit_period_at(*, lease: Lease, at: datetime) -> str:
    """The invoice month an accepted dispute's credit goes on: the month of acceptance in
    the tenant's time zone, or the next month when that invoice is already issued."""
    period = Period.containing(at, lease.tenant.time_zone)
    if Invoice.objects.filter(
        tenant_id=lease.tenant_id, period=str(period), status__in=BILLED_INVOICE_STATUSES
    ).exists():
        period = period.next
    return str(period)


@transaction.atomic
def accept_dispute(
    *,
    dispute: Dispute,
    user: Any,
    reason: str,
    credit_cny: Decimal | str | int = Decimal("0.00"),
    now: datetime | None = None,
) -> Dispute:
    """Provider staff accept an open dispute. A credit above zero becomes an adjustment
    line on the tenant's invoice for the month of acceptance (``credit_period``)."""
    _require_staff(user, "billing.accept_dispute")
    now = now or timezone.now()
    text = _reason(reason)
    amount = _credit(credit_cny)
    locked = _locked_open(dispute)
    locked.state = DisputeState.ACCEPTED
    locked.decided_by, locked.decided_at, locked.decision_reason = user, now, text
    locked.credit_cny = amount
    locked.credit_period = credit_period_at(lease=locked.lease, at=now)
    locked.save()
    _event(
        locked,
        DisputeEvent.Action.ACCEPTED,
        user,
        now,
        text,
        credit_cny=str(amount),
        credit_period=locked.credit_period,
    )
    return locked


@transaction.atomic
def reject_dispute(
    *, dispute: Dispute, user: Any, reason: str, now: datetime | None = None
) -> Dispute:
    """Provider staff reject an open dispute, with the reason the tenant will read."""
    _require_staff(user, "billing.reject_dispute")
    now = now or timezone.now()
    text = _reason(reason)
    locked = _locked_open(dispute)
    locked.state = DisputeState.REJECTED
    locked.decided_by, locked.decided_at, locked.decision_reason = user, now, text
    locked.save()
    _event(locked, DisputeEvent.Action.REJECTED, user, now, text)
    return locked


def accepted_credits(*, tenant_id: int, period: str) -> list[Dispute]:
    """Accepted disputes whose credit goes on the tenant's invoice for ``period``."""
    return list(
        Dispute.objects.filter(
            lease__tenant_id=tenant_id,
            state=DisputeState.ACCEPTED,
            credit_period=period,
            credit_cny__gt=0,
        )
        .select_related("lease")
        .order_by("decided_at", "pk")
    )


__all__ = [
    "EVIDENCE_MAX_BYTES",
    "accept_dispute",
    "accepted_credits",
    "attach_evidence",
    "can_write_for",
    "credit_period_at",
    "open_dispute",
    "reject_dispute",
    "submit_evidence",
]
