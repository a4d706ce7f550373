"""The migrations that record standing backfill what can be known of existing rows:
tokens (api 0002) and acknowledgements (leases 0017). The rows are made with today's
services, the two migrations are unapplied (their columns dropped) and applied again."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken
from leases.models import LeaseTerms, TermsAmendment
from tests.factories import MembershipFactory, StaffFactory, amend_acknowledged, at, make_lease

BEFORE = [("api", "0001_initial"), ("leases", "0016_lease_reference_pattern")]


def replay_migrations() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_backfill_records_what_can_be_known():
    viewer = MembershipFactory(role=Role.VIEWER, tenant__slug="alpha")
    both = MembershipFactory(role=Role.ADMIN, tenant__slug="beta")
    MembershipFactory(user=both.user, role=Role.VIEWER, tenant=viewer.tenant)
    staff = StaffFactory()
    own = tokens.issue_token(user=viewer.user, scopes=["read"]).token
    staffs = tokens.issue_token(user=staff, scopes=["read", "write"]).token
    two = tokens.issue_token(user=both.user, scopes=["read"], tenant=both.tenant).token
    lease = make_lease(tenant=viewer.tenant)
    admin = MembershipFactory(role=Role.ADMIN, tenant=viewer.tenant)
    v2 = amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-05 00:00"),
        changes={"credit_cap_percent": "20"},
        reason="Agreed late.",
    )
    terms_hash = v2.terms_hash

    replay_migrations()

    own, staffs, two = (ApiToken.objects.get(pk=t.pk) for t in (own, staffs, two))
    assert (own.issuer, own.tenant, own.role, own.holder_is_staff) == (
        viewer.user,
        viewer.tenant,
        Role.VIEWER,
        False,
    )
    assert own.revoked_at is None
    assert (staffs.issuer, staffs.tenant, staffs.role, staffs.holder_is_staff) == (
        staff,
        None,
        "",
        True,
    )
    assert staffs.revoked_at is None
    assert two.tenant is None and two.revoked_at is not None  # two tenants: not bindable
    v2 = LeaseTerms.objects.get(pk=v2.pk)
    proposal = TermsAmendment.objects.get(terms=v2)
    assert v2.acknowledged_by == admin.user
    assert (v2.acknowledged_by_tenant, v2.acknowledged_by_staff) == ("alpha", False)
    assert v2.proposed_at == proposal.created_at
    assert v2.terms_hash == terms_hash  # the standing is not hashed: the link is unchanged
