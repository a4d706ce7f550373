"""The tenant's signing keys and the records it co-signs, as the lease's hash chain holds
them (the rules: ``gpulease_verify.cosign``; the writes: ``leases.cosign``)."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from common.querysets import TenantScopedQuerySet
from leases.models.leases import Lease
from leases.models.tenants import Tenant


class TenantKey(models.Model):
    """An Ed25519 public key a tenant admin registered: its registration is signed by the
    key itself (``registration_signature``). Valid from ``registered_at`` until
    ``revoked_at`` (open while null). Never deleted: a revoked key still verifies what it
    signed while it was valid."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="signing_keys", verbose_name=_("tenant")
    )
    public_key = models.CharField(_("public key (base64, 32 bytes)"), max_length=64)
    fingerprint = models.CharField(_("fingerprint"), max_length=71)
    label = models.CharField(_("label"), max_length=100, blank=True)
    registered_at = models.DateTimeField(_("registered at"))
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        verbose_name=_("registered by"),
    )
    registered_by_username = models.CharField(_("registered by (username)"), max_length=150)
    registration_signature = models.CharField(_("registration signature"), max_length=100)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("revoked by"),
    )
    revoked_by_username = models.CharField(_("revoked by (username)"), max_length=150, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("tenant signing key")
        verbose_name_plural = _("tenant signing keys")
        ordering = ["registered_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "fingerprint"],
                name="tenant_key_unique_per_tenant",
                violation_error_message=_("This tenant has already registered this key."),
            )
        ]

    def __str__(self) -> str:
        return f"{self.tenant}: {self.fingerprint}"


class TenantLink(models.Model):
    """A record the tenant made, as a link of a lease's hash chain: a key registered or
    revoked, or a co-signed acknowledgement, acceptance sign-off or dispute. ``content``
    is exactly what the link's hash covers (``gpulease_verify.cosign.tenant_link_content``),
    the tenant's signed content and signature inside it."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="tenant_links", verbose_name=_("lease")
    )
    kind = models.CharField(_("kind"), max_length=24)
    content = models.JSONField(_("hashed content"))
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    chain_index = models.PositiveIntegerField(_("chain index"))
    prev_hash = models.CharField(_("previous link hash"), max_length=64)
    link_hash = models.CharField(_("link hash"), max_length=64)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("tenant record")
        verbose_name_plural = _("tenant records")
        ordering = ["lease", "chain_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["lease", "chain_index"], name="tenant_link_index_unique_per_lease"
            )
        ]

    def __str__(self) -> str:
        return f"{self.lease} #{self.chain_index} {self.kind}"
