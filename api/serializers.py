"""Representations of the API. Reads are plain ModelSerializers over rows the view set
has already scoped; writes are strict (unknown keys are refused) and go through the
domain's services."""

import copy
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import serializers
from rest_framework.serializers import as_serializer_error

from accounts.choices import Role, Scope, TokenState
from accounts.models import ApiToken
from api.base import StrictModelSerializer, StrictSerializer
from api.fields import InstantField
from benchmarks import selectors as run_selectors
from benchmarks.choices import Pattern
from benchmarks.models import ProbeRun
from billing.balance import PaymentStatus, balance
from billing.choices import CreditNoteKind
from billing.models import (
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceEvent,
    InvoiceLine,
    Voucher,
    VoucherRedemption,
)
from common.dbfunctions import SweptNodes
from gpulease_verify.periods import PATTERN as PERIOD_PATTERN
from gpulease_verify.periods import Period, PeriodError
from incidents.models import Incident
from incidents.repair import repair_minutes
from leases import selectors as lease_selectors
from leases.choices import ProbeKind
from leases.contract_rules import MIN_CADENCE_S
from leases.models import (
    Fabric,
    Lease,
    LeaseTerms,
    Node,
    NodeAssignment,
    Site,
    Tenant,
    TermsAmendment,
)
from leases.validators import REFERENCE_MAX, validate_reference

# --- inventory and tenants --------------------------------------------------------------


class TenantSerializer(serializers.ModelSerializer):
    # Plain strings: blank is "", which is no e-mail address or URL for the schema.
    contact_email = serializers.CharField(read_only=True, help_text="E-mail address, or blank.")
    webhook_url = serializers.CharField(read_only=True, help_text="URL, or blank.")
    webhook_secret = serializers.SerializerMethodField(
        help_text="The Standard Webhooks signing secret: in clear only to provider staff who "
        "hold leases.view_webhook_secret, masked (whsec_********) to anybody else."
    )

    class Meta:
        model = Tenant
        fields = [
            "id",
            "name",
            "slug",
            "contact_name",
            "contact_email",
            "contact_phone",
            "time_zone",
            "currency",
            "webhook_url",
            "webhook_secret",
            "legal_name",
            "tax_id",
            "invoice_type",
            "invoice_address",
            "invoice_phone",
            "bank_name",
            "bank_account",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.STR)
    def get_webhook_secret(self, tenant: Tenant) -> str:
        request = self.context.get("request")
        return tenant.webhook_secret_for(request.user if request is not None else None)


class SiteSerializer(StrictModelSerializer):
    class Meta:
        model = Site
        fields = ["id", "name", "code", "city", "region", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        _full_clean(Site, self.instance, attrs)
        return attrs


class FabricSerializer(StrictModelSerializer):
    site = serializers.SlugRelatedField(
        slug_field="code", queryset=lease_selectors.sites_for_provider()
    )

    class Meta:
        model = Fabric
        fields = [
            "id",
            "site",
            "name",
            "technology",
            "port_speed_gbps",
            "topology",
            "oversubscription",
            "adaptive_routing",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        _full_clean(Fabric, self.instance, attrs)
        return attrs


def _full_clean(model: Any, instance: Any, attrs: dict[str, Any]) -> None:
    """The model's own validation (constraints included) before anything is saved; its
    sentences become a 400."""
    candidate = copy.copy(instance) if instance is not None else model()
    for name, value in attrs.items():
        setattr(candidate, name, value)
    try:
        candidate.full_clean()
    except DjangoValidationError as exc:
        raise serializers.ValidationError(as_serializer_error(exc)) from None


class NodeSerializer(serializers.ModelSerializer):
    leaf_switch = serializers.CharField(source="leaf_switch.name", read_only=True)
    fabric = serializers.IntegerField(source="leaf_switch.fabric_id", read_only=True)
    site = serializers.CharField(source="leaf_switch.fabric.site.code", read_only=True)

    class Meta:
        model = Node
        fields = [
            "id",
            "hostname",
            "gpu_model",
            "gpu_count",
            "status",
            "leaf_switch",
            "fabric",
            "site",
        ]
        read_only_fields = fields


# --- leases ----------------------------------------------------------------------------


class WindowSerializer(StrictSerializer):
    weekday = serializers.IntegerField(min_value=0, max_value=6, help_text="Monday is 0.")
    start = serializers.RegexField(r"^([01]\d|2[0-3]):[0-5]\d$", help_text="HH:MM")
    end = serializers.RegexField(r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$", help_text="HH:MM")
    note = serializers.CharField(required=False, allow_blank=True, max_length=200)


_PERCENT = RegexValidator(r"^\d{1,3}(\.\d{1,4})?$", "Give a percentage such as 99.5.")


class CreditTierSerializer(StrictSerializer):
    below_percent = serializers.CharField(validators=[_PERCENT], max_length=8)
    credit_percent = serializers.CharField(validators=[_PERCENT], max_length=8)


TERMS_FIELDS = list(LeaseTerms.CONTRACT_FIELDS)


class TermsSerializer(serializers.ModelSerializer):
    class Meta:
        model = LeaseTerms
        fields = ["id", "version", "effective_from", "amendment_reason", *TERMS_FIELDS]
        read_only_fields = fields


class TermsAmendmentSerializer(serializers.ModelSerializer):
    lease = serializers.CharField(source="lease.reference", read_only=True)
    proposed_by = serializers.CharField(source="proposed_by.username", default=None)
    terms_version = serializers.IntegerField(source="terms.version", default=None)

    class Meta:
        model = TermsAmendment
        fields = [
            "id",
            "lease",
            "effective_from",
            "changes",
            "reason",
            "status",
            "proposed_by",
            "terms_version",
            "created_at",
        ]
        read_only_fields = fields


class TermsAmendmentProposeSerializer(StrictSerializer):
    lease = serializers.IntegerField(help_text="The lease's id.")
    effective_from = InstantField()
    changes = serializers.DictField(
        help_text="Contract fields and their new values, each checked as the terms of a new "
        "lease are."
    )
    reason = serializers.CharField(max_length=2000)

    def validate_changes(self, changes: dict[str, Any]) -> dict[str, Any]:
        return terms_changes(changes)


class SignedSerializer(StrictSerializer):
    """What a co-signed write adds to its body."""

    signed_at = InstantField(
        required=False, help_text="The `at` of the content signed (from signing-content)."
    )
    signature = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        help_text="base64 Ed25519 signature of the content by a key of the tenant.",
    )


class AcknowledgeSerializer(SignedSerializer):
    reason = serializers.CharField(
        max_length=2000, help_text="Why the tenant accepts the amendment from its date."
    )


class AcknowledgeContentSerializer(StrictSerializer):
    reason = serializers.CharField(
        max_length=2000, help_text="Why the tenant accepts the amendment from its date."
    )


class TermsInputSerializer(StrictModelSerializer):
    """The first terms version of a new lease; it takes effect when the lease starts."""

    probe_cadence_s = serializers.DictField(
        child=serializers.IntegerField(min_value=MIN_CADENCE_S, max_value=10**9),
        required=False,
        help_text=f"Seconds between probes, per kind ({', '.join(ProbeKind.values)}).",
    )
    heavy_probe_windows = WindowSerializer(many=True, required=False)
    maintenance_windows = WindowSerializer(many=True, required=False)
    credit_tiers = CreditTierSerializer(many=True, required=False)

    class Meta:
        model = LeaseTerms
        fields = TERMS_FIELDS


def terms_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """An amendment's ``changes`` checked by the rules the terms of a new lease are checked
    by (TermsInputSerializer): contract fields only, each of its own type (``true`` is not
    a percentage), the values as that serializer reads them. A 400 names each field."""
    if not changes:
        raise serializers.ValidationError(_("Name at least one contract field to change."))
    terms = TermsInputSerializer(data=changes, partial=True)
    if not terms.is_valid():
        raise serializers.ValidationError(_sentences(terms.errors))
    return dict(terms.validated_data)


def _sentences(errors: Any, path: str = "") -> list[str]:
    """Nested serializer errors as "field.0.part: sentence" lines."""
    if isinstance(errors, dict):
        items = errors.items()
    elif isinstance(errors, list) and any(isinstance(e, dict | list) for e in errors):
        items = enumerate(errors)
    else:
        sentences = errors if isinstance(errors, list) else [errors]
        return [f"{path}: {sentence}" for sentence in sentences]
    found = []
    for key, value in items:
        found += _sentences(value, f"{path}.{key}" if path else str(key))
    return found


class AssignmentSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = NodeAssignment
        fields = ["id", "node", "hostname", "assigned_from", "assigned_until", "void"]
        read_only_fields = fields


class LeaseSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)

    class Meta:
        model = Lease
        fields = [
            "id",
            "reference",
            "name",
            "tenant",
            "status",
            "starts_at",
            "ends_at",
            "probes_enabled",
            "created_at",
        ]
        read_only_fields = fields


class LeaseDetailSerializer(LeaseSerializer):
    terms = TermsSerializer(many=True, read_only=True)
    assignments = AssignmentSerializer(many=True, read_only=True)

    class Meta(LeaseSerializer.Meta):
        fields = [*LeaseSerializer.Meta.fields, "notes", "terms", "assignments"]
        read_only_fields = fields


class LeaseCreateSerializer(StrictSerializer):
    tenant = serializers.SlugRelatedField(
        slug_field="slug", queryset=lease_selectors.tenants_for_provider()
    )
    reference = serializers.CharField(
        max_length=REFERENCE_MAX,
        trim_whitespace=False,  # a reference is taken exactly as sent, or refused
        validators=[validate_reference],
        help_text="Letters, digits, '.', '_' and '-', starting with a letter or digit "
        "(ZY-2026-001).",
    )
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    notes = serializers.CharField(required=False, allow_blank=True, default="", max_length=10000)
    starts_at = InstantField()
    ends_at = InstantField(required=False, allow_null=True, default=None)
    probes_enabled = serializers.BooleanField(required=False, default=True)
    terms = TermsInputSerializer()
    nodes = serializers.PrimaryKeyRelatedField(
        many=True, queryset=lease_selectors.nodes_for_provider(), required=False, default=list
    )


class RunNowSerializer(StrictSerializer):
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=ProbeKind.choices),
        required=False,
        allow_empty=False,
        help_text="Probe kinds to run; all kinds when omitted.",
    )


class RunNowResultSerializer(serializers.Serializer):
    lease = serializers.CharField()
    batches = serializers.ListField(child=serializers.UUIDField())
    runs = serializers.IntegerField()
    already_pending = serializers.BooleanField(
        help_text="True: these are the runs of an earlier run-now of the lease, still pending; "
        "nothing new was queued."
    )


class PeriodSerializer(StrictSerializer):
    period = serializers.CharField(
        trim_whitespace=False,
        help_text="A calendar month in the tenant's time zone: YYYY-MM.",
    )

    def validate_period(self, period: str) -> str:
        try:
            parsed = Period.parse(period)
        except PeriodError:
            raise serializers.ValidationError(
                _("The period must be written YYYY-MM, for example 2026-11.")
            ) from None
        if not 2000 <= parsed.year <= 2999:
            raise serializers.ValidationError(
                _("The period must be a month between 2000-01 and 2999-12.")
            )
        return str(parsed)

    @classmethod
    def of(cls, request: Any) -> str:
        """The ?period= of a request, validated (a 400 with the reason otherwise)."""
        query = cls(data={"period": request.query_params.get("period", "")})
        query.is_valid(raise_exception=True)
        return query.validated_data["period"]


PERIOD_PARAMETER = OpenApiParameter(
    "period",
    OpenApiTypes.STR,
    required=True,
    pattern=PERIOD_PATTERN,
    description="YYYY-MM, a calendar month in the tenant's time zone.",
)


# --- probe runs, incidents, invoices ---------------------------------------------------


class ProbeRunSerializer(serializers.ModelSerializer):
    lease_reference = serializers.CharField(source="lease.reference", read_only=True)
    terms_version = serializers.IntegerField(
        source="terms.version", read_only=True, allow_null=True
    )
    nodes = serializers.SerializerMethodField()
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    raw_url = serializers.SerializerMethodField()

    class Meta:
        model = ProbeRun
        fields = [
            "id",
            "lease",
            "lease_reference",
            "kind",
            "tool",
            "target",
            "pattern",
            "nodes",
            "batch",
            "trigger",
            "slot_at",
            "deadline_at",
            "state",
            "attempts",
            "started_at",
            "finished_at",
            "duration_s",
            "exit_code",
            "raw_sha256",
            "output_truncated",
            "measured_bps",
            "latency_us",
            "terms_version",
            "verdict",
            "rule",
            "verdict_reason",
            "error",
            "raw_url",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_nodes(self, run: ProbeRun) -> list[str]:
        return run.hostnames()

    @extend_schema_field(OpenApiTypes.URI)
    def get_raw_url(self, run: ProbeRun) -> str:
        path = reverse("api:proberun-raw", kwargs={"pk": run.pk})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    # --- the list's fast path ---------------------------------------------------------
    # A page of 100 runs through the fields above costs about 70 ms of Python (model
    # instances, a prefetch, 2,700 field calls). The list reads plain rows instead and
    # writes the same representation; tests/api check both agree field for field.

    ROW_COLUMNS = tuple(
        name
        for name in Meta.fields
        if name not in {"lease_reference", "terms_version", "nodes", "duration_s", "raw_url"}
    )
    DATETIME_COLUMNS = ("slot_at", "deadline_at", "started_at", "finished_at")
    _RAW_URL_SENTINEL = 987654321

    @classmethod
    def row_queryset(cls, queryset: Any) -> Any:
        from django.db.models import F

        return queryset.values(
            *cls.ROW_COLUMNS,
            lease_reference=F("lease__reference"),
            terms_version=F("terms__version"),
        )

    @classmethod
    def represent_rows(cls, rows: list[dict], request: Any) -> list[dict]:
        """The representation of a page of ``row_queryset`` rows, with one more query
        for the runs' node links, and one for the nodes the page's sweeps read."""
        from django.utils import timezone

        ids = [row["id"] for row in rows]
        nodes: dict[int, list[str]] = {pk: [] for pk in ids}
        through = run_selectors.run_node_links().filter(proberun_id__in=ids)
        for run_id, hostname in through.order_by("node__hostname").values_list(
            "proberun_id", "node__hostname"
        ):
            nodes[run_id].append(hostname)
        sweeps = [row for row in rows if row["pattern"] == Pattern.SWEEP]
        if sweeps:
            for run_id, hostnames in (
                run_selectors.runs_keyed((row["id"], row["slot_at"]) for row in sweeps)
                .annotate(hostnames=SweptNodes("parsed"))
                .values_list("pk", "hostnames")
            ):
                nodes[run_id] = hostnames
        zone = timezone.get_current_timezone()
        sentinel = str(cls._RAW_URL_SENTINEL)
        raw_path = reverse("api:proberun-raw", kwargs={"pk": cls._RAW_URL_SENTINEL})
        raw_url = request.build_absolute_uri(raw_path) if request else raw_path
        head, tail = raw_url.split(sentinel, 1)

        def instant(value: Any) -> str | None:
            if value is None:
                return None
            text = value.astimezone(zone).isoformat()
            return text[:-6] + "Z" if text.endswith("+00:00") else text

        represented = []
        for row in rows:
            started, finished = row["started_at"], row["finished_at"]
            item = {name: row[name] for name in cls.Meta.fields if name in row}
            for name in cls.DATETIME_COLUMNS:
                item[name] = instant(row[name])
            item["nodes"] = nodes[row["id"]]
            item["duration_s"] = (
                (finished - started).total_seconds() if started and finished else None
            )
            item["raw_url"] = f"{head}{row['id']}{tail}"
            represented.append({name: item[name] for name in cls.Meta.fields})
        return represented


class ProbeRunDetailSerializer(ProbeRunSerializer):
    class Meta(ProbeRunSerializer.Meta):
        fields = [*ProbeRunSerializer.Meta.fields, "command", "parsed", "stderr"]
        read_only_fields = fields


class IncidentSerializer(serializers.ModelSerializer):
    lease_reference = serializers.CharField(source="lease.reference", read_only=True)
    terms_version = serializers.IntegerField(source="terms.version", read_only=True)
    evidence_run_ids = serializers.SerializerMethodField()

    class Meta:
        model = Incident
        fields = [
            "id",
            "lease",
            "lease_reference",
            "kind",
            "target",
            "pattern",
            "state",
            "opened_at",
            "closed_at",
            "acknowledged_at",
            "mitigated_at",
            "repair_minutes",
            "repair_note",
            "violations",
            "worst_bps",
            "worst_latency_us",
            "rule",
            "detail",
            "terms_version",
            "evidence_run_ids",
        ]
        read_only_fields = fields

    repair_minutes = serializers.SerializerMethodField(
        help_text="Resolved minus fault (closed_at - opened_at) in minutes, to 0.1; null while "
        "open (incidents.repair)."
    )

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_evidence_run_ids(self, incident: Incident) -> list[int]:
        return sorted(run.pk for run in incident.runs.all())

    @extend_schema_field(serializers.DecimalField(max_digits=12, decimal_places=1, allow_null=True))
    def get_repair_minutes(self, incident: Incident) -> str | None:
        minutes = repair_minutes(incident)
        return None if minutes is None else str(minutes)


class RepairStatementSerializer(StrictSerializer):
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="What the provider found or did (kept on the incident, shown to the tenant).",
    )


class InvoiceLineSerializer(serializers.ModelSerializer):
    lease_reference = serializers.CharField(
        source="lease.reference", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = InvoiceLine
        fields = [
            "position",
            "lease",
            "lease_reference",
            "kind",
            "description",
            "quantity",
            "unit",
            "unit_price",
            "amount",
            "tax_rate_percent",
            "detail",
        ]
        read_only_fields = fields


class TaxGroupSerializer(serializers.Serializer):
    """The invoice's lines at one VAT rate: their subtotal and its tax, rounded once."""

    tax_rate_percent = serializers.DecimalField(max_digits=5, decimal_places=2)
    subtotal = serializers.DecimalField(max_digits=14, decimal_places=2)
    tax = serializers.DecimalField(max_digits=14, decimal_places=2)
    total = serializers.DecimalField(max_digits=14, decimal_places=2)


IDENTITY_HELP = "Frozen when issued: legal_name, tax_id, address, phone, bank, account."


class InvoiceEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(
        source="actor.username",
        default=None,
        read_only=True,
        allow_null=True,
        help_text="Who did it; null for a command, beat, or a step recorded before events.",
    )
    credit_note = serializers.CharField(
        source="credit_note.number",
        default=None,
        read_only=True,
        allow_null=True,
        help_text="The credit note's number (credited events only).",
    )

    class Meta:
        model = InvoiceEvent
        fields = ["at", "kind", "from_state", "to_state", "actor", "reason", "credit_note"]
        read_only_fields = fields


class VoucherRedemptionSerializer(serializers.ModelSerializer):
    voucher = serializers.CharField(source="voucher.number", read_only=True)
    invoice_number = serializers.CharField(source="invoice.number", read_only=True)
    invoice_status = serializers.CharField(source="invoice.status", read_only=True)

    class Meta:
        model = VoucherRedemption
        fields = [
            "voucher",
            "invoice",
            "invoice_number",
            "invoice_status",
            "amount",
            "returned",
            "at",
        ]
        read_only_fields = fields

    returned = serializers.DecimalField(
        max_digits=14,
        decimal_places=2,
        read_only=True,
        help_text="What credit notes on the invoice gave back of it to the voucher.",
    )


class VoucherSerializer(serializers.ModelSerializer):
    """A voucher (代金券) with its ledger (billing.vouchers)."""

    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    lease_reference = serializers.CharField(source="lease.reference", read_only=True)
    source_invoice_number = serializers.CharField(source="source_invoice.number", read_only=True)
    redemptions = VoucherRedemptionSerializer(many=True, read_only=True)
    redeemed = serializers.SerializerMethodField(
        help_text="What invoices that are not void used of it, less what credit notes on "
        "them gave back."
    )
    reduced = serializers.SerializerMethodField(
        help_text="What late results that lowered its month's credit took off what was left."
    )
    remaining = serializers.SerializerMethodField(help_text="amount - redeemed - reduced.")
    supplements = serializers.CharField(
        source="supplements.number",
        read_only=True,
        allow_null=True,
        help_text="The voucher of the same month this one adds to (a late result raised the "
        "credit), or null.",
    )
    state = serializers.SerializerMethodField(
        help_text="open, partly_redeemed, redeemed (in full), expired or void, now."
    )

    class Meta:
        model = Voucher
        fields = [
            "id",
            "number",
            "tenant",
            "lease",
            "lease_reference",
            "source_invoice",
            "source_invoice_number",
            "period",
            "currency",
            "amount",
            "issued_at",
            "validity_months",
            "expires_at",
            "voided_at",
            "description",
            "reason",
            "supplements",
            "detail",
            "redeemed",
            "reduced",
            "remaining",
            "state",
            "redemptions",
        ]
        read_only_fields = fields

    def _standing(self, voucher: Voucher) -> Any:
        from billing.vouchers import standing

        return standing(voucher, timezone.now())

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_redeemed(self, voucher: Voucher) -> str:
        return str(self._standing(voucher).used)

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_reduced(self, voucher: Voucher) -> str:
        return str(self._standing(voucher).reduced)

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_remaining(self, voucher: Voucher) -> str:
        return str(self._standing(voucher).left)

    @extend_schema_field(serializers.CharField())
    def get_state(self, voucher: Voucher) -> str:
        return self._standing(voucher).state


class InvoiceSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    lines = InvoiceLineSerializer(many=True, read_only=True)
    seller = serializers.DictField(child=serializers.CharField(), help_text=IDENTITY_HELP)
    buyer = serializers.DictField(child=serializers.CharField(), help_text=IDENTITY_HELP)
    forced_over = serializers.ListField(child=serializers.CharField())
    metering_gaps = serializers.ListField(
        child=serializers.DictField(),
        help_text=(
            "Recorded when issued: each metering gap of the period (a node not read for more "
            "than three days), whose traffic is billed by time: incident, lease, node, start, "
            "end, bytes (over the whole gap), bytes_in_period. Issuing warns, it does not "
            "refuse."
        ),
    )
    credit_notes = serializers.SerializerMethodField()
    events = InvoiceEventSerializer(
        many=True,
        read_only=True,
        help_text="Its life step by step: issued, paid, voided, credited; who, when, why.",
    )
    tax_groups = TaxGroupSerializer(
        many=True,
        read_only=True,
        help_text="Tax per VAT rate of the lines, rounded once per rate; they add up to tax.",
    )

    class Meta:
        model = Invoice
        fields = [
            "id",
            "tenant",
            "period",
            "period_start",
            "period_end",
            "status",
            "number",
            "issued_at",
            "issue_date",
            "due_date",
            "seller",
            "buyer",
            "forced_reason",
            "forced_over",
            "metering_gaps",
            "paid_at",
            "voided_at",
            "void_reason",
            "currency",
            "subtotal",
            "tax_rate_percent",
            "tax_groups",
            "tax",
            "total",
            "network_cost_share",
            "credit_notes",
            "payment_status",
            "credited",
            "net_total",
            "amount_due",
            "refund_due",
            "vouchers_applied",
            "voucher_redemptions",
            "vouchers_issued",
            "events",
            "lines",
        ]
        read_only_fields = fields

    payment_status = serializers.SerializerMethodField(
        help_text="draft, issued, partly_credited, credited (in full), covered (by "
        "vouchers), paid or void "
        "(billing.balance)."
    )
    credited = serializers.SerializerMethodField(
        help_text="What the credit notes took off, tax included (positive)."
    )
    net_total = serializers.SerializerMethodField(help_text="total - credited.")
    amount_due = serializers.SerializerMethodField(
        help_text="What the tenant still owes: net_total - vouchers_applied while issued "
        "(not below 0.00), 0.00 once paid or void, null on a draft."
    )
    refund_due = serializers.SerializerMethodField(
        help_text="Credit notes issued after payment: owed back to the tenant."
    )

    vouchers_applied = serializers.SerializerMethodField(
        help_text="What vouchers (代金券) paid of its total after tax, when it was issued; "
        "0.00 once void (released). Not a VAT line: subtotal, tax and total stay."
    )
    voucher_redemptions = VoucherRedemptionSerializer(
        many=True,
        read_only=True,
        help_text="The vouchers it used, each with the amount (released when it is void).",
    )
    vouchers_issued = serializers.SerializerMethodField(
        help_text="The numbers of the vouchers its month's SLA credits became (terms with "
        "credit_mode voucher)."
    )

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_credit_notes(self, invoice: Invoice) -> list[int]:
        return sorted(note.pk for note in invoice.credit_notes.all())

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_vouchers_issued(self, invoice: Invoice) -> list[str]:
        return sorted(voucher.number for voucher in invoice.vouchers_issued.all())

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_vouchers_applied(self, invoice: Invoice) -> str | None:
        return self._balance(invoice)["vouchers_applied"]

    def _balance(self, invoice: Invoice) -> dict[str, str | None]:
        notes, used = invoice.credit_notes.all(), invoice.voucher_redemptions.all()
        return balance(invoice, notes, used).as_dict()

    @extend_schema_field(serializers.ChoiceField(choices=PaymentStatus.choices))
    def get_payment_status(self, invoice: Invoice) -> str | None:
        return self._balance(invoice)["payment_status"]

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_credited(self, invoice: Invoice) -> str | None:
        return self._balance(invoice)["credited"]

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_net_total(self, invoice: Invoice) -> str | None:
        return self._balance(invoice)["net_total"]

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True))
    def get_amount_due(self, invoice: Invoice) -> str | None:
        return self._balance(invoice)["amount_due"]

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_refund_due(self, invoice: Invoice) -> str | None:
        return self._balance(invoice)["refund_due"]


class CreditNoteLineSerializer(serializers.ModelSerializer):
    original_position = serializers.IntegerField(source="original_line.position", read_only=True)
    lease_reference = serializers.CharField(
        source="lease.reference", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = CreditNoteLine
        fields = [
            "position",
            "original_position",
            "lease",
            "lease_reference",
            "kind",
            "description",
            "amount",
            "tax_rate_percent",
        ]
        read_only_fields = fields


class CreditNoteSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    invoice_number = serializers.CharField(source="invoice.number", read_only=True)
    seller = serializers.DictField(child=serializers.CharField(), help_text=IDENTITY_HELP)
    buyer = serializers.DictField(child=serializers.CharField(), help_text=IDENTITY_HELP)
    lines = CreditNoteLineSerializer(many=True, read_only=True)

    class Meta:
        model = CreditNote
        fields = [
            "id",
            "number",
            "tenant",
            "invoice",
            "invoice_number",
            "reason",
            "kind",
            "full_reversal",
            "issued_at",
            "issue_date",
            "currency",
            "subtotal",
            "tax",
            "total",
            "seller",
            "buyer",
            "lines",
        ]
        read_only_fields = fields


class IssueSerializer(StrictSerializer):
    force = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Issue although runs of the month are unfinished or not yet ingested.",
    )
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="Required with force: why (recorded on the invoice).",
    )


class ReasonSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=2000)


class MarkPaidSerializer(StrictSerializer):
    paid_on = serializers.DateField(
        required=False,
        help_text="The day the payment arrived, in the tenant's zone (default: today there); "
        "not before the issue date, not in the future.",
    )


class CorrectionSerializer(StrictSerializer):
    position = serializers.IntegerField(min_value=1, help_text="The original line's position.")
    amount = serializers.DecimalField(
        max_digits=14,
        decimal_places=2,
        min_value=Decimal("0.01"),
        help_text="How much to take off the line, at most what earlier credit notes left.",
    )


class CreditNoteCreateSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=2000)
    kind = serializers.ChoiceField(
        choices=CreditNoteKind.choices,
        default=CreditNoteKind.CORRECTION,
        help_text=(
            "correction (default): a wrong figure, counted when the month is recomputed; "
            "commercial: goodwill or a discount, never billed back."
        ),
    )
    lines = CorrectionSerializer(
        many=True,
        required=False,
        allow_empty=False,
        help_text="Line corrections; omitted: the full reversal of what is left.",
    )


# --- API tokens ------------------------------------------------------------------------


class ApiTokenSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)
    issuer = serializers.CharField(
        source="issuer.username",
        read_only=True,
        allow_null=True,
        help_text="Who issued it (null: that user no longer exists).",
    )
    tenant = serializers.CharField(
        source="tenant.slug",
        read_only=True,
        allow_null=True,
        help_text="The tenant it acts for; null for a provider staff token.",
    )
    role = serializers.ChoiceField(
        choices=Role.choices,
        allow_blank=True,
        read_only=True,
        help_text="The holder's role in that tenant when it was issued; empty for staff.",
    )
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.choices))
    state = serializers.ChoiceField(choices=TokenState.choices, read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "user",
            "issuer",
            "tenant",
            "role",
            "scopes",
            "state",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
        ]
        read_only_fields = fields


class IssuedTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(
        read_only=True, help_text="The whole token. It is shown this once and never again."
    )

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class ApiTokenCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.choices), allow_empty=False
    )
    expires_at = InstantField(required=False, allow_null=True, default=None)
    user = serializers.CharField(
        max_length=150,
        required=False,
        help_text="Username of the holder: yourself by default; a tenant admin may issue "
        "tokens to their tenant's members. Provider staff never issue tokens for tenant users.",
    )
    tenant = serializers.SlugField(
        max_length=50,
        required=False,
        help_text="Slug of the tenant the token acts for: needed only when the holder "
        "belongs to several; a staff token acts for none.",
    )
