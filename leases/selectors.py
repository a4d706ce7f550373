"""Reads of lease data. Views and other apps read through these, never raw managers."""

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from common.querysets import is_provider_staff
from gpulease_verify.units import plain
from leases.contract_rules import MULTI_NODE_FLOOR_GBPS
from leases.models import Fabric, Lease, LeaseTerms, Node, NodeAssignment, Site

if TYPE_CHECKING:
    from common.archives import ArchivedMonth


def terms_in_force(*, lease: Lease, at: datetime) -> LeaseTerms | None:
    """Which terms were in force for this lease at instant ``at``."""
    return LeaseTerms.objects.in_force(lease.pk, at)


class Effective(Protocol):
    """A terms version as far as "in force at t" reads it (a LeaseTerms, or a lighter
    row of it: the dispatcher's)."""

    @property
    def effective_from(self) -> datetime: ...


Version = TypeVar("Version", bound=Effective)


class TermsTimeline(Generic[Version]):
    """All versions of a lease's terms, for answering "in force at t" for many samples
    without a query each."""

    def __init__(self, versions: Sequence[Version]):
        self._versions = sorted(versions, key=lambda terms: terms.effective_from)
        self._starts = [terms.effective_from for terms in self._versions]

    @classmethod
    def for_lease(cls, lease: Lease) -> "TermsTimeline[LeaseTerms]":
        return TermsTimeline(list(LeaseTerms.objects.filter(lease=lease)))

    def at(self, instant: datetime) -> Version | None:
        index = bisect_right(self._starts, instant)
        return self._versions[index - 1] if index else None

    def during(self, start: datetime, end: datetime) -> list[Version]:
        """The versions in force at some instant of ``[start, end)``, in order: the one
        in force at ``start`` (if any), then each that takes effect inside."""
        first = self.at(start)
        later = [terms for terms in self._versions if start < terms.effective_from < end]
        return ([first] if first is not None else []) + later

    def __iter__(self) -> Iterator[Version]:
        return iter(self._versions)


def assignments_in_force(*, lease: Lease, at: datetime) -> QuerySet[NodeAssignment]:
    return lease.assignments.in_force_at(at).select_related("node")


def lease_node_count(lease: Lease) -> int:
    """Distinct nodes the lease holds at any time (history included, void excluded)."""
    return lease.assignments.filter(void=False).values("node").distinct().count()


def contract_warnings(*, lease: Lease, terms: LeaseTerms | None = None) -> list[str]:
    """Advice, not refusals: sentences an operator should read before signing."""
    warnings: list[str] = []
    versions = [terms] if terms is not None else list(lease.terms.all())
    if lease_node_count(lease) > 1:
        for version in versions:
            if version.contracted_bandwidth_gbps < MULTI_NODE_FLOOR_GBPS:
                warnings.append(
                    _(
                        "Terms version %(v)s contracts %(bw)s Gbps for a multi-node lease: "
                        "below 25 Gbps, distributed training will wait on the network."
                    )
                    % {"v": version.version, "bw": plain(version.contracted_bandwidth_gbps)}
                )
    return warnings


def sites_visible_to(user) -> QuerySet[Site]:  # type: ignore[no-untyped-def]
    """Provider staff see every site; a tenant member sees the sites of their leases' nodes."""
    if is_provider_staff(user):
        return Site.objects.all()
    return Site.objects.filter(
        pk__in=Node.objects.visible_to(user).values("leaf_switch__fabric__site")
    )


def fabrics_visible_to(user) -> QuerySet[Fabric]:  # type: ignore[no-untyped-def]
    """Provider staff see every fabric; a tenant member sees the fabrics of their leases'
    nodes."""
    if is_provider_staff(user):
        return Fabric.objects.all()
    return Fabric.objects.filter(pk__in=Node.objects.visible_to(user).values("leaf_switch__fabric"))


def archived_names(archived: "ArchivedMonth") -> dict[str, Any]:
    """A month archive's names for what its runs' hashed content names outside their rows
    (``common.archives``; registered in leases.apps): each lease's reference, and each terms
    version's number, link index and hash (by id), so that an auditor recomputes every run's
    hash from the archive alone."""
    named = Lease.objects.filter(pk__in=archived.lease_ids).values_list("pk", "reference")
    references = {str(pk): reference for pk, reference in named}
    archived.cursor.execute(
        f"SELECT DISTINCT terms_id FROM {archived.runs} WHERE terms_id IS NOT NULL"
    )
    versions = LeaseTerms.objects.filter(pk__in=[row[0] for row in archived.cursor.fetchall()])
    terms = {
        str(pk): {"version": version, "chain_index": index, "terms_hash": digest}
        for pk, version, index, digest in versions.order_by("pk").values_list(
            "pk", "version", "chain_index", "terms_hash"
        )
    }
    return {"references": references, "terms": terms}
