"""The kinds of link a lease's hash chain holds, each registered by the app that owns its
rows, from ``AppConfig.ready()``. The ledger keeps no rows of its own: every link stays in
its app's table, with ``lease_id``, ``chain_index``, ``prev_hash`` and a hash column.

- ``leases.apps``: the lease table (whose row is the lock of its chain), terms versions
  (``terms``) and tenant records (``tenant``: key registrations and revocations,
  co-signed acknowledgements, acceptance sign-offs and disputes).
- ``benchmarks.apps``: probe runs (``run``) and rejudgements (``rejudgement``).
- ``telemetry.apps``: telemetry batches (``telemetry``).

The ledger names the kinds it expects (``KIND_NAMES``), so a chain is never read or
appended to with one of them missing: its head would be wrong and the next link would fork
the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import models

from gpulease_verify.chain import Link

# Every kind of link, in the order ``ledger.chain.stored_links`` lists links that share an index
# (a chain edited in the database): the order the problems of such a chain are told in.
KIND_NAMES = ("run", "terms", "rejudgement", "telemetry", "tenant")


@dataclass(frozen=True)
class Kind:
    """A kind of link. ``model``'s rows are its links (those with a ``chain_index``);
    ``hash_field`` the column with each one's link hash. ``content(row)`` is what a row's
    hash covers, from the row as it is now (its ``chain_index`` set); ``links(rows)`` the
    given rows (a lease's linked rows of this kind, of an index range) as ``Link`` s, each
    with its content recomputed from the row."""

    name: str
    model: type[models.Model]
    hash_field: str
    content: Callable[[Any], dict[str, Any]]
    links: Callable[[models.QuerySet[Any]], Iterable[Link]]


_kinds: dict[str, Kind] = {}
_leases: list[type[models.Model]] = []


def register(kind: Kind) -> None:
    """Add a kind of link (from its app's ``AppConfig.ready()``)."""
    if kind.name not in KIND_NAMES:
        raise ImproperlyConfigured(f"{kind.name!r} is not a kind of chain link {KIND_NAMES}")
    _kinds[kind.name] = kind


def register_leases(model: type[models.Model]) -> None:
    """The model with one chain per row, whose row is that chain's lock (the lease)."""
    _leases[:] = [model]


def kinds() -> list[Kind]:
    """Every kind of link, in ``KIND_NAMES`` order."""
    missing = [name for name in KIND_NAMES if name not in _kinds]
    if missing:
        raise ImproperlyConfigured(f"No app registered the chain link kind(s) {missing}")
    return [_kinds[name] for name in KIND_NAMES]


def kind_of(model: type[models.Model]) -> Kind:
    for kind in kinds():
        if kind.model is model:
            return kind
    raise ImproperlyConfigured(f"{model.__name__} is no kind of chain link")


def lease_model() -> type[models.Model]:
    if not _leases:
        raise ImproperlyConfigured("No app registered the model whose rows own the chains")
    return _leases[0]
