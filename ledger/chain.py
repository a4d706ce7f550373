"""The hash chain of a lease, as stored: appending links of every kind (one index sequence
for all of them) and reading them back. The rules (hashing, canonical JSON, checking a
chain) live in ``gpulease_verify.chain`` and ``gpulease_verify.canonical``, which an
auditor installs alone; what each kind's hash covers lives with the app that owns its rows
(``ledger.kinds``).

Appending: ``appending(lease_ids)`` opens a transaction and locks the leases' rows in key
order, the lock order that makes appenders of one chain take turns; inside it,
``Appender.link`` gives each new row the next index of its lease's chain, the previous
link's hash and its own hash. The app then saves the rows its own way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import models, transaction
from django.db.models import OuterRef, Subquery

from common.locks import lock_in_key_order
from gpulease_verify.chain import GENESIS, Link, link_hash, verify_chain
from ledger.kinds import kind_of, kinds, lease_model

Row = TypeVar("Row", bound=models.Model)


class Appender:
    """The chains of some leases, locked for appending (``appending``). The heads are read
    at the first ``link``, under the lock."""

    def __init__(self, lease_ids: Sequence[int]) -> None:
        self.lease_ids = list(lease_ids)
        self._heads: dict[int, tuple[int, str]] | None = None

    def head(self, lease_id: int) -> tuple[int, str]:
        if self._heads is None:
            self._heads = chain_heads(self.lease_ids)
        if lease_id not in self.lease_ids:
            raise ValueError(f"lease {lease_id} is not locked for appending")
        return self._heads.get(lease_id, (0, GENESIS))

    def link(self, row: Row, content: dict[str, Any] | None = None) -> Row:
        """Make ``row`` (a row of a registered kind, not yet linked) the next link of its
        lease's chain: its ``chain_index``, ``prev_hash`` and hash set, over ``content``
        (else its kind's content of the row, read once the index is set). Not saved."""
        kind = kind_of(type(row))
        lease_id = row.lease_id  # type: ignore[attr-defined]
        index, prev = self.head(lease_id)
        row.chain_index, row.prev_hash = index + 1, prev  # type: ignore[attr-defined]
        digest = link_hash(kind.content(row) if content is None else content, prev)
        setattr(row, kind.hash_field, digest)
        assert self._heads is not None
        self._heads[lease_id] = (index + 1, digest)
        return row

    def link_all(self, rows: Iterable[Row]) -> list[Row]:
        return [self.link(row) for row in rows]


@contextmanager
def appending(lease_ids: Iterable[int]) -> Iterator[Appender]:
    """A transaction holding the chains of ``lease_ids`` for appending: their lease rows
    locked in key order (``common.locks``), so one appender of a chain at a time, each
    reading the head the one before it committed. A caller that holds a lease's lock
    already may take it again."""
    ids = sorted(set(lease_ids))
    with transaction.atomic():
        lock_in_key_order(lease_model()._default_manager.filter(pk__in=ids))
        yield Appender(ids)


def chain_head(*, lease_id: int) -> tuple[int, str]:
    """(index, hash) of the lease's last link of any kind; (0, GENESIS) for an empty chain.
    Appending reads it under the lock (``appending``)."""
    return chain_heads([lease_id]).get(lease_id, (0, GENESIS))


def chain_heads(lease_ids: Sequence[int]) -> dict[int, tuple[int, str]]:
    """``chain_head`` of many leases in one query: per lease, its last link of each kind
    as two subqueries, the highest of them."""
    every = kinds()
    annotations: dict[str, Any] = {}
    for number, kind in enumerate(every):
        last = kind.model._default_manager.filter(
            lease_id=OuterRef("pk"), chain_index__isnull=False
        ).order_by("-chain_index")
        annotations[f"index_{number}"] = Subquery(last.values("chain_index")[:1])
        annotations[f"hash_{number}"] = Subquery(last.values(kind.hash_field)[:1])
    heads = {}
    rows = lease_model()._default_manager.filter(pk__in=lease_ids).annotate(**annotations)
    for row in rows.values("pk", *annotations):
        found = [
            (row[f"index_{n}"], row[f"hash_{n}"])
            for n in range(len(every))
            if row[f"index_{n}"] is not None
        ]
        heads[row["pk"]] = max(found) if found else (0, GENESIS)
    return heads


def stored_links(*, lease_id: int, first: int | None = None, last: int | None = None) -> list[Link]:
    """The lease's links as stored, of every kind (from index ``first`` to ``last``, both
    included, when given), each with its content recomputed from its row as it is now (so
    a row changed after linking shows up in ``verify_chain``); in index order."""
    links: list[Link] = []
    for kind in kinds():
        rows = kind.model._default_manager.filter(lease_id=lease_id, chain_index__isnull=False)
        if first is not None:
            rows = rows.filter(chain_index__gte=first)
        if last is not None:
            rows = rows.filter(chain_index__lte=last)
        links += kind.links(rows)
    return sorted(links, key=lambda link: link.index)


def verify_lease(*, lease_id: int) -> list[str]:
    """Every problem of the lease's whole chain as stored now; empty when it holds."""
    return verify_chain(stored_links(lease_id=lease_id))
