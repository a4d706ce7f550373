"""An insider edits who acknowledged a retroactive amendment (issue 29, item 3): the row
in the database says provider staff, another tenant's admin, or a time before the proposal,
the insider re-hashes the chain as the server would, and the server signs a fresh bundle
with the provider's key. Each edit is named by the verifier in its own sentence."""

from datetime import timedelta
from typing import Any

import pytest

from accounts.choices import Role
from accounts.models import Membership
from benchmarks.links import link_pending
from billing import audit, invoicing
from gpulease_verify.canonical import iso_utc
from leases.links import link_terms
from leases.models import LeaseTerms
from tests.billing.test_audit import AFTER_NOVEMBER, NOVEMBER, month, signed  # noqa: F401
from tests.factories import MembershipFactory, StaffFactory, amend_acknowledged, at

pytestmark = pytest.mark.django_db


def mismatches(lease: Any) -> list[str]:
    return audit.verify(signed(lease), audit.published_key_info()["public_key_pem"])


def rehash(lease: Any) -> None:
    """Re-link the lease's whole chain from its rows as they are now, in the order it was
    made (v1, the runs, then v2), as an insider with the database and the server's code
    would: every link hash agrees again."""
    lease.probe_runs.update(chain_index=None, prev_hash="", run_hash="")
    LeaseTerms.objects.filter(lease=lease).update(chain_index=None, prev_hash="", terms_hash="")
    v1, v2 = LeaseTerms.objects.filter(lease=lease).order_by("version")
    link_terms(v1)
    link_pending(lease_id=lease.pk, now=AFTER_NOVEMBER)
    link_terms(v2)


@pytest.fixture
def amended(month):  # type: ignore[no-untyped-def]  # noqa: F811
    """November with v2, in force from 2 November with the credit cap at 0 %, proposed by
    staff and acknowledged by the tenant's admin: the honest bundle verifies."""
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)
    v2 = amend_acknowledged(
        lease=month,
        effective_from=at("2026-11-02 00:00"),
        changes={"credit_cap_percent": "0"},
        reason="The cap was waived.",
    )
    invoicing.draft_invoice(tenant=month.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    assert mismatches(month) == []
    return v2


def test_the_acknowledgement_carries_the_acknowledgers_standing(amended):  # type: ignore[no-untyped-def]
    (entry,) = [t for t in signed(amended.lease)["bundle"]["terms"] if t["version"] == 2]
    ack = entry["acknowledgement"]
    proposal = amended.proposal
    assert (ack["role"], ack["tenant"], ack["staff"]) == ("admin", amended.lease.tenant.slug, False)
    assert ack["proposed_at"] == iso_utc(proposal.created_at)
    assert ack["proposed_at"] <= ack["at"] <= entry["created_at"]


def test_db_acknowledgement_by_provider_staff(amended):  # type: ignore[no-untyped-def]
    staff = StaffFactory(username="ops-insider")
    LeaseTerms.objects.filter(pk=amended.pk).update(
        acknowledged_by=staff,
        acknowledged_by_username=staff.username,
        acknowledged_by_role=Role.ADMIN,
        acknowledged_by_staff=True,
    )
    rehash(amended.lease)
    assert mismatches(amended.lease) == [
        "terms v2 was acknowledged by ops-insider, a provider staff account: only a tenant "
        "admin can agree for the tenant"
    ]


def test_db_acknowledgement_by_another_tenants_admin(amended):  # type: ignore[no-untyped-def]
    other = MembershipFactory(
        role=Role.ADMIN, tenant__slug="other-co", user__username="other-admin"
    )
    LeaseTerms.objects.filter(pk=amended.pk).update(
        acknowledged_by=other.user,
        acknowledged_by_username="other-admin",
        acknowledged_by_tenant="other-co",
    )
    rehash(amended.lease)
    assert mismatches(amended.lease) == [
        "terms v2 was acknowledged by other-admin for tenant other-co, not for the lease's "
        f"tenant {amended.lease.tenant.slug}"
    ]


def test_db_acknowledgement_dated_before_the_proposal(amended):  # type: ignore[no-untyped-def]
    proposed = amended.proposal.created_at
    LeaseTerms.objects.filter(pk=amended.pk).update(acknowledged_at=proposed - timedelta(days=1))
    rehash(amended.lease)
    assert mismatches(amended.lease) == [
        f"terms v2 was acknowledged at {iso_utc(proposed - timedelta(days=1))}, before its "
        f"amendment was proposed ({iso_utc(proposed)})"
    ]


def test_db_acknowledgement_dated_after_the_version_it_made(amended):  # type: ignore[no-untyped-def]
    later = amended.created_at + timedelta(hours=1)
    LeaseTerms.objects.filter(pk=amended.pk).update(acknowledged_at=later)
    rehash(amended.lease)
    assert mismatches(amended.lease) == [
        f"terms v2 was acknowledged at {iso_utc(later)}, after the version it made was created "
        f"({iso_utc(amended.created_at)})"
    ]


def test_a_legacy_staff_membership_is_refused_by_the_service(amended):  # type: ignore[no-untyped-def]
    """The service refuses staff whatever the memberships say (a row made without
    Membership.clean), and a viewer, and an admin of another tenant."""
    from django.core.exceptions import PermissionDenied

    from leases import services

    lease = amended.lease
    staff = StaffFactory()
    Membership.objects.create(user=staff, tenant=lease.tenant, role=Role.ADMIN)
    viewer = MembershipFactory(tenant=lease.tenant, role=Role.VIEWER).user
    stranger = MembershipFactory(role=Role.ADMIN).user
    amendment = services.propose_retroactive_amendment(
        lease=lease,
        effective_from=at("2026-11-20 00:00"),
        changes={"credit_cap_percent": "10"},
        reason="Another change.",
    )
    for user in (staff, viewer, stranger):
        with pytest.raises(PermissionDenied, match="Only a tenant admin of"):
            services.acknowledge_amendment(amendment=amendment, user=user, reason="ok")
    amendment.refresh_from_db()
    assert amendment.status == amendment.Status.PENDING
