from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from common.querysets import TenantScopedQuerySet
from gpulease_verify.canonical import iso_utc
from gpulease_verify.checkpoints import payload
from gpulease_verify.keys import ALGORITHM
from leases.models import Lease


class ChainCheckpoint(models.Model):
    """The signed head of a lease's hash chain at a period's close: the last link of a run
    whose slot lies in the period or earlier. The tenant keeps it; a later bundle whose
    chain no longer holds that link with that hash was rewritten (``gpulease_verify
    .checkpoints``). One per lease and period, never changed."""

    lease = models.ForeignKey(
        Lease, on_delete=models.PROTECT, related_name="checkpoints", verbose_name=_("lease")
    )
    period = models.CharField(_("period"), max_length=7, help_text=_("YYYY-MM"))
    head_index = models.PositiveIntegerField(_("head link"), help_text=_("0: no link yet"))
    head_hash = models.CharField(_("head hash"), max_length=64)
    links = models.PositiveIntegerField(_("links up to the head"))
    period_links = models.PositiveIntegerField(_("run links of the period up to the head"))
    signed_at = models.DateTimeField(_("signed at"))
    key_fingerprint = models.CharField(_("key fingerprint"), max_length=71)
    public_key = models.CharField(_("public key (base64)"), max_length=64)
    signature = models.CharField(_("signature (base64)"), max_length=128)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("chain checkpoint")
        verbose_name_plural = _("chain checkpoints")
        ordering = ["lease", "period"]
        constraints = [
            models.UniqueConstraint(fields=["lease", "period"], name="one_checkpoint_per_period")
        ]

    def __str__(self) -> str:
        return f"{self.lease} {self.period} @ {self.head_index}"

    def payload(self) -> dict[str, Any]:
        """What the signature covers (``gpulease_verify.checkpoints.payload``)."""
        return payload(
            lease=self.lease.reference,
            period=self.period,
            head_index=self.head_index,
            head_hash=self.head_hash,
            period_links=self.period_links,
            signed_at=iso_utc(self.signed_at) or "",
            key=self.key_fingerprint,
        )

    def document(self) -> dict[str, Any]:
        """The signed checkpoint document as published and carried in bundles."""
        return {
            "checkpoint": self.payload(),
            "signature": self.signature,
            "key_id": self.key_fingerprint,
            "public_key": self.public_key,
            "algorithm": ALGORITHM,
        }
