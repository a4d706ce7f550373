"""The reads of telemetry that other apps make. Writes go through ``telemetry.services``."""

from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from telemetry.models import PortSample

# --- read by billing ---


def unavailable_samples(*, lease: Any, after: datetime, until: datetime) -> QuerySet[PortSample]:
    """The lease's undisputed port samples in (after, until] that are not up (down, or
    with down cycles), with their node, in time order."""
    return (
        PortSample.objects.filter(batch__lease=lease, at__gt=after, at__lte=until)
        .filter(Q(up=False) | Q(down_cycles__gt=0))
        .filter(disputed=False)
        .select_related("node")
        .order_by("at")
    )
