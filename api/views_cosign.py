"""The tenant's signing keys and the contents it signs, under /api/v1/ (the rules:
``gpulease_verify.cosign``; the writes: ``leases.cosign``).

A tenant admin registers a key in two calls: ``POST tenant-keys/signing-content/`` with the
tenant and the public key answers the registration content, which the admin signs with
the key (``gpulease-verify sign``, or WebCrypto in the portal) and sends back with
``POST tenant-keys/``. Acknowledging an amendment, opening a dispute and signing off an
acceptance run work the same way: their ``signing-content`` action answers what to sign,
the write takes ``signed_at`` (the content's ``at``) and ``signature``."""

from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.choices import Role
from accounts.selectors import require_tenant_admin
from api.base import BaseViewSet, StrictSerializer, refuse_body
from api.fields import InstantField
from api.permissions import SERVICE_DECIDES
from api.serializers import SignedSerializer
from benchmarks import acceptance
from benchmarks import selectors as run_selectors
from benchmarks.models import ProbeRun
from gpulease_verify.canonical import canonical_json
from leases import cosign
from leases import selectors as lease_selectors
from leases.models import Lease, Tenant, TenantKey, TenantLink

ADMINS = frozenset({Role.ADMIN})


class TenantKeySerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = TenantKey
        fields = [
            "id",
            "tenant",
            "public_key",
            "fingerprint",
            "label",
            "registered_at",
            "registered_by_username",
            "registration_signature",
            "revoked_at",
            "revoked_by_username",
        ]
        read_only_fields = fields


class KeyContentSerializer(StrictSerializer):
    tenant = serializers.SlugField(help_text="The tenant's slug.")
    public_key = serializers.CharField(
        max_length=400, help_text="Ed25519 public key: PEM, or base64 of its 32 bytes."
    )


class KeyRegisterSerializer(KeyContentSerializer):
    signed_at = InstantField(help_text="The signed content's `at`.")
    signature = serializers.CharField(
        max_length=100, help_text="base64 Ed25519 signature of the content by this key."
    )
    label = serializers.CharField(max_length=100, required=False, allow_blank=True)


class SigningContentSerializer(serializers.Serializer):
    content = serializers.JSONField(help_text="The JSON object to sign.")
    canonical = serializers.CharField(help_text="Its canonical JSON: the UTF-8 bytes signed.")
    signed_at = serializers.CharField(help_text="Send it back as signed_at.")


def signing_answer(content: dict[str, Any]) -> Response:
    return Response(
        {"content": content, "canonical": canonical_json(content), "signed_at": content["at"]}
    )


def signed_fields(data: dict[str, Any]) -> dict[str, Any]:
    """``signed_at`` and ``signature`` of a validated body, for a service. Without a
    signature the record's time is the server's: an unsigned ``signed_at`` would let a
    client date its own record."""
    signature = data.get("signature") or None
    if signature and data.get("signed_at") is None:
        raise serializers.ValidationError(
            {"signed_at": [_("A signature needs the signed content's time.")]}
        )
    return {"signed_at": data.get("signed_at") if signature else None, "signature": signature}


def _tenant(request: Request, slug: str) -> Tenant:
    tenant = lease_selectors.tenants_visible_to(request.user).filter(slug=slug).first()
    if tenant is None:
        raise serializers.ValidationError({"tenant": [_("No such object.")]})
    return tenant


class TenantKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Tenant signing keys (Ed25519): registered and revoked by a tenant admin, every
    registration and revocation a link of each lease's chain."""

    queryset = lease_selectors.tenant_keys_for_provider()
    serializer_class = TenantKeySerializer
    write_roles = ADMINS
    # A tenant admin's keys: the services refuse provider staff (leases.cosign).
    staff_permissions = {
        "create": SERVICE_DECIDES,
        "signing_content": SERVICE_DECIDES,
        "revoke": SERVICE_DECIDES,
    }

    def optimize(self, queryset: Any) -> Any:
        return queryset.select_related("tenant").order_by("registered_at", "id")

    @extend_schema(
        request=KeyContentSerializer,
        responses={200: SigningContentSerializer},
        summary="The registration content to sign with the new key (tenant admin)",
    )
    @action(detail=False, methods=["post"], url_path="signing-content")
    def signing_content(self, request: Request) -> Response:
        body = KeyContentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tenant = _tenant(request, body.validated_data["tenant"])
        require_tenant_admin(
            request.user,
            tenant,
            _("Only a tenant admin of %(tenant)s can register its signing keys.")
            % {"tenant": tenant.name},
        )
        content = cosign.registration_content(
            tenant=tenant,
            user=request.user,
            public_key=body.validated_data["public_key"],
            at=timezone.now(),
        )
        return signing_answer(content)

    @extend_schema(
        request=KeyRegisterSerializer,
        responses={201: TenantKeySerializer},
        summary="Register a signing key of the tenant (tenant admin)",
    )
    def create(self, request: Request) -> Response:
        body = KeyRegisterSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        key = cosign.register_key(
            tenant=_tenant(request, data["tenant"]),
            user=request.user,
            public_key=data["public_key"],
            signature=data["signature"],
            signed_at=data["signed_at"],
            label=data.get("label", ""),
        )
        return Response(TenantKeySerializer(key).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: TenantKeySerializer}, summary="Revoke a key")
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        key = self.get_object()
        refuse_body(request)
        key = cosign.revoke_key(key=key, user=request.user)
        return Response(TenantKeySerializer(key).data)


class AcceptanceSerializer(SignedSerializer):
    run = serializers.IntegerField(min_value=1, help_text="The acceptance run signed off.")


class AcceptanceContentSerializer(StrictSerializer):
    run = serializers.IntegerField(min_value=1)


class TenantLinkSerializer(serializers.ModelSerializer):
    class Meta:
        model = TenantLink
        fields = ["id", "lease", "kind", "chain_index", "prev_hash", "link_hash", "content"]
        read_only_fields = fields


def _acceptance_run(lease: Lease, user: Any, run_id: int) -> ProbeRun:
    run = (
        run_selectors.runs_visible_to(user)
        .filter(pk=run_id, lease=lease)
        .select_related("lease__tenant")
        .first()
    )
    if run is None:
        raise serializers.ValidationError({"run": [_("No such object.")]})
    return run


class AcceptanceActions:
    """The lease's acceptance sign-off (mixed into the lease view set)."""

    @extend_schema(
        request=AcceptanceContentSerializer,
        responses={200: SigningContentSerializer},
        summary="The content to sign to accept an acceptance run (tenant admin)",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="acceptance-signing-content",
        write_roles=ADMINS,
    )
    def acceptance_signing_content(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()  # type: ignore[attr-defined]
        body = AcceptanceContentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        require_tenant_admin(
            request.user,
            lease.tenant,
            _("Only a tenant admin of %(tenant)s can sign off an acceptance of lease %(lease)s.")
            % {"tenant": lease.tenant.name, "lease": lease.reference},
        )
        run = _acceptance_run(lease, request.user, body.validated_data["run"])
        return signing_answer(
            acceptance.acceptance_content(run=run, user=request.user, at=timezone.now())
        )

    @extend_schema(
        request=AcceptanceSerializer,
        responses={201: TenantLinkSerializer},
        summary="Sign off the lease's acceptance run (tenant admin)",
    )
    @action(detail=True, methods=["post"], url_path="acceptance-sign-off", write_roles=ADMINS)
    def acceptance_sign_off(self, request: Request, pk: str | None = None) -> Response:
        lease = self.get_object()  # type: ignore[attr-defined]
        body = AcceptanceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        link = acceptance.sign_off_acceptance(
            lease=lease,
            run=_acceptance_run(lease, request.user, body.validated_data["run"]),
            user=request.user,
            **signed_fields(body.validated_data),
        )
        return Response(TenantLinkSerializer(link).data, status=status.HTTP_201_CREATED)
