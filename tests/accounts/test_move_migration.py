"""accounts 0001 moves Membership (from leases) and ApiToken (from api) in Django's state
only. The rows are made with today's services, accounts' migrations are unapplied (back to
main before the move: leases.membership and api.apitoken) and applied again: the rows, the
token's secret and a group's permissions (same ids, now accounts.*) survive both ways."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from accounts import services
from accounts.choices import Role
from accounts.models import ApiToken, Membership
from tests.factories import MembershipFactory

CODENAMES = ["change_membership", "issue_any_token", "view_apitoken"]


def migrate(targets: list[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)


def dotted(group: Group) -> list[tuple[int, str]]:
    rows = Permission.objects.filter(group=group).select_related("content_type")
    return sorted((p.pk, f"{p.content_type.app_label}.{p.codename}") for p in rows)


@pytest.mark.django_db(transaction=True)
def test_memberships_tokens_and_group_permissions_survive_the_move_both_ways():
    member = MembershipFactory(role=Role.ADMIN, tenant__slug="alpha")
    issued = services.issue_token(user=member.user, scopes=["read", "write"], name="ci")
    group = Group.objects.create(name="token-admin")
    group.permissions.set(Permission.objects.filter(codename__in=CODENAMES))
    ids = [pk for pk, _name in dotted(group)]
    assert sorted(name for _pk, name in dotted(group)) == [
        "accounts.change_membership",
        "accounts.issue_any_token",
        "accounts.view_apitoken",
    ]

    migrate([("accounts", None)])  # main before the move
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT user_id, tenant_id, role FROM leases_membership")
            assert cursor.fetchall() == [(member.user_id, member.tenant_id, "admin")]
            cursor.execute("SELECT prefix, name, scopes::text FROM api_apitoken")
            assert cursor.fetchall() == [(issued.token.prefix, "ci", '["read", "write"]')]
        back = {name.split(".")[1]: name.split(".")[0] for _pk, name in dotted(group)}
        assert back == {
            "change_membership": "leases",
            "issue_any_token": "api",
            "view_apitoken": "api",
        }
        assert [pk for pk, _name in dotted(group)] == ids
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

    assert sorted(name for _pk, name in dotted(group)) == [
        "accounts.change_membership",
        "accounts.issue_any_token",
        "accounts.view_apitoken",
    ]
    assert [pk for pk, _name in dotted(group)] == ids
    assert not ContentType.objects.filter(
        app_label__in=["leases", "api"], model__in=["membership", "apitoken"]
    ).exists()
    assert list(Membership.objects.values_list("user_id", "tenant_id", "role")) == [
        (member.user_id, member.tenant_id, Role.ADMIN)
    ]
    token = ApiToken.objects.get()
    assert token.matches(issued.secret)
    assert (token.tenant_id, token.role, token.scopes) == (
        member.tenant_id,
        "admin",
        ["read", "write"],
    )
