from django.db import models
from django.utils.translation import gettext_lazy as _


class IncidentState(models.TextChoices):
    OPEN = "open", _("open")
    CLOSED = "closed", _("closed")


class FabricIncidentKind(models.TextChoices):
    """Incidents no probe run opens: the passive telemetry's health rules, and the
    switch-side witness disagreeing with what a host reported."""

    TELEMETRY = "telemetry", _("fabric health")
    INTEGRITY = "integrity", _("measurement integrity")


class MeteringIncidentKind(models.TextChoices):
    """A node of a lease not read for longer than the reading reach
    (``gpulease_verify.traffic.READING_REACH``): its bytes over the gap are billed by time,
    and issuing an invoice of a period the gap reaches into reports it."""

    GAP = "metering_gap", _("metering gap")


# The pattern of a metering-gap incident (its target is the node).
METERING_GAP_PATTERN = "gap"


class IncidentSource(models.TextChoices):
    """What opened or closed an incident (``incidents.services``): the ingest of probe runs
    (and its metering gaps), the passive telemetry's health rules, the switch-side witness,
    the provider's Alertmanager, or a person (an operator resolving or clearing it)."""

    INGEST = "ingest", _("probe ingest")
    TELEMETRY = "telemetry", _("fabric telemetry")
    WITNESS = "witness", _("switch-side witness")
    ALERTMANAGER = "alertmanager", _("Alertmanager")
    MANUAL = "manual", _("a person")
