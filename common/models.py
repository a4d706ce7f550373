from django.db import models
from django.utils.translation import gettext_lazy as _


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        abstract = True


class Heartbeat(models.Model):
    """The last beat of a periodic signal: beat's heartbeat task (``common.beat_heartbeat``)
    writes the ``beat`` row every minute, and ``/readyz`` reads its age."""

    BEAT = "beat"

    name = models.CharField(_("name"), max_length=32, unique=True)
    at = models.DateTimeField(_("at"))

    class Meta:
        verbose_name = _("heartbeat")
        verbose_name_plural = _("heartbeats")

    def __str__(self) -> str:
        return f"{self.name} at {self.at}"
