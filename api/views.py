"""The API's view sets. Every one inherits api.base.BaseViewSet, which reads rows through
visible_to(user); writes call the domain services (leases.services, benchmarks.services,
accounts.services) and never save models themselves."""

import hashlib
from typing import Any

from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from accounts import selectors as token_selectors
from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken
from accounts.selectors import administered_tenants, managed_users, require_tenant_admin
from api import filtersets
from api import serializers as s
from api.base import BaseViewSet, refuse_body
from api.exceptions import Conflict
from api.pagination import SlotCursorPagination
from api.permissions import ALL_ROLES, SERVICE_DECIDES
from api.views_cosign import (
    AcceptanceActions,
    SigningContentSerializer,
    signed_fields,
    signing_answer,
)
from benchmarks import selectors as run_selectors
from benchmarks import services as probe_services
from billing import probe_tax, running
from billing import selectors as billing_selectors
from billing import services as billing_services
from billing.documents import document_language, einvoice, xlsx
from billing.documents import pdf as invoice_pdf
from billing.documents.rows import invoice_document
from billing.lease_month import lease_month
from billing.models import Invoice
from billing.reports import sla_report
from common.attachments import attachment
from incidents import repair
from incidents import selectors as incident_selectors
from leases import selectors
from leases import services as lease_services
from leases.choices import LeaseStatus
from leases.models import Lease, Tenant, TermsAmendment

READ_ONLY = ["get", "head", "options"]


class TenantViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Customer organisations. Provider staff see all; a member sees their own tenant."""

    queryset = selectors.tenants_for_provider()
    serializer_class = s.TenantSerializer
    filterset_fields = ["slug"]


class SiteViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    BaseViewSet,
):
    """Data centres. Tenants see the sites of their leases' nodes; provider staff write."""

    queryset = selectors.sites_for_provider()
    serializer_class = s.SiteSerializer
    visible = staticmethod(selectors.sites_visible_to)
    filterset_fields = ["code", "city"]
    http_method_names = ["get", "post", "patch", "head", "options"]
    staff_permissions = {"create": "leases.add_site", "partial_update": "leases.change_site"}

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = lease_services.create_site(**serializer.validated_data)

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = lease_services.update_site(
            site=serializer.instance, changes=dict(serializer.validated_data)
        )


class FabricViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    BaseViewSet,
):
    """Inter-node networks. Tenants see the fabrics of their leases' nodes; provider staff
    write."""

    queryset = selectors.fabrics_for_provider()
    serializer_class = s.FabricSerializer
    visible = staticmethod(selectors.fabrics_visible_to)
    filterset_class = filtersets.FabricFilterSet
    http_method_names = ["get", "post", "patch", "head", "options"]
    staff_permissions = {"create": "leases.add_fabric", "partial_update": "leases.change_fabric"}

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return queryset.select_related("site").order_by("site__name", "name")

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = lease_services.create_fabric(**serializer.validated_data)

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        serializer.instance = lease_services.update_fabric(
            fabric=serializer.instance, changes=dict(serializer.validated_data)
        )


class NodeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """GPU servers. A tenant sees only the nodes of its leases (Node.objects.visible_to)."""

    queryset = selectors.nodes_for_provider()
    serializer_class = s.NodeSerializer
    filterset_class = filtersets.NodeFilterSet

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return queryset.select_related("leaf_switch__fabric__site").order_by("hostname")


class LeaseViewSet(
    AcceptanceActions, mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet
):
    """Leases with their contract terms versions and node assignments."""

    queryset = selectors.leases_for_provider()
    serializer_class = s.LeaseSerializer
    filterset_class = filtersets.LeaseFilterSet
    staff_permissions = {
        "create": "leases.add_lease",
        "activate": "leases.transition_lease",
        "end": "leases.transition_lease",
        "cancel": "leases.transition_lease",
        "run_now": "benchmarks.run_probes_now",
        # A tenant admin's co-signed sign-off: the service refuses provider staff.
        "acceptance_signing_content": SERVICE_DECIDES,
        "acceptance_sign_off": SERVICE_DECIDES,
    }

    def optimize(self, queryset: QuerySet) -> QuerySet:
        queryset = queryset.select_related("tenant")
        if self.action not in {"list", "sla", "probe_tax", "run_now"}:  # the lease alone
            queryset = queryset.prefetch_related(
                "terms", Prefetch("assignments", queryset=selectors.assignments_with_nodes())
            )
        return queryset

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.action == "create":
            return s.LeaseCreateSerializer
        if self.action == "list":
            return s.LeaseSerializer
        return s.LeaseDetailSerializer

    def _detail(self, lease: Lease, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.optimize(selectors.leases_for_provider().filter(pk=lease.pk)).get()
        return Response(
            s.LeaseDetailSerializer(fresh, context=self.get_serializer_context()).data, status=code
        )

    @extend_schema(
        request=s.LeaseCreateSerializer,
        responses={201: s.LeaseDetailSerializer},
        summary="Create a draft lease with its first terms and nodes (provider staff)",
    )
    def create(self, request: Request) -> Response:
        serializer = s.LeaseCreateSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        nodes = data.pop("nodes")
        terms = dict(data.pop("terms"))
        with transaction.atomic():
            lease = lease_services.create_lease(actor=request.user, terms=terms, **data)
            for node in nodes:
                lease_services.assign_node(lease=lease, node=node, actor=request.user)
        return self._detail(lease, status.HTTP_201_CREATED)

    def _transition(self, to: str) -> Response:
        lease = self.get_object()
        refuse_body(self.request)
        lease = lease_services.transition_lease(lease=lease, to=to, actor=self.request.user)
        return self._detail(lease)

    @extend_schema(request=None, responses={200: s.LeaseDetailSerializer})
    @action(detail=True, methods=["post"])
    def activate(self, request: Request, pk: str | None = None) -> Response:
        """draft → active (provider staff)."""
        return self._transition(LeaseStatus.ACTIVE)

    @extend_schema(request=None, responses={200: s.LeaseDetailSerializer})
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str | None = None) -> Response:
        """active → ended (provider staff)."""
        return self._transition(LeaseStatus.ENDED)

    @extend_schema(request=None, responses={200: s.LeaseDetailSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """draft → cancelled (provider staff)."""
        return self._transition(LeaseStatus.CANCELLED)

    @extend_schema(
        request=s.RunNowSerializer,
        responses={202: s.RunNowResultSerializer},
        summary="Run the lease's probes now (provider staff, tenant admin)",
        description=(
            "While the lease's earlier run-now runs are pending, the answer is those runs "
            "(`already_pending: true`), not new ones. A tenant asking again within "
            "RUN_NOW_COOLDOWN_S after they were over gets 429 with Retry-After (seconds); "
            "provider staff are not held to the cooldown."
        ),
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="run-now",
        url_name="run-now",
        write_roles=frozenset({Role.ADMIN}),
    )
    def run_now(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        body = s.RunNowSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        if lease.status != LeaseStatus.ACTIVE:
            raise Conflict(
                _("Lease %(lease)s is %(status)s; only an active lease's probes can run.")
                % {"lease": lease.reference, "status": lease.get_status_display()}
            )
        try:
            asked = probe_services.run_now(
                lease=lease,
                kinds=body.validated_data.get("kinds"),
                tenant_request=not request.user.is_staff,
            )
        except probe_services.CoolingDown as cooling:
            refused = Throttled(detail=str(cooling))
            refused.wait = cooling.retry_after_s  # Retry-After, without DRF's extra sentence
            raise refused from None
        except ValueError as exc:
            raise Conflict(str(exc)) from None
        result = {
            "lease": lease.reference,
            "batches": asked.batches,
            "runs": asked.runs,
            "already_pending": asked.already_pending,
        }
        return Response(s.RunNowResultSerializer(result).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[s.PERIOD_PARAMETER],
        responses={200: OpenApiTypes.OBJECT},
        summary="SLA report of the lease for a month (billing.reports.sla_report)",
    )
    @action(
        detail=True,
        methods=["get"],
        filter_backends=[],
        pagination_class=None,
        query_parameters=frozenset({"period"}),
    )
    def sla(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        return Response(sla_report(lease=lease, period=s.PeriodSerializer.of(request)))

    @extend_schema(
        parameters=[s.PERIOD_PARAMETER],
        responses={200: OpenApiTypes.OBJECT},
        summary="Probe tax of the lease for a month: its own probes' bytes and seconds, "
        "kept out of metering (billing.probe_tax)",
        description=(
            "Each heavy probe run that started in the month (tenant's clock): `bytes`, "
            "`bytes_by_node` (bytes sent, as the tools report them; `estimated` for NCCL), "
            "`seconds`, and `cost_cny`, what those bytes would have cost at the run's price "
            "per GB (null without one). `totals` adds `deferred_runs`: heavy probes deferred "
            "because the lease was busy."
        ),
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="probe-tax",
        url_name="probe-tax",
        filter_backends=[],
        pagination_class=None,
        query_parameters=frozenset({"period"}),
    )
    def probe_tax(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        period = s.PeriodSerializer.of(request)
        return Response(probe_tax.document(probe_tax.probe_tax_of(lease=lease, period=period)))

    @extend_schema(
        parameters=[s.PeriodSerializer],
        responses={200: OpenApiTypes.OBJECT},
        summary="A usage-billed lease's running figures for a month (per GB, 95th percentile)",
        description=(
            "The lease month so far, as the invoice would compute it now (billing.lease_month, "
            "billing.running): "
            "`amount_so_far` (the usage lines for the billed window up to now), "
            "`projected_amount` (the month at the rate so far; the invoice's figure once the "
            "month is over), `elapsed_share`, and per terms version `quantity` (GB, or the "
            "95th so far in Mbit/s), `unit_price`, `amount`, `p95_bps`, `samples` and "
            "`samples_above_the_95th` (the top 5 % that 95计费 leaves out). `usage` is null for "
            "a lease its terms do not bill by usage that month."
        ),
    )
    @action(
        detail=True,
        methods=["get"],
        filter_backends=[],
        pagination_class=None,
        query_parameters=frozenset({"period"}),
    )
    def usage(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()
        period = s.PeriodSerializer.of(request)
        month = lease_month(lease, period, instant=timezone.now(), usage=True).usage
        return Response(running.document(lease=lease, month=month, period=period))


class TermsAmendmentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Retroactive terms amendments: proposed by provider staff, pending until a tenant
    admin of the lease's tenant acknowledges them; then they are the lease's next terms
    version, in force from their date and linked into its hash chain."""

    queryset = selectors.amendments_for_provider()
    serializer_class = s.TermsAmendmentSerializer
    # Acknowledging is the tenant admin's: the service refuses it to provider staff.
    staff_permissions = {
        "create": "leases.add_termsamendment",
        "acknowledge": SERVICE_DECIDES,
        "signing_content": SERVICE_DECIDES,
    }

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return queryset.select_related("lease", "proposed_by", "terms").order_by(
            "-created_at", "-id"
        )

    def _answer(self, amendment: TermsAmendment, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.optimize(selectors.amendments_for_provider().filter(pk=amendment.pk)).get()
        return Response(s.TermsAmendmentSerializer(fresh).data, status=code)

    @extend_schema(
        request=s.TermsAmendmentProposeSerializer,
        responses={201: s.TermsAmendmentSerializer},
        summary="Propose an amendment that takes effect in the past (provider staff)",
    )
    def create(self, request: Request) -> Response:
        body = s.TermsAmendmentProposeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        lease = selectors.leases_visible_to(request.user).filter(pk=data["lease"]).first()
        if lease is None:
            raise serializers.ValidationError({"lease": [_("No such object.")]})
        amendment = lease_services.propose_retroactive_amendment(
            lease=lease,
            effective_from=data["effective_from"],
            changes=data["changes"],
            reason=data["reason"],
            actor=request.user,
        )
        return self._answer(amendment, status.HTTP_201_CREATED)

    @extend_schema(
        request=s.AcknowledgeSerializer,
        responses={200: s.TermsAmendmentSerializer},
        summary="Acknowledge a retroactive amendment (tenant admin of the lease's tenant)",
    )
    @action(detail=True, methods=["post"], write_roles=frozenset({Role.ADMIN}))
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        """The amendment becomes the lease's next terms version, recording who
        acknowledged it, when and why."""
        amendment = self.get_object()
        body = s.AcknowledgeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        lease_services.acknowledge_amendment(
            amendment=amendment,
            user=request.user,
            reason=body.validated_data["reason"],
            **signed_fields(body.validated_data),
        )
        return self._answer(amendment)

    @extend_schema(
        request=s.AcknowledgeContentSerializer,
        responses={200: SigningContentSerializer},
        summary="The content a tenant admin signs to acknowledge this amendment",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="signing-content",
        write_roles=frozenset({Role.ADMIN}),
    )
    def signing_content(self, request: Request, pk: str | None = None) -> Response:
        amendment = self.get_object()
        body = s.AcknowledgeContentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tenant = amendment.lease.tenant
        require_tenant_admin(
            request.user,
            tenant,
            _("Only a tenant admin of %(tenant)s can acknowledge an amendment of its lease.")
            % {"tenant": tenant.name},
        )
        return signing_answer(
            lease_services.acknowledgement_content(
                amendment=amendment,
                user=request.user,
                reason=body.validated_data["reason"],
                at=timezone.now(),
            )
        )


class PlainTextRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if isinstance(data, bytes | str):
            return data.encode() if isinstance(data, str) else data
        return JSONRenderer().render(data)


class BinaryRenderer(BaseRenderer):
    """Lets a client ask for a download by its media type; the view answers the bytes."""

    charset = None
    render_style = "binary"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return data if isinstance(data, bytes) else JSONRenderer().render(data)


class PdfRenderer(BinaryRenderer):
    media_type = "application/pdf"
    format = "pdf"


class XlsxRenderer(BinaryRenderer):
    media_type = xlsx.CONTENT_TYPE
    format = "xlsx"


DOCUMENT_RENDERERS: dict[str, type[BinaryRenderer]] = {"pdf": PdfRenderer, "xlsx": XlsxRenderer}


EINVOICE_DESCRIPTION = (
    "What a provider's invoicing system needs to issue the 数电票 (not a submission to the "
    "tax platform): billing/documents/schemas/einvoice-v1.json. 400 with the reason when "
    "the invoice is not issued, a party's tax ID is not a valid 统一社会信用代码, a 专票 "
    "lacks a party's address, phone, bank or account, or a line's kind has no tax code."
)


def einvoice_response(build: Any) -> Response:
    """The payload ``build()`` returns, or 400 with the reason it was refused."""
    try:
        return Response(build())
    except einvoice.EInvoiceRefused as refused:
        raise ValidationError(str(refused)) from None


class ProbeRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Probe runs, newest slot first, with cursor pagination."""

    queryset = run_selectors.runs_for_provider()
    serializer_class = s.ProbeRunSerializer
    filterset_class = filtersets.ProbeRunFilterSet
    pagination_class = SlotCursorPagination

    def optimize(self, queryset: QuerySet) -> QuerySet:
        if self.action == "list":
            return queryset  # list() reads plain rows
        return queryset.select_related("lease", "terms").prefetch_related(
            Prefetch("nodes", queryset=selectors.nodes_for_provider().only("id", "hostname"))
        )

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return s.ProbeRunDetailSerializer if self.action == "retrieve" else s.ProbeRunSerializer

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Plain rows, not model instances: the list is the API's busiest read."""
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(s.ProbeRunSerializer.row_queryset(queryset))
        return self.get_paginated_response(
            s.ProbeRunSerializer.represent_rows(list(page or []), request)
        )

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        # Errors are JSON like everywhere else, even on the text/plain download.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response

    @extend_schema(
        responses={
            (200, "text/plain"): OpenApiResponse(
                OpenApiTypes.STR,
                description="What the tool printed; X-Content-SHA256 is the hex SHA-256 of "
                "these bytes.",
            )
        },
        summary="Download the raw output of a run",
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, PlainTextRenderer],
        filter_backends=[],
        pagination_class=None,
    )
    def raw(self, request: Request, pk: str | None = None) -> HttpResponse:
        run = self.get_object()
        body = run.raw_output.encode()
        response = attachment(body, "text/plain; charset=utf-8", f"probe-run-{run.pk}.txt")
        response["X-Content-SHA256"] = hashlib.sha256(body).hexdigest()
        return response


class IncidentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Incidents, with their time to repair. Provider staff state that they acknowledged a
    network fault or mitigated it (incidents.repair); the fault and the resolution come from
    evidence and cannot be written."""

    queryset = incident_selectors.incidents_for_provider()
    serializer_class = s.IncidentSerializer
    filterset_class = filtersets.IncidentFilterSet
    staff_permissions = {
        "acknowledge": "incidents.acknowledge_incident",
        "mitigate": "incidents.mitigate_incident",
    }

    def _statement(self, request: Request, service: Any) -> Response:
        incident = self.get_object()
        body = s.RepairStatementSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        try:
            service(
                incident_id=incident.pk, user=request.user, note=body.validated_data.get("note", "")
            )
        except repair.RepairError as refused:
            raise Conflict(" ".join(refused.messages)) from None
        return Response(s.IncidentSerializer(self.get_queryset().get(pk=incident.pk)).data)

    @extend_schema(
        request=s.RepairStatementSerializer,
        responses={200: s.IncidentSerializer},
        summary="Acknowledge an open network fault (provider staff)",
        description="409 when the incident is resolved, already acknowledged, or not a fault.",
    )
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        return self._statement(request, repair.acknowledge)

    @extend_schema(
        request=s.RepairStatementSerializer,
        responses={200: s.IncidentSerializer},
        summary="State that an open network fault is mitigated (provider staff)",
        description=(
            "Acknowledges it too if nobody had. 409 when the incident is resolved, already "
            "mitigated, or not a fault."
        ),
    )
    @action(detail=True, methods=["post"])
    def mitigate(self, request: Request, pk: str | None = None) -> Response:
        return self._statement(request, repair.mitigate)

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return (
            queryset.select_related("lease", "terms")
            .prefetch_related(
                Prefetch("runs", queryset=run_selectors.runs_for_provider().only("id", "slot_at"))
            )
            .order_by("-opened_at", "-id")
        )


class InvoiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Invoices with their lines. Issuing, voiding and credit notes are provider staff's
    (billing.services); a tenant reads its own."""

    queryset = billing_selectors.invoices_for_provider()
    serializer_class = s.InvoiceSerializer
    filterset_class = filtersets.InvoiceFilterSet
    staff_permissions = {
        "issue": "billing.issue_invoice",
        "mark_paid": "billing.mark_invoice_paid",
        "void": "billing.void_invoice",
        "credit_notes": "billing.issue_credit_note",
    }

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return billing_selectors.with_invoice_detail(invoices=queryset).order_by(
            "-period", "tenant__name", "id"
        )

    def _answer(self, invoice: Invoice, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=invoice.pk)
        return Response(s.InvoiceSerializer(fresh).data, status=code)

    @staticmethod
    def _lifecycle(call: Any) -> Any:
        try:
            return call()
        except billing_services.LifecycleError as refused:
            raise Conflict(" ".join(refused.messages)) from None

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        if self.action in DOCUMENT_RENDERERS:  # errors are JSON, even on a download
            self.request.accepted_renderer = JSONRenderer()
            self.request.accepted_media_type = JSONRenderer.media_type
        return response

    def _document(self, extension: str, render: Any) -> HttpResponse:
        invoice = self.get_object()
        with translation.override(document_language(translation.get_language())):
            document = invoice_document(invoice)
            body = render(document)
        media_type = DOCUMENT_RENDERERS[extension].media_type
        return attachment(body, media_type, document.filename(extension))

    @extend_schema(
        responses={(200, "application/pdf"): OpenApiTypes.BINARY},
        summary="The invoice as a PDF, in the request's language (DRAFT watermark on drafts)",
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, DOCUMENT_RENDERERS["pdf"]],
        filter_backends=[],
        pagination_class=None,
    )
    def pdf(self, request: Request, pk: str | None = None) -> HttpResponse:
        return self._document("pdf", invoice_pdf.render)

    @extend_schema(
        responses={(200, xlsx.CONTENT_TYPE): OpenApiTypes.BINARY},
        summary="The invoice as an XLSX with the fields of a 增值税发票 (VAT invoice) request",
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, DOCUMENT_RENDERERS["xlsx"]],
        filter_backends=[],
        pagination_class=None,
    )
    def xlsx(self, request: Request, pk: str | None = None) -> HttpResponse:
        return self._document("xlsx", xlsx.render)

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="The invoice as a 数电票 request payload (JSON, schema einvoice-v1)",
        description=EINVOICE_DESCRIPTION,
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def einvoice(self, request: Request, pk: str | None = None) -> Response:
        return einvoice_response(lambda: einvoice.invoice_payload(self.get_object()))

    @extend_schema(
        request=s.IssueSerializer,
        responses={200: s.InvoiceSerializer},
        summary="Issue a draft: number, issue and due dates, identities (provider staff)",
        description=(
            "The draft is recomputed, then issued. 409 when it is not a draft, its month has "
            "not ended, or runs of its month are unfinished or not ingested (unless "
            "`force` with a `reason`, both recorded)."
        ),
    )
    @action(detail=True, methods=["post"])
    def issue(self, request: Request, pk: str | None = None) -> Response:
        invoice = self.get_object()
        body = s.IssueSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        issued = self._lifecycle(
            lambda: billing_services.issue_invoice(
                invoice=invoice,
                force=body.validated_data["force"],
                reason=body.validated_data.get("reason"),
                actor=request.user,
            )
        )
        return self._answer(issued)

    @extend_schema(
        request=s.MarkPaidSerializer,
        responses={200: s.InvoiceSerializer},
        summary="Mark an issued invoice paid (provider staff)",
        description=(
            "`paid_on`: the day the payment arrived, in the tenant's zone; today there when "
            "omitted. 400 when it is before the issue date or in the future; 409 when the "
            "invoice is not issued (a draft, already paid, or void)."
        ),
    )
    @action(detail=True, methods=["post"], url_path="mark-paid", url_name="mark-paid")
    def mark_paid(self, request: Request, pk: str | None = None) -> Response:
        invoice = self.get_object()
        body = s.MarkPaidSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        paid = self._lifecycle(
            lambda: billing_services.mark_paid(
                invoice=invoice, paid_on=body.validated_data.get("paid_on"), actor=request.user
            )
        )
        return self._answer(paid)

    @extend_schema(
        request=s.ReasonSerializer,
        responses={200: s.InvoiceSerializer},
        summary="Void an issued, unpaid invoice; it keeps its number (provider staff)",
    )
    @action(detail=True, methods=["post"])
    def void(self, request: Request, pk: str | None = None) -> Response:
        invoice = self.get_object()
        body = s.ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        voided = self._lifecycle(
            lambda: billing_services.void_invoice(
                invoice=invoice, reason=body.validated_data["reason"], actor=request.user
            )
        )
        return self._answer(voided)

    @extend_schema(
        request=s.CreditNoteCreateSerializer,
        responses={201: s.CreditNoteSerializer},
        summary="Issue a credit note (红字) on an issued invoice (provider staff)",
        description=(
            "`lines`: corrections of the invoice's lines by position, each the amount to "
            "take off the line (at most what earlier credit notes left of it); without "
            "`lines`, the full reversal of what is left."
        ),
    )
    @action(detail=True, methods=["post"], url_path="credit-notes", url_name="credit-notes")
    def credit_notes(self, request: Request, pk: str | None = None) -> Response:
        invoice = self.get_object()
        body = s.CreditNoteCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        asked = body.validated_data.get("lines")
        note = self._lifecycle(
            lambda: billing_services.create_credit_note(
                invoice=invoice,
                reason=body.validated_data["reason"],
                kind=body.validated_data["kind"],
                corrections=None if asked is None else billing_services.corrections_from(asked),
                actor=request.user,
            )
        )
        note = billing_selectors.with_credit_note_lines(
            notes=billing_selectors.credit_notes_for_provider().filter(pk=note.pk)
        ).get()
        return Response(s.CreditNoteSerializer(note).data, status=status.HTTP_201_CREATED)


class CreditNoteViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Credit notes (红字发票), each referencing the invoice it corrects; read-only here,
    made through ``POST /invoices/{id}/credit-notes/``."""

    queryset = billing_selectors.credit_notes_for_provider()
    serializer_class = s.CreditNoteSerializer
    filterset_class = filtersets.CreditNoteFilterSet

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return billing_selectors.with_credit_note_lines(notes=queryset).order_by(
            "-issued_at", "-id"
        )

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="The credit note as a 红字 数电票 request payload (JSON, schema einvoice-v1)",
        description=EINVOICE_DESCRIPTION,
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def einvoice(self, request: Request, pk: str | None = None) -> Response:
        return einvoice_response(lambda: einvoice.credit_note_payload(self.get_object()))


class VoucherViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Vouchers (代金券): SLA credits given as vouchers where the terms say so, each with
    its ledger (redemptions, what is left, its state). Read-only: issuing an invoice issues
    and applies them (billing.vouchers)."""

    queryset = billing_selectors.vouchers_for_provider()
    serializer_class = s.VoucherSerializer
    filterset_class = filtersets.VoucherFilterSet

    def optimize(self, queryset: QuerySet) -> QuerySet:
        from billing.vouchers import with_ledger

        return with_ledger(queryset.select_related("tenant")).order_by("-issued_at", "-id")


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """API tokens: your own, and as a tenant admin every token of your tenant (whoever
    holds or issued it). A new token is shown once, in the answer to its creation."""

    queryset = token_selectors.tokens_for_provider()
    serializer_class = s.ApiTokenSerializer
    filterset_class = filtersets.ApiTokenFilterSet
    read_roles = ALL_ROLES | {"owner"}
    write_roles = frozenset({Role.ADMIN})
    # One's own tokens are one's own; another user's need accounts.issue_any_token or
    # accounts.revoke_any_token (accounts.services decides, with the holder in hand).
    staff_permissions = {"create": SERVICE_DECIDES, "revoke": SERVICE_DECIDES}

    def optimize(self, queryset: QuerySet) -> QuerySet:
        return queryset.select_related("user", "issuer", "tenant").order_by("-created_at", "-id")

    def roles_for_object(self, request: Request, token: ApiToken) -> set[str]:
        held = {"owner"} if token.user_id == request.user.pk else set()
        administered = administered_tenants(request.user)
        if token.tenant_id is not None and administered.filter(tenant=token.tenant_id).exists():
            held.add(Role.ADMIN)
        return held

    @extend_schema(
        request=s.ApiTokenCreateSerializer,
        responses={201: s.IssuedTokenSerializer},
        summary="Issue a token; the whole token is in this answer only",
    )
    def create(self, request: Request) -> Response:
        body = s.ApiTokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        holder = self._holder(request, data.get("user"))
        issued = tokens.issue_token(
            user=holder,
            scopes=data["scopes"],
            name=data["name"],
            expires_at=data["expires_at"],
            issuer=request.user,
            issuer_token=request.auth if isinstance(request.auth, ApiToken) else None,
            tenant=self._tenant(request, data.get("tenant")),
        )
        answer = s.IssuedTokenSerializer(issued.token).data
        answer["token"] = issued.secret
        return Response(answer, status=status.HTTP_201_CREATED)

    def _tenant(self, request: Request, slug: str | None) -> Tenant | None:
        if not slug:
            return None
        tenant = selectors.tenants_visible_to(request.user).filter(slug=slug).first()
        if tenant is None:
            raise serializers.ValidationError(
                {"tenant": [_("No tenant %(slug)s among yours.") % {"slug": slug}]}
            )
        return tenant

    def _holder(self, request: Request, username: str | None) -> Any:
        if not username or username == request.user.get_username():
            return request.user
        holder = managed_users(request.user).filter(username=username).first()
        if holder is None:
            raise serializers.ValidationError(
                {
                    "user": [
                        _("No user %(name)s among the members whose tokens you manage.")
                        % {"name": username}
                    ]
                }
            )
        return holder

    @extend_schema(request=None, responses={200: s.ApiTokenSerializer})
    @action(detail=True, methods=["post"], write_roles=frozenset({Role.ADMIN, "owner"}))
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Revoke a token at once; requests with it then answer 401."""
        token = self.get_object()
        refuse_body(request)
        token = tokens.revoke_token(token=token, actor=request.user)
        return Response(s.ApiTokenSerializer(token).data)
