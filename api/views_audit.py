"""Contract audit, customer evidence and disputes over the API.

Rows come from ``visible_to(user)`` through api.base.BaseViewSet, so another tenant's
lease, evidence or dispute answers 404. The writes call billing.evidence's services; the
bundle is billing.audit's.

- GET  /api/v1/audit/public-key/              the key bundles are signed with, and every
                                              current and retired key (anyone)
- GET  /api/v1/leases/{id}/checkpoints/[?period=]  the lease's signed chain checkpoints
                                              (as the bundle: staff, tenant admin, auditor)
- GET  /api/v1/leases/{id}/audit/?period=     the signed bundle (staff, tenant admin,
                                              auditor; a token needs the audit scope)
- GET  /api/v1/leases/{id}/evidence/          the lease's customer evidence (any role)
- POST /api/v1/leases/{id}/evidence/          submit evidence (staff, tenant admin)
- GET  /api/v1/evidence/{id}/                 one piece of evidence with its raw output
- GET  /api/v1/disputes/, /api/v1/disputes/{id}/
- POST /api/v1/disputes/                      open a dispute (staff, tenant admin)
- POST /api/v1/disputes/{id}/accept/, /reject/  decide it (provider staff)
"""

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.choices import Role
from accounts.selectors import require_tenant_admin
from api import serializers as s
from api.base import BaseViewSet, KnownQueryParametersMixin, StrictSerializer
from api.fields import InstantField
from api.filtersets import IdFilter
from api.permissions import ALL_ROLES, SERVICE_DECIDES
from api.throttling import AuditBundleRateThrottle
from api.views_cosign import SigningContentSerializer, signed_fields, signing_answer
from benchmarks.models import ProbeRun
from billing import audit
from billing import evidence as evidence_services
from billing import selectors as billing_selectors
from billing.models import (
    Dispute,
    DisputeEvent,
    DisputeState,
    Evidence,
    EvidenceTool,
    Invoice,
)
from incidents.models import Incident
from leases import selectors as lease_selectors
from leases.models import Lease

TENANT_WRITERS = frozenset({Role.ADMIN})
AUDIT_READERS = frozenset({Role.ADMIN, Role.AUDITOR})
MAX_NODES = 64


# --- serializers ------------------------------------------------------------------------


class KeySerializer(serializers.Serializer):
    algorithm = serializers.CharField()
    public_key = serializers.CharField(help_text="Base64 of the 32 raw bytes of the key.")
    public_key_pem = serializers.CharField(help_text="SubjectPublicKeyInfo PEM.")
    fingerprint = serializers.CharField(help_text="sha256: hex of the raw key.")


class ValidKeySerializer(KeySerializer):
    not_before = serializers.CharField(
        allow_null=True, help_text="ISO UTC; null: in use since the beginning."
    )
    not_after = serializers.CharField(
        allow_null=True, help_text="ISO UTC when it was retired; null: not retired."
    )
    current = serializers.BooleanField(help_text="The key that signs now.")


class PublicKeySerializer(KeySerializer):
    keys = ValidKeySerializer(many=True, help_text="Every current and retired key.")


class EvidenceSerializer(serializers.ModelSerializer):
    lease_reference = serializers.CharField(source="lease.reference", read_only=True)
    submitted_by = serializers.CharField(source="submitted_by.username", default=None)
    nodes = serializers.SerializerMethodField()
    terms_version = serializers.IntegerField(source="terms.version", read_only=True)
    submitted_at = serializers.DateTimeField(source="created_at", read_only=True)

    class Meta:
        model = Evidence
        fields = [
            "id",
            "lease",
            "lease_reference",
            "tool",
            "nodes",
            "measured_at",
            "submitted_at",
            "submitted_by",
            "raw_sha256",
            "parsed",
            "measured_bps",
            "latency_us",
            "terms_version",
            "verdict",
            "rule",
            "verdict_reason",
            "note",
        ]
        read_only_fields = fields

    def get_nodes(self, item: Evidence) -> list[str]:
        return sorted(node.hostname for node in item.nodes.all())


class EvidenceDetailSerializer(EvidenceSerializer):
    class Meta(EvidenceSerializer.Meta):
        fields = [*EvidenceSerializer.Meta.fields, "raw_output"]
        read_only_fields = fields


class EvidenceSubmitSerializer(StrictSerializer):
    tool = serializers.ChoiceField(choices=EvidenceTool.choices)
    raw_output = serializers.CharField(
        trim_whitespace=False,
        max_length=evidence_services.EVIDENCE_MAX_BYTES,
        help_text="Exactly what the tool printed (iperf3 -J, perftest, nccl-tests, ping).",
    )
    nodes = serializers.ListField(
        child=serializers.CharField(max_length=255),
        min_length=1,
        max_length=MAX_NODES,
        help_text="Hostnames of the lease's nodes it ran on (two for pair tools).",
    )
    measured_at = InstantField(required=False, help_text="Default: now.")
    note = serializers.CharField(required=False, allow_blank=True, max_length=4000)


class DisputeEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None)

    class Meta:
        model = DisputeEvent
        fields = ["at", "action", "actor", "reason", "detail"]
        read_only_fields = fields


class DisputeSerializer(serializers.ModelSerializer):
    lease_reference = serializers.CharField(source="lease.reference", read_only=True)
    opened_by = serializers.CharField(source="opened_by.username", default=None)
    decided_by = serializers.CharField(source="decided_by.username", default=None)
    evidence = serializers.SerializerMethodField()
    events = DisputeEventSerializer(many=True, read_only=True)

    class Meta:
        model = Dispute
        fields = [
            "id",
            "lease",
            "lease_reference",
            "state",
            "probe_run",
            "incident",
            "invoice",
            "reason",
            "evidence",
            "opened_by",
            "created_at",
            "decided_by",
            "decided_at",
            "decision_reason",
            "credit_cny",
            "credit_period",
            "events",
        ]
        read_only_fields = fields

    def get_evidence(self, dispute: Dispute) -> list[int]:
        return sorted(item.pk for item in dispute.evidence.all())


class DisputeContentSerializer(StrictSerializer):
    lease = serializers.IntegerField(min_value=1)
    reason = serializers.CharField(max_length=4000)
    probe_run = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    incident = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    invoice = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    evidence = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=100
    )


class DisputeOpenSerializer(DisputeContentSerializer, s.SignedSerializer):
    """A dispute as opened; with ``signed_at`` and ``signature`` when the tenant has
    signing keys (the content: ``POST disputes/signing-content/``)."""


class DecisionSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=4000)


class AcceptSerializer(DecisionSerializer):
    credit_cny = serializers.DecimalField(
        max_digits=14,
        decimal_places=2,
        min_value=0,
        required=False,
        help_text="CNY credited on the tenant's invoice for the month of acceptance.",
    )


class DisputeFilterSet(filters.FilterSet):
    lease = IdFilter(field_name="lease_id")
    state = filters.ChoiceFilter(choices=DisputeState.choices)

    class Meta:
        model = Dispute
        fields = ["lease", "state"]


# --- views ------------------------------------------------------------------------------


class PublicKeyView(KnownQueryParametersMixin, APIView):
    """The Ed25519 public key every audit bundle is signed with."""

    permission_classes = [AllowAny]

    @extend_schema(responses={200: PublicKeySerializer}, summary="The audit signing key")
    def get(self, request: Request) -> Response:
        return Response(audit.published_key_info())


class LeaseCheckpointViewSet(BaseViewSet):
    """A lease's signed hash-chain checkpoints, one per closed month (docs/audit.md): keep
    them, and check later bundles against them with --previous."""

    queryset = lease_selectors.leases_for_provider()
    read_roles = AUDIT_READERS
    required_scope = "audit"
    query_parameters = frozenset({"period"})

    @extend_schema(
        # Every checkpoint as a list, or with ?period= that month's one signed document.
        responses={
            200: {
                "oneOf": [
                    {"type": "array", "items": {"type": "object"}},
                    {"type": "object"},
                ]
            }
        },
        summary="Signed chain checkpoints of the lease, oldest first (?period=: that one)",
    )
    def list_checkpoints(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        rows = billing_selectors.chain_checkpoints_of(user=request.user, lease=lease)
        if "period" in request.query_params:
            row = rows.filter(period=s.PeriodSerializer.of(request)).first()
            if row is None:
                raise NotFound(_("This lease has no checkpoint for that month yet."))
            return Response(row.document())
        return Response([row.document() for row in rows.select_related("lease").order_by("period")])


def _visible(model: Any, user: Any, pk: Any, field: str) -> Any:
    """A row of ``model`` the user may see, or a 400 naming the field (never whether the
    row exists for someone else)."""
    if pk is None:
        return None
    row = model.objects.visible_to(user).filter(pk=pk).first()
    if row is None:
        raise serializers.ValidationError({field: [_("No such object.")]})
    return row


RAW_PARAMETER = OpenApiParameter(
    "raw",
    OpenApiTypes.BOOL,
    description="1: every run carries its raw output (and stderr), to re-hash and re-parse.",
)


def _raw(request: Request) -> bool:
    value = request.query_params.get("raw", "0").strip().lower()
    if value not in ("0", "1", "true", "false"):
        raise serializers.ValidationError(
            {"raw": [_("raw must be 1 or 0, got %(value)r.") % {"value": value}]}
        )
    return value in ("1", "true")


class LeaseAuditViewSet(BaseViewSet):
    """A lease's signed audit bundle for a month."""

    queryset = lease_selectors.leases_for_provider()
    read_roles = AUDIT_READERS
    required_scope = "audit"
    query_parameters = frozenset({"period", "raw"})

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return queryset.select_related("tenant")

    def get_throttles(self) -> list[Any]:
        # A bundle is built and signed on demand: its own, tighter budget per user.
        return [*super().get_throttles(), AuditBundleRateThrottle()]

    @extend_schema(
        parameters=[s.PERIOD_PARAMETER, RAW_PARAMETER],
        responses={200: OpenApiTypes.OBJECT},
        summary="Signed audit bundle of the lease for a month (docs/audit.md)",
    )
    def bundle(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        period = s.PeriodSerializer.of(request)
        return Response(audit.signed_bundle(lease=lease, period=period, include_raw=_raw(request)))


def _evidence_rows(queryset: QuerySet) -> QuerySet:
    return queryset.select_related("lease", "terms", "submitted_by").prefetch_related(
        Prefetch("nodes", queryset=lease_selectors.nodes_for_provider().only("id", "hostname"))
    )


class LeaseEvidenceViewSet(BaseViewSet):
    """A lease's customer evidence: read by every role, submitted by the tenant admin."""

    queryset = lease_selectors.leases_for_provider()
    read_roles = ALL_ROLES
    write_roles = TENANT_WRITERS
    staff_permissions = {"submit": "billing.add_evidence"}
    pagination_class = None

    @extend_schema(responses={200: EvidenceSerializer(many=True)}, summary="Evidence on a lease")
    def list_evidence(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        rows = _evidence_rows(
            billing_selectors.evidence_visible_to(request.user).filter(lease=lease)
        )
        return Response(EvidenceSerializer(rows.order_by("-measured_at", "-id"), many=True).data)

    @extend_schema(
        request=EvidenceSubmitSerializer,
        responses={201: EvidenceSerializer},
        summary="Submit the raw output of your own measurement",
    )
    def submit(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        body = EvidenceSubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        item = evidence_services.submit_evidence(
            lease=lease,
            user=request.user,
            tool=data["tool"],
            raw_output=data["raw_output"],
            nodes=data["nodes"],
            measured_at=data.get("measured_at"),
            note=data.get("note", ""),
        )
        item = _evidence_rows(billing_selectors.evidence_for_provider().filter(pk=item.pk)).get()
        return Response(EvidenceSerializer(item).data, status=status.HTTP_201_CREATED)


class EvidenceViewSet(mixins.RetrieveModelMixin, BaseViewSet):
    """One piece of customer evidence, with the raw output as posted."""

    queryset = billing_selectors.evidence_for_provider()
    serializer_class = EvidenceDetailSerializer

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return _evidence_rows(queryset)


class DisputeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Disputes: opened by the tenant admin, decided by provider staff, every step kept."""

    queryset = billing_selectors.disputes_for_provider()
    serializer_class = DisputeSerializer
    filterset_class = DisputeFilterSet
    write_roles = TENANT_WRITERS
    # Opening a dispute is the tenant's: the service refuses it to provider staff.
    staff_permissions = {
        "create": SERVICE_DECIDES,
        "signing_content": SERVICE_DECIDES,
        "accept": "billing.accept_dispute",
        "reject": "billing.reject_dispute",
    }

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return billing_selectors.with_dispute_history(disputes=queryset).order_by(
            "-created_at", "-id"
        )

    def _answer(self, dispute: Dispute, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.optimize(billing_selectors.disputes_for_provider().filter(pk=dispute.pk)).get()
        return Response(DisputeSerializer(fresh).data, status=code)

    @extend_schema(
        request=DisputeOpenSerializer,
        responses={201: DisputeSerializer},
        summary="Open a dispute on a probe run, an incident or an invoice",
    )
    def create(self, request: Request) -> Response:
        body = DisputeOpenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        dispute = evidence_services.open_dispute(
            **self._claim(request, body.validated_data),
            **signed_fields(body.validated_data),
        )
        return self._answer(dispute, status.HTTP_201_CREATED)

    @staticmethod
    def _claim(request: Request, data: dict[str, Any]) -> dict[str, Any]:
        user = request.user
        return {
            "lease": _visible(Lease, user, data["lease"], "lease"),
            "user": user,
            "reason": data["reason"],
            "probe_run": _visible(ProbeRun, user, data.get("probe_run"), "probe_run"),
            "incident": _visible(Incident, user, data.get("incident"), "incident"),
            "invoice": _visible(Invoice, user, data.get("invoice"), "invoice"),
            "evidence": [
                _visible(Evidence, user, pk, "evidence") for pk in data.get("evidence", [])
            ],
        }

    @extend_schema(
        request=DisputeContentSerializer,
        responses={200: SigningContentSerializer},
        summary="The content a tenant admin signs to open this dispute",
    )
    @action(detail=False, methods=["post"], url_path="signing-content")
    def signing_content(self, request: Request) -> Response:
        body = DisputeContentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        claim = self._claim(request, body.validated_data)
        lease = claim["lease"]
        require_tenant_admin(
            request.user,
            lease.tenant,
            _("Only a tenant admin of %(tenant)s can open a dispute on lease %(lease)s.")
            % {"tenant": lease.tenant.name, "lease": lease.reference},
        )
        return signing_answer(evidence_services.dispute_content(**claim, at=timezone.now()))

    @extend_schema(
        request=AcceptSerializer,
        responses={200: DisputeSerializer},
        summary="Accept a dispute, with a credit on the next invoice (provider staff)",
    )
    @action(detail=True, methods=["post"], write_roles=frozenset())
    def accept(self, request: Request, pk: str | None = None) -> Response:
        dispute = self.get_object()
        body = AcceptSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        dispute = evidence_services.accept_dispute(
            dispute=dispute,
            user=request.user,
            reason=body.validated_data["reason"],
            credit_cny=body.validated_data.get("credit_cny", "0.00"),
        )
        return self._answer(dispute)

    @extend_schema(
        request=DecisionSerializer,
        responses={200: DisputeSerializer},
        summary="Reject a dispute with a reason (provider staff)",
    )
    @action(detail=True, methods=["post"], write_roles=frozenset())
    def reject(self, request: Request, pk: str | None = None) -> Response:
        dispute = self.get_object()
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        dispute = evidence_services.reject_dispute(
            dispute=dispute, user=request.user, reason=body.validated_data["reason"]
        )
        return self._answer(dispute)
