from datetime import datetime
from decimal import Decimal
from typing import ClassVar

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from gpulease_verify.canonical import iso_utc
from gpulease_verify.terms import CONTRACT_FIELDS as TERMS_CONTRACT_FIELDS
from leases import contract_rules
from leases.choices import BillingMode, HeavyProbePolicy, P95Direction, P95Window, Technology
from leases.models.leases import Lease


class CreditMode(models.TextChoices):
    """How an SLA credit reaches the tenant (``billing.vouchers``): a negative line on the
    month's invoice, or a voucher (代金券) applied to the next invoices' payable totals."""

    LINE = "line", _("a negative line on the month's invoice")
    VOUCHER = "voucher", _("a voucher (代金券) for the next invoices")


class CreditBase(models.TextChoices):
    """What an SLA credit is a percentage of (each terms version says; see
    ``gpulease_verify.credit_base``)."""

    NETWORK_FEE = "network_fee", _("the network fee billed (包月/包年)")
    USAGE = "usage", _("the usage charge billed (按量计费, 95计费)")
    CONTRACTED_BASE = "contracted_base", _("a contracted monthly base fee (保底)")


USAGE_MODES = (BillingMode.PER_GB, BillingMode.P95)

_NON_NEGATIVE = [MinValueValidator(Decimal("0"), message=_("This cannot be negative."))]


def _money(verbose_name: str, decimal_places: int = 2, **kwargs) -> models.DecimalField:  # type: ignore[no-untyped-def]
    return models.DecimalField(
        verbose_name,
        max_digits=14,
        decimal_places=decimal_places,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"), message=_("A price cannot be negative."))],
        **kwargs,
    )


class LeaseTermsQuerySet(TenantScopedQuerySet):
    def in_force(self, lease_id: int, at: datetime) -> "LeaseTerms | None":
        """The terms version in force for a lease at an instant: the latest version whose
        effective_from is not after it. None before the first version."""
        return (
            self.filter(lease_id=lease_id, effective_from__lte=at)
            .order_by("-effective_from")
            .first()
        )


class LeaseTerms(TimeStampedModel):
    """One effective-dated version of a lease's contract terms. An amendment never edits a
    version: it adds the next one, in force from its effective_from."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="terms", verbose_name=_("lease")
    )
    version = models.PositiveIntegerField(_("version"))
    effective_from = models.DateTimeField(_("effective from"))
    amendment_reason = models.TextField(_("amendment reason"), blank=True)

    # What the network must deliver.
    contracted_bandwidth_gbps = models.DecimalField(
        _("contracted inter-node bandwidth per node (Gbps)"),
        max_digits=7,
        decimal_places=2,
        validators=[MinValueValidator(Decimal("0.01"))],
    )
    technology = models.CharField(_("technology"), max_length=16, choices=Technology.choices)
    sla_threshold_percent = models.DecimalField(
        _("SLA threshold (percent of contracted)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("95"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
        help_text=_("A throughput sample passes at or above this share of the contract."),
    )
    collective_busbw_floor_gbps = models.DecimalField(
        _("NCCL bus bandwidth floor (Gbps)"),
        max_digits=7,
        decimal_places=2,
        null=True,
        blank=True,
        validators=_NON_NEGATIVE,
    )
    latency_ceiling_us = models.DecimalField(
        _("latency ceiling (µs)"),
        max_digits=9,
        decimal_places=2,
        null=True,
        blank=True,
        validators=_NON_NEGATIVE,
    )

    # How and when it is measured.
    probe_cadence_s = models.JSONField(
        _("probe cadence (seconds per probe kind)"),
        default=contract_rules.default_probe_cadence,
        validators=[contract_rules.validate_probe_cadence],
    )
    heavy_probe_policy = models.CharField(
        _("when heavy probes may run"),
        max_length=16,
        choices=HeavyProbePolicy.choices,
        default=HeavyProbePolicy.ANY_TIME,
        help_text=_("Throughput, latency and collective probes load the customer's fabric."),
    )
    heavy_probe_windows = models.JSONField(
        _("agreed windows for heavy probes"),
        default=list,
        blank=True,
        validators=[contract_rules.validate_weekly_windows],
        help_text=_(
            'Weekly, in the tenant\'s time zone: [{"weekday": 6, "start": "02:00", '
            '"end": "04:00"}], Monday is 0.'
        ),
    )
    maintenance_windows = models.JSONField(
        _("maintenance windows"),
        default=list,
        blank=True,
        validators=[contract_rules.validate_weekly_windows],
        help_text=_("Weekly, in the tenant's time zone; samples inside are excluded from SLA."),
    )
    incident_after_violations = models.PositiveSmallIntegerField(
        _("violations in a row that open an incident"),
        default=3,
        validators=[MinValueValidator(1)],
    )

    # Credits.
    credit_tiers = models.JSONField(
        _("SLA credit tiers"),
        default=contract_rules.default_credit_tiers,
        validators=[contract_rules.validate_credit_tiers],
        help_text=_('[{"below_percent": "99.5", "credit_percent": "10"}, ...] of the credit base.'),
    )
    credit_cap_percent = models.DecimalField(
        _("credit cap (percent of the credit base)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("50"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
    )
    credit_base = models.CharField(
        _("credits are a percentage of"),
        max_length=16,
        choices=CreditBase.choices,
        default=CreditBase.NETWORK_FEE,
        help_text=_(
            "A pay-per-use lease has no network fee: its credits are on the usage charge or "
            "on a contracted base fee."
        ),
    )
    contracted_base_per_month = _money(
        _("contracted monthly base fee for credits (保底, ¥)"),
        help_text=_("Only with credits on a contracted base fee; prorated like the network fee."),
    )
    # How the credit is given (billing.vouchers); the defaults are the only way there was
    # before the fields existed (gpulease_verify.terms.DEFAULTED_FIELDS).
    credit_mode = models.CharField(
        _("credits are given as"),
        max_length=16,
        choices=CreditMode.choices,
        default=CreditMode.LINE,
        help_text=_(
            "A negative line on the month's invoice (taxed, it lowers the VAT base), or a "
            "voucher (代金券) that the next invoices' payable totals use up after tax."
        ),
    )
    voucher_validity_months = models.PositiveSmallIntegerField(
        _("voucher validity (months)"),
        default=12,
        validators=[MinValueValidator(1), MaxValueValidator(120)],
        help_text=_("How long a voucher can be used from its issue (1 to 120 months)."),
    )

    # A repair-time objective (gpulease_verify.repair): each network fault resolved in the
    # billed window whose repair time (resolved minus fault) exceeds it adds
    # ``repair_credit_percent`` of the credit base to the month's credit; the SLA credit
    # and the repair credit together never exceed the base. Null: no objective, as every
    # version before the fields existed.
    repair_objective_minutes = models.PositiveIntegerField(
        _("repair-time objective (minutes)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_(
            "A network fault repaired in more than this many minutes (its first violating "
            "sample to its first passing one) earns the repair credit. Empty: no objective."
        ),
    )
    repair_credit_percent = models.DecimalField(
        _("repair credit per missed objective (percent of the credit base)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("0"),
        # In the database too: a web process still on the previous release adds versions
        # without it during a deploy.
        db_default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
        help_text=_(
            "Added to the month's credit for each fault that missed the repair-time "
            "objective; with the SLA credit, never more than the whole credit base."
        ),
    )

    # Money, CNY.
    billing_mode = models.CharField(_("billing mode"), max_length=16, choices=BillingMode.choices)
    node_rent_per_month = _money(_("node rent per node-month (¥)"))
    network_fee_per_month = _money(_("fixed network fee per month (¥)"))
    price_per_gb = _money(_("price per GB of traffic (¥)"), decimal_places=4)
    price_per_mbps_p95 = _money(_("price per Mbps at the 95th percentile (¥)"), decimal_places=4)
    # 95计费's direction and window (gpulease_verify.calculations.p95_bandwidth); the
    # defaults are the only rule there was before the fields existed.
    p95_direction = models.CharField(
        _("95th percentile direction"),
        max_length=16,
        choices=P95Direction.choices,
        default=P95Direction.TX,
        help_text=_(
            "Which traffic 95th percentile billing meters: sent, received, the larger of "
            "the two in each sample, or the larger of the two directions' 95th percentiles."
        ),
    )
    p95_window = models.CharField(
        _("95th percentile window"),
        max_length=16,
        choices=P95Window.choices,
        default=P95Window.MONTHLY,
        help_text=_(
            "The 95th percentile of the whole month, or of each day (tenant's time zone) "
            "averaged over the days that have samples."
        ),
    )
    # VAT per price component (增值税): the network service (fee, traffic, 95th
    # percentile, and the SLA credits that reduce it) and the node rent may differ; each
    # invoice line carries its component's rate and tax is rounded once per rate group.
    tax_rate_percent = models.DecimalField(
        _("VAT rate of the network service (percent)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("6"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
        help_text=_(
            "Network fee, traffic, 95th percentile and SLA credits; value-added telecom "
            "services are typically 6%."
        ),
    )
    rent_tax_rate_percent = models.DecimalField(
        _("VAT rate of the node rent (percent)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("13"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
        help_text=_("Renting GPU servers out is typically taxed at 13%."),
    )
    billing_starts_on_acceptance = models.BooleanField(
        _("bill only after the acceptance run passes"), default=False
    )

    # Fabric health, the switch-side witness and the probe tax (issue 14).
    telemetry_interval_s = models.PositiveIntegerField(
        _("telemetry interval (seconds)"),
        default=30,
        validators=[MinValueValidator(0), MaxValueValidator(3600)],
        help_text=_("How often each node's port state and counters are read (30 to 60 s; 0: off)."),
    )
    health_thresholds = models.JSONField(
        _("fabric health thresholds"),
        default=dict,
        blank=True,
        validators=[contract_rules.validate_health_thresholds],
        help_text=_(
            "Overrides of the health rules' defaults (the anchors' values), e.g. "
            '{"symbol_errors_per_hour": 120}. Empty: the defaults.'
        ),
    )
    # 1: every version written before rule set 2 existed (the migration sets it, and an
    # older bundle without the field reads as 1); new versions are judged by set 2.
    health_rules = models.PositiveSmallIntegerField(
        _("fabric health rule set"),
        choices=[
            (1, _("1: flaps as down-then-up cycles within 10 minutes")),
            (
                2,
                _(
                    "2: gpud's flaps, drops and sticky windows, speed downgrades, saturated "
                    "counters"
                ),
            ),
        ],
        default=2,
        help_text=_(
            "Which set of fabric health rules judges this version's telemetry "
            "(gpulease_verify.health.RULE_SETS)."
        ),
    )
    witness_tolerance_percent = models.DecimalField(
        _("switch witness tolerance (percent)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("10"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
        help_text=_(
            "How far a host's bytes or measured throughput may differ from its switch port's "
            "counters before the samples are disputed."
        ),
    )
    probe_idle_below_percent = models.DecimalField(
        _("heavy probes only below this utilisation (percent)"),
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
        help_text=_(
            "Throughput, latency and collective probes are deferred while the lease's traffic "
            "is above this share of its contracted bandwidth. Empty: no such condition."
        ),
    )

    # Confirm before you count (gpulease_verify.samples): a failed throughput or
    # collective sample is measured again at once, and fails only if that fails too.
    confirm_failures = models.BooleanField(
        _("confirm a failed sample"),
        default=True,
        help_text=_(
            "A scheduled throughput or collective run that fails is measured again at once; "
            "the sample fails only when the confirmation fails too."
        ),
    )
    confirm_pause_s = models.PositiveIntegerField(
        _("pause before a confirmation (seconds)"),
        default=5,
        validators=[MaxValueValidator(300)],
        help_text=_("How long to wait between a failed run and its confirmation (0 to 300 s)."),
    )

    # Degraded minutes (gpulease_verify.compliance): the links were up, but a throughput
    # sample covering the minute failed (below sla_threshold_percent of the contract).
    degraded_weight = models.DecimalField(
        _("weight of a degraded minute in availability"),
        max_digits=4,
        decimal_places=3,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("1"))],
        help_text=_(
            "A minute whose links were up while a throughput sample covering it failed is "
            "degraded; this share of it counts as down in availability (0: up, 1: down, "
            "0.5: half)."
        ),
    )

    objects = LeaseTermsQuerySet.as_manager()
    tenant_path = "lease__tenant"

    # The version as a link of the lease's hash chain (leases.links.link_terms), set
    # once when it is created.
    chain_index = models.PositiveIntegerField(_("chain index"), null=True, blank=True)
    prev_hash = models.CharField(_("previous link hash"), max_length=64, blank=True)
    terms_hash = models.CharField(_("link hash"), max_length=64, blank=True)

    # A version that takes effect before it is created counts only once a tenant admin has
    # acknowledged it (TermsAmendment); who did is kept as text, as hashed.
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("acknowledged by"),
    )
    acknowledged_by_username = models.CharField(
        _("acknowledged by (username)"), max_length=150, blank=True
    )
    acknowledged_by_role = models.CharField(_("acknowledged as"), max_length=16, blank=True)
    acknowledged_at = models.DateTimeField(_("acknowledged at"), null=True, blank=True)
    acknowledgement_reason = models.TextField(_("acknowledgement reason"), blank=True)
    # The acknowledger's standing at the time, and when the amendment was proposed: an
    # audit bundle carries them so the verifier can check that a tenant admin of the
    # lease's tenant, not provider staff, agreed after the proposal. Not in the link's
    # hashed content (versions hashed before they existed keep their hashes); the
    # bundle's signature covers them.
    acknowledged_by_tenant = models.CharField(
        _("acknowledged for tenant (slug)"), max_length=50, blank=True
    )
    acknowledged_by_staff = models.BooleanField(
        _("acknowledged by provider staff"), null=True, blank=True
    )
    proposed_at = models.DateTimeField(_("amendment proposed at"), null=True, blank=True)

    # The fields that make up the contract itself (what an amendment may change, what the
    # API accepts for a new lease, what an audit bundle carries of each version).
    CONTRACT_FIELDS: ClassVar[tuple[str, ...]] = TERMS_CONTRACT_FIELDS

    class Meta:
        verbose_name = _("contract terms version")
        verbose_name_plural = _("contract terms versions")
        ordering = ["lease", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["lease", "version"],
                name="terms_version_unique_per_lease",
                violation_error_message=_(
                    "This lease already has a terms version with this number."
                ),
            ),
            models.UniqueConstraint(
                fields=["lease", "effective_from"],
                name="terms_effective_from_unique_per_lease",
                violation_error_message=_(
                    "This lease already has a terms version effective from this instant."
                ),
            ),
            models.CheckConstraint(
                condition=models.Q(
                    node_rent_per_month__gte=0,
                    network_fee_per_month__gte=0,
                    price_per_gb__gte=0,
                    price_per_mbps_p95__gte=0,
                ),
                name="terms_prices_not_negative",
                violation_error_message=_("Prices cannot be negative."),
            ),
            models.CheckConstraint(
                condition=models.Q(degraded_weight__gte=0, degraded_weight__lte=1),
                name="terms_degraded_weight_0_to_1",
                violation_error_message=_(
                    "The weight of a degraded minute is a share from 0 (up) to 1 (down)."
                ),
            ),
            models.CheckConstraint(
                condition=~models.Q(credit_base=CreditBase.CONTRACTED_BASE)
                | models.Q(contracted_base_per_month__gt=0),
                name="terms_contracted_credit_base_has_a_fee",
                violation_error_message=_(
                    "Credits on a contracted base fee need that fee: give a monthly amount "
                    "above zero."
                ),
            ),
            models.CheckConstraint(
                condition=models.Q(credit_base=CreditBase.CONTRACTED_BASE)
                | models.Q(contracted_base_per_month=0),
                name="terms_base_fee_only_with_contracted_credit_base",
                violation_error_message=_(
                    "A contracted base fee is only used when credits are computed on it: "
                    "set it to 0 or choose the contracted base fee as the credit base."
                ),
            ),
            models.CheckConstraint(
                condition=~models.Q(credit_base=CreditBase.USAGE)
                | models.Q(billing_mode__in=USAGE_MODES),
                name="terms_usage_credit_base_needs_usage_billing",
                violation_error_message=_(
                    "Credits on the usage charge need a pay-per-use billing mode (per GB or "
                    "95th percentile); a monthly or yearly plan has no usage charge."
                ),
            ),
            models.CheckConstraint(
                condition=models.Q(repair_credit_percent__gte=0, repair_credit_percent__lte=100),
                name="terms_repair_credit_is_a_percentage",
                violation_error_message=_(
                    "The repair credit is a percentage of the credit base from 0 to 100."
                ),
            ),
            models.CheckConstraint(
                condition=models.Q(contracted_bandwidth_gbps__gt=0),
                name="terms_bandwidth_positive",
                violation_error_message=_("The contracted bandwidth must be above zero."),
            ),
            models.CheckConstraint(
                condition=models.Q(sla_threshold_percent__gte=0, sla_threshold_percent__lte=100),
                name="terms_threshold_is_a_percentage",
                violation_error_message=_("The SLA threshold is a percentage from 0 to 100."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.lease} v{self.version}"

    @property
    def acknowledgement(self) -> dict[str, str | bool | None] | None:
        """Who acknowledged this version, as an audit bundle carries it: by, role, at and
        reason are hashed (``gpulease_verify.terms.ACKNOWLEDGEMENT_FIELDS``); tenant,
        staff and proposed_at are the standing recorded with it (null where unknown)."""
        if self.acknowledged_at is None:
            return None
        return {
            "by": self.acknowledged_by_username,
            "role": self.acknowledged_by_role,
            "at": iso_utc(self.acknowledged_at),
            "reason": self.acknowledgement_reason,
            "tenant": self.acknowledged_by_tenant or None,
            "staff": self.acknowledged_by_staff,
            "proposed_at": iso_utc(self.proposed_at),
        }

    @property
    def threshold_bps(self) -> Decimal:
        """The lowest throughput that passes, in bits per second."""
        return self.contracted_bandwidth_gbps * Decimal(10) ** 9 * self.sla_threshold_percent / 100


class TermsAmendment(TimeStampedModel):
    """A retroactive amendment proposed by provider staff: the changes wait here, not in
    force and not linked, until a tenant admin of the lease's tenant acknowledges them;
    then they become the lease's next terms version (``terms``)."""

    class Status(models.TextChoices):
        PENDING = "pending", _("waiting for the tenant admin")
        ACKNOWLEDGED = "acknowledged", _("acknowledged")

    lease = models.ForeignKey(
        Lease,
        on_delete=models.CASCADE,
        related_name="terms_amendments",
        verbose_name=_("lease"),
    )
    effective_from = models.DateTimeField(_("effective from"))
    changes = models.JSONField(_("changes"), default=dict)
    reason = models.TextField(_("amendment reason"))
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("proposed by"),
    )
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.PENDING
    )
    terms = models.OneToOneField(
        LeaseTerms,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="proposal",
        verbose_name=_("terms version"),
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("retroactive terms amendment")
        verbose_name_plural = _("retroactive terms amendments")
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.lease}: from {iso_utc(self.effective_from)} ({self.get_status_display()})"
