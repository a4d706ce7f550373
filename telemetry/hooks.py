"""What telemetry tells the apps above it, which register from ``AppConfig.ready()`` (so
telemetry imports none of them, and every process that loads the apps has them: web,
worker, beat, management commands).

- **Unavailable hours.** A poll that stores an unavailable interval (a port down, or a
  down-then-up cycle) names the lease's hours it touches; the availability minutes of those
  hours hear telemetry. ``billing.apps`` registers ``billing.ingest.recompute_hours``,
  which rebuilds the link rollups of those hours. It runs inside the poll's transaction,
  after the interval's rows are stored."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from leases.models import Lease

# (lease=, kind=, hours=): the kind of probe whose rollups the hours affect (ProbeKind.LINK)
HoursListener = Callable[..., Any]
_hours_listeners: list[HoursListener] = []


def on_unavailable_hours(listener: HoursListener) -> None:
    """Call ``listener`` with the hours each poll's unavailable intervals touch (once,
    however often an app is made ready)."""
    if listener not in _hours_listeners:
        _hours_listeners.append(listener)


def unavailable_hours_listeners() -> list[HoursListener]:
    return list(_hours_listeners)


def unavailable_hours(*, lease: Lease, kind: str, hours: Iterable[datetime]) -> None:
    """Tell every listener the lease's ``hours`` (UTC hour starts) an unavailable interval
    touched. Refuses when none is registered: the availability would silently not hear
    telemetry."""
    if not _hours_listeners:
        raise RuntimeError("no app listens for telemetry's unavailable hours (billing.apps)")
    hours = list(hours)
    for listener in _hours_listeners:
        listener(lease=lease, kind=kind, hours=hours)
