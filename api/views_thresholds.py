"""The tenant's usage and spend thresholds under /api/v1/thresholds/ (the rules and the
writes: ``billing.thresholds``; docs/billing/thresholds.md).

Every member of the tenant reads them with the crossings recorded so far; only a tenant
admin creates, changes (value, enabled) and deletes them. Provider staff read them and pass
the route, and the service refuses their writes: a threshold is the tenant's own
statement, like its contacts."""

from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.choices import Role
from api.base import BaseViewSet, StrictSerializer
from api.permissions import SERVICE_DECIDES
from billing import selectors as billing_selectors
from billing import thresholds
from billing.choices import ThresholdKind
from billing.models import Threshold, ThresholdCrossing
from leases import selectors as lease_selectors
from leases.models import Lease, Tenant

ADMINS = frozenset({Role.ADMIN})


class CrossingSerializer(serializers.ModelSerializer):
    class Meta:
        model = ThresholdCrossing
        fields = [
            "period",
            "value",
            "figure",
            "sample_at",
            "crossed_at",
            "emailed_at",
            "webhook_sent_at",
        ]
        read_only_fields = fields


class ThresholdSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    lease_reference = serializers.CharField(source="lease.reference", default=None)
    unit = serializers.SerializerMethodField()
    crossings = CrossingSerializer(many=True, read_only=True)

    class Meta:
        model = Threshold
        fields = [
            "id",
            "tenant",
            "lease",
            "lease_reference",
            "kind",
            "value",
            "unit",
            "enabled",
            "created_at",
            "updated_at",
            "crossings",
        ]
        read_only_fields = fields

    def get_unit(self, threshold: Threshold) -> str:
        return thresholds.UNITS[ThresholdKind(threshold.kind)]


class ThresholdCreateSerializer(StrictSerializer):
    tenant = serializers.SlugField(help_text="The tenant's slug.")
    lease = serializers.IntegerField(
        min_value=1,
        max_value=2**63 - 1,
        required=False,
        allow_null=True,
        help_text="One lease of the tenant; null or absent: all its leases together.",
    )
    kind = serializers.ChoiceField(choices=ThresholdKind.choices)
    value = serializers.DecimalField(
        max_digits=14, decimal_places=2, help_text="CNY, GB or Mbit/s by kind; above 0."
    )
    enabled = serializers.BooleanField(default=True)


class ThresholdChangeSerializer(StrictSerializer):
    value = serializers.DecimalField(max_digits=14, decimal_places=2, required=False)
    enabled = serializers.BooleanField(required=False)


def _tenant(request: Request, slug: str) -> Tenant:
    tenant = lease_selectors.tenants_visible_to(request.user).filter(slug=slug).first()
    if tenant is None:
        raise serializers.ValidationError({"tenant": [_("No such object.")]})
    return tenant


def _lease(request: Request, tenant: Tenant, pk: int | None) -> Lease | None:
    if pk is None:
        return None
    lease = lease_selectors.leases_visible_to(request.user).filter(pk=pk, tenant=tenant).first()
    if lease is None:
        raise serializers.ValidationError({"lease": [_("No such object.")]})
    return lease


class ThresholdViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, BaseViewSet
):
    """Usage and spend thresholds: the first sample of a month that takes a figure to its
    value sends a signed webhook (event ``threshold.crossed``) and an e-mail, once."""

    queryset = billing_selectors.thresholds_for_provider()
    serializer_class = ThresholdSerializer
    write_roles = ADMINS
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    # The tenant's own statements: the service refuses provider staff.
    staff_permissions = {
        "create": SERVICE_DECIDES,
        "partial_update": SERVICE_DECIDES,
        "destroy": SERVICE_DECIDES,
    }

    def optimize(self, queryset: Any) -> Any:
        return queryset.select_related("tenant", "lease").prefetch_related("crossings")

    @extend_schema(
        request=ThresholdCreateSerializer,
        responses={201: ThresholdSerializer},
        summary="Set a threshold (tenant admin)",
    )
    def create(self, request: Request) -> Response:
        body = ThresholdCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = _tenant(request, data["tenant"])
        threshold = thresholds.create_threshold(
            tenant=tenant,
            user=request.user,
            kind=data["kind"],
            value=data["value"],
            lease=_lease(request, tenant, data.get("lease")),
            enabled=data["enabled"],
        )
        return Response(ThresholdSerializer(threshold).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=ThresholdChangeSerializer,
        responses={200: ThresholdSerializer},
        summary="Change a threshold's value or switch it on or off (tenant admin)",
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        threshold = self.get_object()
        body = ThresholdChangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        threshold = thresholds.change_threshold(
            threshold=threshold, user=request.user, **body.validated_data
        )
        return Response(ThresholdSerializer(self.get_object()).data)

    @extend_schema(summary="Delete a threshold and its crossings (tenant admin)")
    def destroy(self, request: Request, pk: str | None = None) -> Response:
        thresholds.delete_threshold(threshold=self.get_object(), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
