"""Missed slots and the self-check: runs whose slot passed without a result are marked
missed (or skipped when the tenant's own run-now runs crowded them out), and a site whose
results stop arriving raises an alert."""

import logging
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import mail_admins
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from benchmarks import orphans
from benchmarks.choices import RunState, Trigger
from benchmarks.models import (
    SLOT_REACH,
    MissedRunCount,
    ProbeRun,
    SiteAlert,
)
from common.locks import locking
from leases.selectors import sites_among, sites_where

log = logging.getLogger(__name__)

CROWDED_OUT = (
    "busy with tenant-requested runs: the tenant's run-now probes were on its nodes during "
    "its slot, so it is not counted against the provider"
)


def crowded_out_by_tenant(runs: QuerySet[ProbeRun]) -> QuerySet:
    """Ids of the scheduled runs among ``runs`` whose nodes were running one of their lease's
    tenant-requested runs during their slot: a run claimed by a worker before the slot's
    deadline and not over before the slot began (or still on a live worker)."""
    Through = ProbeRun.nodes.through
    tenant_run_on_node = Through.objects.filter(
        node_id=OuterRef("node_id"),
        proberun__lease_id=OuterRef("proberun__lease_id"),
        proberun__trigger=Trigger.TENANT,
        proberun__claimed_at__lt=OuterRef("proberun__deadline_at"),
    ).filter(
        Q(proberun__finished_at__gt=OuterRef("proberun__slot_at"))
        | Q(
            proberun__finished_at__isnull=True,
            proberun__claimed_at__gt=OuterRef("proberun__slot_at") - orphans.stale_claim_after(),
        )
    )
    return (
        Through.objects.filter(proberun__in=runs.filter(trigger=Trigger.SCHEDULE))
        .filter(Exists(tenant_run_on_node))
        .values("proberun_id")
    )


MARK_CHUNK = 5000  # runs per UPDATE (a statement takes at most 65,535 parameters)


def count_missed(sites: Iterable[int]) -> None:
    """Add runs just marked missed (one site id per run) to their sites' MissedRunCount,
    in the transaction that marks them: one upsert, its rows in site order."""
    counts = sorted(Counter(sites).items())
    if not counts:
        return
    table = MissedRunCount._meta.db_table
    rows = ", ".join(["(%s, %s)"] * len(counts))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (site_id, total) VALUES {rows} "
            f"ON CONFLICT (site_id) DO UPDATE SET total = {table}.total + EXCLUDED.total",
            [value for pair in counts for value in pair],
        )


def mark_missed(*, now: datetime) -> int:
    """Runs whose slot passed without starting are missed: visible, never silently gone,
    and counted (count_missed). A scheduled run that the tenant's own run-now crowded out
    is skipped instead, with the reason, so that the SLA excludes it. Returns the number
    missed."""
    overdue = ProbeRun.objects.filter(state=RunState.SCHEDULED, deadline_at__lt=now)
    with transaction.atomic():
        excused = ProbeRun.objects.filter(pk__in=crowded_out_by_tenant(overdue)).update(
            state=RunState.SKIPPED, error=CROWDED_OUT, finished_at=now
        )
        # Locked first, in key order as a worker's claim locks its batch (common.locks):
        # none can start between being counted and being marked.
        missed = list(locking(overdue.order_by("pk")).values_list("pk", "site_id"))
        for start in range(0, len(missed), MARK_CHUNK):
            ProbeRun.objects.filter(
                pk__in=[pk for pk, _ in missed[start : start + MARK_CHUNK]]
            ).update(
                state=RunState.MISSED,
                error="its slot passed before any worker started it",
                finished_at=now,
            )
        count_missed(site_id for _, site_id in missed)
    if excused:
        log.info("%d scheduled run(s) crowded out by tenant run-now: skipped, not missed", excused)
    return len(missed)


def give_up(late: list[ProbeRun], now: datetime) -> None:
    """Runs found past their deadline when a worker came for them (locked by the caller):
    missed and counted, or skipped if the tenant's run-now crowded them out."""
    if not late:
        return
    crowded = crowded_out_by_tenant(ProbeRun.objects.filter(pk__in=[run.pk for run in late]))
    excused = set(crowded.values_list("proberun_id", flat=True))
    for run in late:
        if run.pk in excused:
            run.state, run.error = RunState.SKIPPED, CROWDED_OUT
        else:
            run.state, run.error = RunState.MISSED, "its deadline passed before it could run"
        run.finished_at = now
        run.save(update_fields=["state", "error", "finished_at"])
    count_missed(run.site_id for run in late if run.state == RunState.MISSED)


def check_results_arriving(*, now: datetime | None = None) -> list[SiteAlert]:
    """Raise an alert for each site whose results stopped arriving: runs fell due there in
    the window, yet none finished. Clear it once results arrive again."""
    now = now or timezone.now()
    window = timedelta(seconds=settings.PROBE_SELF_CHECK_WINDOW_S)
    grace = timedelta(seconds=settings.PROBE_SELF_CHECK_GRACE_S)
    due = set(
        ProbeRun.objects.filter(slot_at__gte=now - window, slot_at__lte=now - grace)
        .exclude(state=RunState.SKIPPED)
        .values_list("site_id", flat=True)
        .distinct()
    )
    # Per site, one probe of its latest results (run_site_finished) in the months that
    # runs finishing in the window can be in: not a scan of every run held.
    finished_lately = ProbeRun.objects.filter(
        site=OuterRef("pk"),
        finished_at__gte=now - window,
        started_at__isnull=False,
        slot_at__gte=now - window - SLOT_REACH,
    )
    arriving = set(sites_where(condition=Exists(finished_lately)).values_list("pk", flat=True))
    SiteAlert.objects.filter(
        kind=SiteAlert.Kind.RESULTS_STOPPED, cleared_at__isnull=True, site_id__in=arriving
    ).update(cleared_at=now)
    raised = []
    open_alerts = set(
        SiteAlert.objects.filter(
            kind=SiteAlert.Kind.RESULTS_STOPPED, cleared_at__isnull=True
        ).values_list("site_id", flat=True)
    )
    for site in sites_among(pks=due - arriving - open_alerts):
        message = (
            f"No probe result has arrived from site {site.code} for "
            f"{int(window.total_seconds() // 60)} minutes although runs were due: is the "
            f"worker for queue {site.probe_queue} running?"
        )
        alert = SiteAlert.objects.create(
            site=site, kind=SiteAlert.Kind.RESULTS_STOPPED, message=message, raised_at=now
        )
        log.error(message)
        mail_admins(f"gpulease: probe results stopped at {site.code}", message, fail_silently=True)
        raised.append(alert)
    return raised
