from django.conf import settings
from django.db import models
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _

from benchmarks.choices import Trigger, Verdict
from benchmarks.models.runs import ProbeRun
from common.querysets import TenantScopedQuerySet
from gpulease_verify.samples import confirmed_verdict
from leases.models import Lease, LeaseTerms


class Rejudgement(models.Model):
    """A finished run judged again, after the fact, by the terms version that a retroactive,
    acknowledged amendment put in force at its slot (``billing.rerate``). The run's own
    link never changes; this is a link of the lease's chain of its own, naming the run by
    its hash (``gpulease_verify.chain.rejudgement_content``). A run's effective verdict is
    its latest rejudgement's (highest chain index), else its own."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="rejudgements", verbose_name=_("lease")
    )
    run = models.ForeignKey(
        ProbeRun,
        on_delete=models.CASCADE,
        related_name="rejudgements",
        verbose_name=_("probe run"),
        db_constraint=False,  # runs are partitioned (common.partitions)
    )
    terms = models.ForeignKey(
        LeaseTerms,
        on_delete=models.PROTECT,
        related_name="rejudgements",
        verbose_name=_("terms judged by"),
    )
    verdict = models.CharField(_("verdict"), max_length=8, choices=Verdict.choices)
    rule = models.CharField(_("rule"), max_length=255, blank=True)
    verdict_reason = models.TextField(_("verdict reason"), blank=True)
    judged_at = models.DateTimeField(_("judged at"))
    judged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("re-rated by"),
    )

    # The rejudgement as a link of the lease's hash chain (benchmarks.links), set once.
    chain_index = models.PositiveIntegerField(_("chain index"), null=True, blank=True)
    prev_hash = models.CharField(_("previous link hash"), max_length=64, blank=True)
    link_hash = models.CharField(_("link hash"), max_length=64, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("rejudgement")
        verbose_name_plural = _("rejudgements")
        ordering = ["lease", "chain_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["lease", "chain_index"],
                name="one_rejudgement_per_chain_index",
                violation_error_message=_(
                    "This lease's chain already has a rejudgement at this index."
                ),
            ),
            models.UniqueConstraint(
                fields=["run", "terms"],
                name="one_rejudgement_per_run_and_terms",
                violation_error_message=_("This run was already judged again by these terms."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} re-judged by v{self.terms.version if self.terms_id else '?'}"


def with_effective_judgement(runs: QuerySet[ProbeRun]) -> QuerySet[ProbeRun]:
    """The runs annotated with ``effective_verdict`` and ``effective_terms_id``: those of
    the run's latest rejudgement, else its own. Two correlated subqueries on the
    rejudgement's run index: no query per run."""
    latest = Rejudgement.objects.filter(run=OuterRef("pk")).order_by("-chain_index", "-pk")
    return runs.annotate(
        effective_verdict=Coalesce(Subquery(latest.values("verdict")[:1]), F("verdict")),
        effective_terms_id=Coalesce(
            Subquery(latest.values("terms_id")[:1]),
            F("terms_id"),
            output_field=models.BigIntegerField(),
        ),
    )


def effective_verdict(run: ProbeRun) -> str:
    """The run's effective verdict as ``with_effective_judgement`` annotated it (its own
    when not annotated)."""
    return str(getattr(run, "effective_verdict", run.verdict))


def effective_terms_id(run: ProbeRun) -> int | None:
    """The id of the terms version the run counts under, as annotated (its own when not
    annotated)."""
    return getattr(run, "effective_terms_id", run.terms_id)


def with_confirmation(runs: QuerySet[ProbeRun]) -> QuerySet[ProbeRun]:
    """The runs annotated with ``confirmation_verdict``: the effective verdict of the run
    that confirmed each (same lease, kind, tool, pattern, target and slot, trigger
    confirmation; ``gpulease_verify.samples``), null when none did. One correlated probe
    of the slot's unique index per run."""
    confirmation = ProbeRun.objects.filter(
        lease=OuterRef("lease"),
        kind=OuterRef("kind"),
        tool=OuterRef("tool"),
        pattern=OuterRef("pattern"),
        target=OuterRef("target"),
        slot_at=OuterRef("slot_at"),
        trigger=Trigger.CONFIRMATION,
    )
    return runs.annotate(
        confirmation_verdict=Subquery(
            with_effective_judgement(confirmation).values("effective_verdict")[:1]
        )
    )


def sample_verdict(run: ProbeRun) -> str:
    """The verdict a scheduled run counts with as an SLA sample: its effective verdict,
    cleared by a confirmation that passed (annotate with ``with_effective_judgement`` and
    ``with_confirmation``; without them, its own verdict)."""
    return confirmed_verdict(effective_verdict(run), getattr(run, "confirmation_verdict", None))
