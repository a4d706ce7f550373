"""Re-rating: a window judged again under corrected contract terms.

A retroactive amendment (a terms version whose ``effective_from`` lies before it was
created, acknowledged by a tenant admin) changes what the runs of its window should have
been judged by, but those runs are links of the lease's hash chain and never change.
``rerate`` appends a *rejudgement* link for each of them instead
(``benchmarks.models.Rejudgement``, ``gpulease_verify.chain.rejudgement_content``): the
verdict the run's stored figures get under the version now in force at its slot, by the
same rules the verifier re-judges with (``gpulease_verify.rejudge.judge_again``). From
then on the run counts by its effective verdict (its latest rejudgement's) in the hourly
rollups, hence in compliance, credits, reports and audit bundles.

Then the affected hourly rollups are rebuilt, the tenant's drafts of the affected months
are drafted again, and for an affected month that is already issued (or paid) the next
open draft is drafted again (made when that month has started and has none), so that the
difference becomes adjustment lines on it (``billing.invoicing`` adjustments: an issued
invoice never changes). A ``LeaseEvent`` (``rerated``) records who did it and the summary.

Only scheduled runs (the SLA samples) are re-judged: acceptance and manual runs are
evidence, and a passed acceptance is not reopened. A run is due when the version it counts
under (its latest rejudgement's, else its own) is not the one in force at its slot, so
running ``rerate`` again over the same window finds nothing to do and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks import selectors as run_selectors
from benchmarks.choices import Verdict
from benchmarks.links import link_pending, link_rejudgements, run_content
from benchmarks.models import (
    Rejudgement,
    effective_terms_id,
    effective_verdict,
    with_effective_judgement,
)
from benchmarks.recording import terms_view
from billing import invoicing, services
from billing.choices import InvoiceStatus, LineKind
from billing.ingest import CURSOR, hour_of, link_hours_of_throughput, recompute_hours
from billing.models import IngestCursor, Invoice
from common.locks import locking
from common.progress import progress
from gpulease_verify.canonical import iso_utc
from gpulease_verify.periods import Period
from gpulease_verify.rejudge import judge_again
from gpulease_verify.terms import TENANT_ADMIN, is_retroactive
from leases.choices import ProbeKind
from leases.models import Lease, LeaseEvent, LeaseTerms, Tenant
from leases.selectors import TermsTimeline, first_pending_amendment
from leases.services import lock_lease, lock_tenant, record_event


@dataclass
class RerateResult:
    """What one re-rating did (``as_dict`` is the command's JSON)."""

    lease: Lease
    start: datetime
    end: datetime
    runs_rejudged: int = 0
    pass_to_fail: int = 0
    fail_to_pass: int = 0
    other_changes: int = 0
    not_judgeable: int = 0
    chain_links: tuple[int, int] | None = None
    hours_rebuilt: int = 0
    drafts: list[Invoice] = field(default_factory=list)
    adjustments: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdicts_changed(self) -> int:
        return self.pass_to_fail + self.fail_to_pass + self.other_changes

    def as_dict(self) -> dict[str, Any]:
        return {
            "lease": self.lease.reference,
            "time_zone": self.lease.tenant.time_zone,
            "start": iso_utc(self.start),
            "end": iso_utc(self.end),
            "runs_rejudged": self.runs_rejudged,
            "verdicts_changed": {
                "pass_to_fail": self.pass_to_fail,
                "fail_to_pass": self.fail_to_pass,
                "other": self.other_changes,
            },
            "not_judgeable": self.not_judgeable,
            "chain_links": list(self.chain_links) if self.chain_links else None,
            "hours_rebuilt": self.hours_rebuilt,
            "drafts_rebuilt": [
                {"invoice": invoice.pk, "period": invoice.period, "total": str(invoice.total)}
                for invoice in self.drafts
            ],
            "adjustments": self.adjustments,
        }


def _refuse_unacknowledged(lease: Lease, start: datetime, end: datetime) -> None:
    """Refuse while an amendment of the window waits for its tenant admin, or a version in
    force in the window took effect before it was created without a tenant admin's
    acknowledgement (the rule ``gpulease_verify.terms`` checks bundles by)."""
    pending = first_pending_amendment(lease=lease, before=end)
    if pending is not None:
        raise ValidationError(
            _(
                "The amendment #%(id)s of lease %(lease)s, effective %(at)s, waits for a "
                "tenant admin's acknowledgement; re-rate once it is acknowledged."
            )
            % {"id": pending.pk, "lease": lease.reference, "at": iso_utc(pending.effective_from)}
        )
    versions = list(TermsTimeline.for_lease(lease))
    for i, version in enumerate(versions):
        later = versions[i + 1].effective_from if i + 1 < len(versions) else None
        in_window = version.effective_from < end and (later is None or later > start)
        if (
            in_window
            and version.version > 1
            and is_retroactive(version.effective_from, version.created_at)
            and (version.acknowledged_at is None or version.acknowledged_by_role != TENANT_ADMIN)
        ):
            raise ValidationError(
                _(
                    "Terms v%(version)s of lease %(lease)s took effect before it was created "
                    "and no tenant admin acknowledged it; it cannot re-rate anything."
                )
                % {"version": version.version, "lease": lease.reference}
            )


def _change(result: RerateResult, old: str, new: str) -> None:
    if old == new:
        return
    if (old, new) == (Verdict.PASS, Verdict.FAIL):
        result.pass_to_fail += 1
    elif (old, new) == (Verdict.FAIL, Verdict.PASS):
        result.fail_to_pass += 1
    else:
        result.other_changes += 1


def _due(
    lease: Lease, start: datetime, end: datetime, now: datetime, user: Any, result: RerateResult
) -> list[Rejudgement]:
    """A new rejudgement for every linked, scheduled (or confirming) run of the window
    whose effective terms version is not the one in force at its slot, in chain order."""
    timeline = TermsTimeline.for_lease(lease)
    runs = (
        with_effective_judgement(
            run_selectors.judged_links_within(lease=lease, start=start, end=end)
        )
        .select_related("lease", "terms")
        .order_by("chain_index")
    )
    due = []
    for run in progress(runs, desc="rerate: judge", unit="run"):
        in_force: LeaseTerms | None = timeline.at(run.slot_at)
        if in_force is None or in_force.pk == effective_terms_id(run):
            continue
        judgement = judge_again(run_content(run), terms_view(in_force))
        if judgement is None:
            result.not_judgeable += 1
            continue
        _change(result, effective_verdict(run), judgement.verdict)
        due.append(
            Rejudgement(
                lease=lease,
                run=run,
                terms=in_force,
                verdict=judgement.verdict,
                rule=judgement.rule,
                verdict_reason=judgement.reason,
                judged_at=now,
                judged_by=user if getattr(user, "pk", None) else None,
            )
        )
    return due


def _periods_to_draft(tenant: Tenant, months: set[Period], now: datetime) -> list[str]:
    """The affected months' drafts, and for each affected month already issued (or paid)
    the next month whose invoice is open: its draft, or none yet when that month has
    started (a draft is made). A month not billed yet is drafted when it closes."""
    current = Period.containing(now, tenant.time_zone)
    chosen: set[str] = set()
    for month in sorted(months):
        invoice = invoicing.open_invoice(tenant, str(month))
        if invoice is None:
            continue
        if invoice.status == InvoiceStatus.DRAFT:
            chosen.add(str(month))
            continue
        later = month.next
        while later <= current:
            found = invoicing.open_invoice(tenant, str(later))
            if found is None or found.status == InvoiceStatus.DRAFT:
                chosen.add(str(later))
                break
            later = later.next
    return sorted(chosen)


def _adjustments(draft: Invoice, lease: Lease, months: set[str]) -> list[dict[str, Any]]:
    """The draft's adjustment lines of the lease for the affected months."""
    return [
        {
            "invoice": draft.pk,
            "period": draft.period,
            "adjusted_invoice": line.detail.get("adjusted_invoice_number"),
            "adjusted_period": line.detail["adjusted_period"],
            "kind": line.detail["adjusted_kind"],
            "amount": str(line.amount),
        }
        for line in draft.lines.filter(lease=lease, kind=LineKind.ADJUSTMENT).order_by("position")
        if line.detail.get("adjusted_period") in months
    ]


def rerate(
    lease: Lease,
    start: datetime,
    end: datetime,
    *,
    user: Any = None,
    now: datetime | None = None,
) -> RerateResult:
    """Re-judge the lease's scheduled runs with a slot in ``[start, end)`` under the terms
    now in force at their slots, rebuild the hourly rollups they touch and redraft the
    invoices that bill them. One transaction; refused (``ValidationError``) for an empty
    or future window and while any terms of the window lack the acknowledgement a
    retroactive amendment needs."""
    now = now or timezone.now()
    if start >= end:
        raise ValidationError(
            _("The window to re-rate is empty: it must start before it ends (%(start)s, %(end)s).")
            % {"start": iso_utc(start), "end": iso_utc(end)}
        )
    if start >= now:
        raise ValidationError(
            _("The window to re-rate starts %(start)s, in the future: nothing was measured yet.")
            % {"start": iso_utc(start)}
        )
    with transaction.atomic():
        # The tenant row first, as drafting and issuing take it; then the chain's lock.
        # Ingest's lock first (the order ingest and `bill --dry-run` take them in): an
        # ingest running meanwhile would rebuild these hours from the old verdicts.
        locking(IngestCursor.objects).get_or_create(name=CURSOR)
        tenant = lock_tenant(pk=lease.tenant_id)
        lease = lock_lease(pk=lease.pk)
        result = RerateResult(lease=lease, start=start, end=end)
        _refuse_unacknowledged(lease, start, end)
        link_pending(lease_id=lease.pk, now=now)
        due = _due(lease, start, end, now, user, result)
        if not due:
            return result
        linked = link_rejudgements(due)
        result.runs_rejudged = len(linked)
        result.chain_links = (linked[0].chain_index or 0, linked[-1].chain_index or 0)
        hours = sorted(
            {(item.run.kind, hour_of(item.run.slot_at)) for item in linked}
            # A re-judged throughput sample degrades (or no longer) the link minutes it
            # covers.
            | {
                (ProbeKind.LINK, hour)
                for hour in link_hours_of_throughput(
                    lease=lease, runs=[item.run for item in linked]
                )
            }
        )
        kinds = sorted({kind for kind, _hour in hours})
        for kind in progress(kinds, desc="rerate: rollups", unit="kind"):
            recompute_hours(lease=lease, kind=kind, hours=[h for k, h in hours if k == kind])
        result.hours_rebuilt = len(hours)
        zone = tenant.time_zone
        months = {Period.containing(item.run.slot_at, zone) for item in linked}
        for period in _periods_to_draft(tenant, months, now):
            draft = services.draft_invoice(tenant=tenant, period=period, now=now)
            result.drafts.append(draft)
            result.adjustments += _adjustments(draft, lease, {str(month) for month in months})
        record_event(
            lease=lease,
            action=LeaseEvent.Action.RERATED,
            actor=user if getattr(user, "pk", None) else None,
            detail=result.as_dict(),
        )
    return result


__all__ = ["RerateResult", "rerate"]
