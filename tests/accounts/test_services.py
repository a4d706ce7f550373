"""accounts' writes (memberships) and the reads other apps make through its selectors."""

import pytest
from django.core.exceptions import ValidationError

from accounts import selectors, services
from accounts.choices import Role
from accounts.models import ApiToken
from tests.factories import StaffFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_a_member_is_added_once_and_never_provider_staff():
    alpha, beta = TenantFactory(slug="alpha"), TenantFactory(slug="beta")
    ann = UserFactory(username="ann")
    services.add_membership(user=ann, tenant=beta, role=Role.AUDITOR)
    services.add_membership(user=ann, tenant=alpha, role=Role.ADMIN)
    with pytest.raises(ValidationError, match="already belongs to this tenant"):
        services.add_membership(user=ann, tenant=alpha)
    with pytest.raises(ValidationError, match="staff cannot be members of a tenant"):
        services.add_membership(user=StaffFactory(username="ops"), tenant=alpha)

    assert [(m.tenant.slug, m.role) for m in selectors.memberships_of(ann)] == [
        ("alpha", "admin"),
        ("beta", "auditor"),
    ]
    assert selectors.roles_by_tenant(ann) == {alpha.pk: "admin", beta.pk: "auditor"}
    assert selectors.roles_by_tenant(ann, beta.pk) == {beta.pk: "auditor"}
    assert selectors.has_role(ann, beta.pk, [Role.ADMIN, Role.AUDITOR])
    assert not selectors.has_role(ann, beta.pk, [Role.ADMIN])
    assert selectors.first_admin_of(alpha.pk) == ann
    assert selectors.first_admin_of(beta.pk) is None


def test_a_changed_role_or_a_removed_member_ends_the_tokens_minted_on_it():
    alpha = TenantFactory(slug="alpha")
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    admin = services.add_membership(user=ann, tenant=alpha, role=Role.ADMIN)
    member = services.add_membership(user=bob, tenant=alpha, role=Role.VIEWER)
    own = services.issue_token(user=ann, scopes=["read", "write"]).token
    issued = services.issue_token(user=bob, scopes=["read"], issuer=ann).token
    bobs = services.issue_token(user=bob, scopes=["read"]).token

    services.change_role(membership=admin, role=Role.AUDITOR)
    # ann's own token was minted as admin; the token she issued bob needs her to be admin.
    assert set(ApiToken.objects.filter(revoked_at__isnull=False).values_list("pk", flat=True)) == {
        own.pk,
        issued.pk,
    }
    assert selectors.active_tokens(bobs.created_at).get() == bobs

    services.remove_membership(membership=member)
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 0
    assert selectors.tenant_ids_of(bob) == []
    assert selectors.tenant_ids_of(ann) == [alpha.pk]
