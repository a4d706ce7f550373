from django.db import models
from django.utils.translation import gettext_lazy as _

from leases.models import Lease


class ExternalAlert(models.Model):
    """An alert the provider's Alertmanager sent (webhook payload version 4), one row per
    occurrence, (fingerprint, startsAt): the evidence behind the incidents it opened on the
    leases it touched. The fingerprint hashes the labels, so every outage of one port
    shares it; Alertmanager gives an alert that fires again after it resolved a new
    startsAt. A provider record (no tenant_path): tenants see its incidents, whose rule
    names the alert, never the raw labels."""

    class Status(models.TextChoices):
        FIRING = "firing", _("firing")
        RESOLVED = "resolved", _("resolved")

    fingerprint = models.CharField(_("fingerprint"), max_length=64)
    alertname = models.CharField(_("alert name"), max_length=255)
    status = models.CharField(_("status"), max_length=8, choices=Status.choices)
    severity = models.CharField(_("severity"), max_length=32, blank=True)
    labels = models.JSONField(_("labels"), default=dict)
    annotations = models.JSONField(_("annotations"), default=dict)
    starts_at = models.DateTimeField(_("starts at"))
    ends_at = models.DateTimeField(_("ends at"), null=True, blank=True)
    generator_url = models.CharField(_("generator URL"), max_length=2000, blank=True)
    subject = models.CharField(
        _("affected node or switch"), max_length=255, blank=True, help_text=_("From the labels.")
    )
    leases = models.ManyToManyField(
        Lease, related_name="external_alerts", blank=True, verbose_name=_("affected leases")
    )
    incidents = models.ManyToManyField(
        "incidents.Incident",
        related_name="external_alerts",
        blank=True,
        verbose_name=_("incidents"),
    )
    received_at = models.DateTimeField(_("first received at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("last received at"), auto_now=True)

    class Meta:
        verbose_name = _("external alert")
        verbose_name_plural = _("external alerts")
        ordering = ["-starts_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["fingerprint", "starts_at"], name="one_alert_per_occurrence"
            )
        ]

    def __str__(self) -> str:
        return f"{self.alertname} {self.subject} ({self.status})"
