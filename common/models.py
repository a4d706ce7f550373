from django.db import models
from django.utils.translation import gettext_lazy as _


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        abstract = True


class Heartbeat(models.Model):
    """The last beat of a periodic signal: beat's heartbeat task (``common.beat_heartbeat``)
    writes the ``beat`` row every minute (shown in the admin: when beat's work last ran
    through a worker)."""

    BEAT = "beat"

    name = models.CharField(_("name"), max_length=32, unique=True)
    at = models.DateTimeField(_("at"))

    class Meta:
        verbose_name = _("heartbeat")
        verbose_name_plural = _("heartbeats")

    def __str__(self) -> str:
        return f"{self.name} at {self.at}"


class PartitionArchive(models.Model):
    """One UTC month of the partitioned tables, exported to a compressed archive file and
    detached (``common.archives``); restoring it re-attaches the month and stamps
    ``restored_at``. The row stays either way: an archive is never forgotten."""

    month = models.CharField(_("month (UTC)"), max_length=7)
    path = models.CharField(_("archive file"), max_length=1024)
    sha256 = models.CharField(_("file SHA-256"), max_length=64)
    size_bytes = models.BigIntegerField(_("file size (bytes)"))
    rows = models.JSONField(_("rows per table"), default=dict)
    archived_at = models.DateTimeField(_("archived at"))
    seconds = models.FloatField(_("export and detach time (s)"), default=0)
    restored_at = models.DateTimeField(_("restored at"), null=True, blank=True)

    class Meta:
        verbose_name = _("partition archive")
        verbose_name_plural = _("partition archives")
        ordering = ["-month", "-archived_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["month"],
                condition=models.Q(restored_at__isnull=True),
                name="one_live_archive_per_month",
            )
        ]

    def __str__(self) -> str:
        return f"{self.month} → {self.path}"


class BeatLock(models.Model):
    """Which beat schedules (``common.beat_lock``): one row, held by one beat process,
    renewed at each of its ticks, and free to take once ``expires_at`` has passed."""

    name = models.CharField(_("name"), max_length=32, unique=True)
    holder = models.CharField(_("holder (host:pid:id)"), max_length=255)
    acquired_at = models.DateTimeField(_("held since"))
    expires_at = models.DateTimeField(_("lease expires at"))

    class Meta:
        verbose_name = _("beat lock")
        verbose_name_plural = _("beat locks")

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder} until {self.expires_at}"
