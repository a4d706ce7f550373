import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import models
from django.utils.translation import gettext_lazy as _

from benchmarks.choices import Pattern, RunState, Tool, Trigger, Verdict
from benchmarks.models.outputs import StoredTexts
from common.querysets import TenantScopedQuerySet
from gpulease_verify import sweep
from leases.choices import ProbeKind
from leases.contract_rules import MAX_CADENCE_S
from leases.models import Lease, LeaseTerms, Node, Site

# The runs that did not pass: they failed, or measured nothing. A healthy lease has almost
# none, so the partial index run_not_passed finds them without reading the passing ones
# (the portal's link state timeline over a year of 5-minute checks).
NOT_PASSED = models.Q(verdict=Verdict.FAIL) | ~models.Q(state=RunState.OK)


def slot_reach(cadence_s: int) -> timedelta:
    """How long before a run started or finished its slot can lie, for runs of at most
    this cadence: the cadence (its deadline), and a day for the run itself (which also
    covers an on-demand run's hour). A query by run time bounds slot_at with it, so that it
    reads the monthly partitions such runs can be in, not every month held."""
    return timedelta(seconds=cadence_s, days=1)


SLOT_REACH = slot_reach(MAX_CADENCE_S)  # for a run of any cadence


class ProbeRunQuerySet(TenantScopedQuerySet):
    def finished(self) -> "ProbeRunQuerySet":
        return self.filter(finished_at__isnull=False)

    def keyed(self, keys: "Iterable[tuple[int, datetime]]") -> "ProbeRunQuerySet":
        """The runs with these (id, slot) keys, read from the monthly partitions their
        slots are in, not every month's (an id alone prunes nothing)."""
        keys = list(keys)
        if not keys:
            return self.none()
        slots = [slot for _pk, slot in keys]
        return self.filter(
            pk__in=[pk for pk, _slot in keys], slot_at__gte=min(slots), slot_at__lte=max(slots)
        )


class ProbeRun(StoredTexts, models.Model):
    """One measurement of one lease: which tool ran where and when, exactly what it printed,
    what that parsed to, and the verdict against the terms in force at that instant.

    A slot (lease, kind, tool, pattern, target, slot_at, trigger) has one run at most: the scheduler
    creates it, and a redelivered task finds it instead of making another."""

    # No index of their own on lease, site and terms: the composite indexes below lead with
    # lease and site, and terms are never deleted (amendments add versions).
    lease = models.ForeignKey(
        Lease,
        on_delete=models.CASCADE,
        related_name="probe_runs",
        verbose_name=_("lease"),
        db_index=False,
    )
    kind = models.CharField(_("kind"), max_length=16, choices=ProbeKind.choices)
    tool = models.CharField(_("tool"), max_length=32, choices=Tool.choices)
    target = models.CharField(
        _("target"), max_length=255, help_text=_('A node, a pair "a>b" (client>server), or "all".')
    )
    # No database foreign keys to or from a partitioned table's rows (common.partitions).
    nodes = models.ManyToManyField(
        Node, related_name="probe_runs", verbose_name=_("nodes"), db_constraint=False
    )
    pattern = models.CharField(_("pattern"), max_length=16, choices=Pattern.choices)
    batch = models.UUIDField(
        _("batch"), default=uuid.uuid4, db_index=True, help_text=_("Runs executed together.")
    )
    trigger = models.CharField(
        _("trigger"), max_length=16, choices=Trigger.choices, default=Trigger.SCHEDULE
    )
    slot_at = models.DateTimeField(_("slot"))
    deadline_at = models.DateTimeField(
        _("deadline"), help_text=_("Not started by then, the run is missed.")
    )
    site = models.ForeignKey(
        Site,
        on_delete=models.PROTECT,
        related_name="probe_runs",
        verbose_name=_("site"),
        db_index=False,
    )
    state = models.CharField(
        _("state"), max_length=16, choices=RunState.choices, default=RunState.SCHEDULED
    )
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    claimed_at = models.DateTimeField(_("claimed at"), null=True, blank=True)
    # When a worker last put it back to wait (its nodes busy, a node unreachable): its
    # task comes back within PROBE_RETRY_MAX_S, else it was lost (benchmarks.orphans).
    released_at = models.DateTimeField(_("put back to wait at"), null=True, blank=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    # Set by billing.ingest when it has read the run. Runs commit in any order of
    # finished_at (workers finish concurrently), so a cursor on finished_at alone would
    # pass over a run that commits after a later one was read.
    ingested_at = models.DateTimeField(_("ingested at"), null=True, blank=True)

    command = models.TextField(_("command"), blank=True)
    exit_code = models.IntegerField(_("exit code"), null=True, blank=True)
    # The texts are in benchmarks.models.outputs, once per distinct content (raw_output and
    # stderr below read and write them); the row holds their hashes.
    raw_sha256 = models.CharField(_("raw output SHA-256"), max_length=64, blank=True)
    stderr_sha256 = models.CharField(_("standard error SHA-256"), max_length=64, blank=True)
    output_truncated = models.BooleanField(_("output truncated"), default=False)
    parsed = models.JSONField(_("parsed result"), null=True, blank=True)

    # A finished heavy probe's bytes per node, read once from its output by ingest
    # (billing.probe_tax.record_sent) so that metering and the probe tax ledger do not
    # parse it again. Not evidence: the chain covers the output it comes from.
    sent_bytes = models.JSONField(_("bytes sent per node"), null=True, blank=True)

    # Headline figures, typed so that SLA and billing aggregate without reading JSON.
    measured_bps = models.BigIntegerField(_("measured bandwidth (bit/s)"), null=True, blank=True)
    latency_us = models.FloatField(_("latency (µs)"), null=True, blank=True)

    terms = models.ForeignKey(
        LeaseTerms,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="probe_runs",
        verbose_name=_("terms in force"),
        db_index=False,
    )
    verdict = models.CharField(
        _("verdict"), max_length=8, choices=Verdict.choices, default=Verdict.NONE
    )
    rule = models.CharField(_("rule"), max_length=255, blank=True)
    verdict_reason = models.TextField(_("verdict reason"), blank=True)
    error = models.TextField(_("error"), blank=True)

    # The lease's hash chain (ledger.chain, benchmarks.links): set once, when the run is over.
    chain_index = models.PositiveIntegerField(_("chain index"), null=True, blank=True)
    prev_hash = models.CharField(_("previous run's hash"), max_length=64, blank=True)
    run_hash = models.CharField(_("run hash (SHA-256)"), max_length=64, blank=True)

    objects = ProbeRunQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("probe run")
        verbose_name_plural = _("probe runs")
        ordering = ["-slot_at", "-id"]
        permissions = [("run_probes_now", _("Can run a lease's probes now"))]
        constraints = [
            models.UniqueConstraint(
                fields=["lease", "kind", "tool", "pattern", "target", "slot_at", "trigger"],
                name="one_run_per_slot",
            ),
            models.UniqueConstraint(
                fields=["lease", "chain_index"],
                name="one_run_per_chain_index",
                violation_error_message=_("This lease's chain already has a run at this index."),
            ),
        ]
        indexes = [
            models.Index(fields=["lease", "kind", "-slot_at"], name="run_lease_kind_slot"),
            # The API's run list of a lease: ordered by (-slot_at, -id), cursor on slot_at.
            models.Index(fields=["lease", "-slot_at", "-id"], name="run_lease_slot_id"),
            # Runs not over yet, by deadline (missed-run marking): partial, so it holds the
            # few in flight, not a year of finished runs.
            models.Index(
                fields=["state", "deadline_at"],
                condition=models.Q(state__in=[RunState.SCHEDULED, RunState.RUNNING]),
                name="run_in_flight_deadline",
            ),
            models.Index(fields=["site", "-finished_at"], name="run_site_finished"),
            # Ingest reads the finished runs it has not read yet, in (finished_at, id) order;
            # partial, so it holds only the few runs waiting.
            models.Index(
                fields=["finished_at", "id"],
                condition=models.Q(finished_at__isnull=False, ingested_at__isnull=True),
                name="run_to_ingest",
            ),
            models.Index(
                fields=["lease", "kind", "slot_at"], condition=NOT_PASSED, name="run_not_passed"
            ),
            # Whether a lease had its acceptance run (the dispatcher, every cycle).
            models.Index(
                fields=["lease"],
                condition=models.Q(trigger=Trigger.ACCEPTANCE),
                name="run_acceptance",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.lease} {self.kind} {self.target} @ {self.slot_at:%Y-%m-%d %H:%M}"

    @property
    def raw_output(self) -> str:
        """What the tool printed (from the store; setting it sets ``raw_sha256``)."""
        return self._read("raw_output")

    @raw_output.setter
    def raw_output(self, text: str) -> None:
        self._write("raw_output", text, hash_empty=True)

    @property
    def stderr(self) -> str:
        """What the tool printed on standard error ("" and no hash when nothing)."""
        return self._read("stderr")

    @stderr.setter
    def stderr(self, text: str) -> None:
        self._write("stderr", text, hash_empty=False)

    def results(self) -> list[sweep.NodeResult]:
        """Each node's result in a node-level run: a sweep's nodes, or the one node of a
        run stored before sweeps (``gpulease_verify.sweep.node_results``)."""
        return sweep.node_results(
            pattern=self.pattern,
            target=self.target,
            state=self.state,
            verdict=self.verdict,
            parsed=self.parsed,
            error=self.error,
        )

    def hostnames(self) -> list[str]:
        """The nodes the run covers, by hostname: a sweep's, those it read (none before it
        ran); any other's, its node links (prefetch ``nodes`` when listing many)."""
        if self.pattern == Pattern.SWEEP:
            return sweep.hostnames(self.parsed)
        return sorted(node.hostname for node in self.nodes.all())

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None
