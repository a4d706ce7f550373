"""The staff permission matrix: provider staff read everything, and every write they can
make (an admin action, an API write) asks for a Django permission of its own
(docs/api.md, "Staff permission matrix").

Found, not listed: the admin actions come from ``admin.site._registry``, the API's write
routes from the URLconf's resolver (tests/test_permission_matrix.py's walk, with its rows'
objects and bodies), so a new action or route without a permission fails here. A staff user
who holds only the ``view_*`` permissions is refused every one of them and the database is
unchanged afterwards; a staff user who holds only the one permission a write names gets what
the superuser gets in the permission matrix's row."""

from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.test import Client, RequestFactory
from django.urls import resolve, reverse
from rest_framework.test import APIClient

from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken
from api.permissions import SERVICE_DECIDES
from billing.choices import InvoiceStatus
from common.staff_groups import view_permissions
from leases.choices import LeaseStatus
from leases.models import Lease, Tenant
from leases.models.tenants import MASKED_SECRET
from tests.api.conftest import World, build_side
from tests.api.isolation_cases import issued_invoice_of
from tests.factories import StaffFactory, UserFactory
from tests.permission_matrix_rows import API_CALLERS, API_ROWS, PAGE_ROWS
from tests.test_permission_matrix import NOW, all_routes

WRITES = ("post", "put", "patch", "delete")
# Not provider staff's to judge: Alertmanager's intake takes its own bearer token only.
NOT_STAFF_ROUTES = {"api:alertmanager-alerts"}


# --- users --------------------------------------------------------------------------------


def permission(dotted: str) -> Permission:
    app_label, codename = dotted.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def staff_with(username: str, *extra: str) -> Any:
    """Provider staff (not a superuser) holding every view permission and ``extra``."""
    user = UserFactory(username=username, is_staff=True)
    views = Permission.objects.filter(view_permissions())
    user.user_permissions.set([*views, *(permission(p) for p in extra)])
    return type(user).objects.get(pk=user.pk)  # no cached permissions


def api_client(user: Any) -> APIClient:
    client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(user)
    return client


@pytest.fixture
def world(db, settings) -> Iterator[World]:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.RUN_NOW_COOLDOWN_S = 0
    cache.clear()
    with time_machine.travel(NOW, tick=True):
        yield World(
            alpha=build_side("alpha"),
            beta=build_side("beta"),
            staff=StaffFactory(username="provider"),
            outsider=UserFactory(username="outsider"),
        )
    cache.clear()


# --- the database, whole ------------------------------------------------------------------


def snapshot() -> dict[str, list[tuple]]:
    """Every row of every table (sessions aside: logging in writes one)."""
    return {
        model._meta.label: list(model._base_manager.order_by("pk").values_list())
        for model in apps.get_models()
        if model is not Session and model._meta.managed and not model._meta.proxy
    }


def changed_tables(before: dict, after: dict) -> list[str]:
    return sorted(label for label in before if before[label] != after[label])


# --- the API ------------------------------------------------------------------------------


def api_writes() -> list[tuple[str, str]]:
    return sorted(
        (route.name, method)
        for route in all_routes()
        if route.is_api and route.name not in NOT_STAFF_ROUTES
        for method in route.methods
        if method in WRITES
    )


def declared(name: str, method: str, kwargs: dict) -> str | None:
    """The permission the view declares for provider staff on this route and method."""
    callback = resolve(reverse(name, kwargs=kwargs)).func
    action = callback.actions[method]
    return getattr(callback.cls, "staff_permissions", {}).get(action)


def _path(name: str) -> str:
    return next(route.path for route in all_routes() if route.name == name)


def _superuser_token(world: World) -> dict[str, Any]:
    issued = tokens.issue_token(user=world.staff, scopes=["read", "write"], name="root")
    return {"pk": issued.token.pk}


# The red team's cases: another user's token is the superuser's, and the token a view-only
# staff user asks for is held by the superuser (their own tokens are theirs: below).
KWARGS = {("api:apitoken-revoke", "post"): _superuser_token}
BODIES = {
    ("api:apitoken-list", "post"): lambda world: {"scopes": ["read"], "user": "provider"},
    ("api:dispute-accept", "post"): lambda world: {"reason": "ok", "credit_cny": "99999.00"},
}


# A tenant admin's keys and co-signed records (leases.cosign): refused to staff by the service.
TENANT_SIGNING = [
    ("api:tenantkey-list", "post"),
    ("api:tenantkey-signing-content", "post"),
    ("api:tenantkey-revoke", "post"),
    ("api:termsamendment-signing-content", "post"),
    ("api:dispute-signing-content", "post"),
    ("api:lease-acceptance-signing-content", "post"),
    ("api:lease-acceptance-sign-off", "post"),
]
# A tenant's own thresholds (billing.thresholds), its statements like its contacts.
TENANT_THRESHOLDS = [
    ("api:threshold-list", "post"),
    ("api:threshold-detail", "patch"),
    ("api:threshold-detail", "delete"),
]


def test_every_api_write_declares_a_staff_permission_that_exists(world):
    problems = []
    for name, method in api_writes():
        needed = declared(name, method, {"pk": 1} if "<" in _path(name) else {})
        if needed is None:
            problems.append(f"{name} {method.upper()}: no staff_permissions entry")
        elif needed != SERVICE_DECIDES:
            app_label, codename = needed.split(".")
            if not Permission.objects.filter(
                content_type__app_label=app_label, codename=codename
            ).exists():
                problems.append(f"{name} {method.upper()}: {needed} is no permission")
    assert problems == []
    assert len(api_writes()) == 33  # every POST/PATCH/DELETE of /api/v1/ but Alertmanager's


def test_view_only_staff_are_refused_every_api_write_and_nothing_changes(world):
    client = api_client(staff_with("viewer-staff"))
    asked, made = {}, {}  # objects the rows name, made once: nothing changes them
    for key in api_writes():
        row = API_ROWS[key]
        name, method = key
        make = KWARGS.get(key, row.kwargs)
        made[make] = made[make] if make in made else make(world)
        url = reverse(name, kwargs=made[make])
        body = BODIES.get(key, row.body)(world)
        before = snapshot()
        response = getattr(client, method)(url, body, format="json")
        asked[key] = (response.status_code, changed_tables(before, snapshot()))
    assert asked == dict.fromkeys(asked, (403, []))


def test_a_refusal_names_the_permission_it_needs(world):
    client = api_client(staff_with("viewer-staff"))
    dispute = API_ROWS[("api:dispute-accept", "post")].kwargs(world)
    response = client.post(
        reverse("api:dispute-accept", kwargs=dispute),
        {"reason": "ok", "credit_cny": "99999.00"},
        format="json",
    )
    assert response.status_code == 403
    assert response.json()["error"]["message"] == (
        "This needs the permission billing.accept_dispute."
    )


@pytest.mark.parametrize(
    "key",
    [
        key
        for key in api_writes()
        if key
        not in {
            # decided by the service: one's own tokens, and a tenant's own acts (below)
            ("api:apitoken-list", "post"),
            ("api:apitoken-revoke", "post"),
            ("api:dispute-list", "post"),
            ("api:termsamendment-acknowledge", "post"),
            *TENANT_SIGNING,
            *TENANT_THRESHOLDS,
        }
    ],
    ids="-".join,
)
def test_staff_with_the_one_permission_get_what_the_superuser_gets(world, key):
    """The superuser's status is the matrix row's: 200/201/202, or the service's own 409
    or 400 where the matrix's world makes the write impossible (past every permission)."""
    name, method = key
    row = API_ROWS[key]
    kwargs = row.kwargs(world)
    needed = declared(name, method, kwargs)
    client = api_client(staff_with("granted-staff", needed))
    response = getattr(client, method)(reverse(name, kwargs=kwargs), row.body(world), format="json")
    assert response.status_code == row.expected(API_CALLERS)["staff"], response.content


def test_the_tenants_own_acts_stay_refused_to_staff_whatever_they_hold(world):
    """Opening a dispute and acknowledging an amendment are the tenant's: even the
    superuser is refused (the permission matrix's rows say 403 for staff)."""
    for key in [
        ("api:dispute-list", "post"),
        ("api:termsamendment-acknowledge", "post"),
        *TENANT_SIGNING,
        *TENANT_THRESHOLDS,
    ]:
        assert API_ROWS[key].expected(API_CALLERS)["staff"] == 403


# --- API tokens ---------------------------------------------------------------------------


def test_a_view_only_staff_user_keeps_their_own_tokens(world):
    me = staff_with("viewer-staff")
    client = api_client(me)
    created = client.post(reverse("api:apitoken-list"), {"scopes": ["read"]}, format="json")
    assert created.status_code == 201
    token = ApiToken.objects.get(pk=created.json()["id"])
    assert token.user == me
    revoked = client.post(reverse("api:apitoken-revoke", kwargs={"pk": token.pk}), format="json")
    assert revoked.status_code == 200
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_revoking_the_superusers_token_needs_revoke_any_token(world):
    root = tokens.issue_token(user=world.staff, scopes=["read"], name="root").token
    url = reverse("api:apitoken-revoke", kwargs={"pk": root.pk})
    refused = api_client(staff_with("viewer-staff")).post(url, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == (
        "Revoking provider's token needs the permission accounts.revoke_any_token."
    )
    root.refresh_from_db()
    assert root.revoked_at is None
    done = api_client(staff_with("token-admin", "accounts.revoke_any_token")).post(
        url, format="json"
    )
    assert done.status_code == 200
    root.refresh_from_db()
    assert root.revoked_at is not None


def test_the_portal_refuses_the_same_revocation(world):
    root = tokens.issue_token(user=world.staff, scopes=["read"], name="root").token
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(staff_with("viewer-staff"))
    assert client.post(reverse("portal:token-revoke", kwargs={"pk": root.pk})).status_code == 403
    root.refresh_from_db()
    assert root.revoked_at is None


def test_the_portals_staff_writes_ask_for_the_same_permissions(world):
    """The evidence upload needs billing.add_evidence, as the API's does."""
    url = reverse("portal:evidence-upload", kwargs={"pk": world.alpha.lease.pk})
    body = PAGE_ROWS[("portal:evidence-upload", "post")].body(world)
    plain = Client(HTTP_ACCEPT_LANGUAGE="en")
    plain.force_login(staff_with("viewer-staff"))
    before = snapshot()
    assert plain.post(url, body).status_code == 403
    assert changed_tables(before, snapshot()) == []
    granted = Client(HTTP_ACCEPT_LANGUAGE="en")
    granted.force_login(staff_with("evidence-staff", "billing.add_evidence"))
    assert granted.post(url, body).status_code == 302


def test_issuing_for_other_staff_needs_issue_any_token_and_only_root_mints_root(world):
    colleague = staff_with("colleague")
    url = reverse("api:apitoken-list")
    plain = api_client(staff_with("viewer-staff"))
    granted = api_client(staff_with("token-admin", "accounts.issue_any_token"))
    assert (
        plain.post(url, {"scopes": ["read"], "user": "colleague"}, format="json").status_code == 403
    )
    done = granted.post(url, {"scopes": ["read"], "user": "colleague"}, format="json")
    assert done.status_code == 201
    assert ApiToken.objects.get(pk=done.json()["id"]).user == colleague
    to_root = granted.post(url, {"scopes": ["read"], "user": "provider"}, format="json")
    assert to_root.status_code == 403
    assert to_root.json()["error"]["message"] == (
        "Only a superuser issues a token for the superuser provider."
    )
    assert not ApiToken.objects.filter(user=world.staff).exists()


# --- webhook secrets ----------------------------------------------------------------------


def test_webhook_secrets_are_masked_in_the_api_without_the_permission(world):
    alpha = world.alpha.tenant
    url = reverse("api:tenant-detail", kwargs={"pk": alpha.pk})
    assert alpha.webhook_secret.startswith("whsec_") and alpha.webhook_secret != MASKED_SECRET
    seen = {
        who: api_client(user).get(url).json()["webhook_secret"]
        for who, user in {
            "view-only staff": staff_with("viewer-staff"),
            "tenant admin": world.alpha.members[Role.ADMIN],
            "secret holder": staff_with("secret-staff", "leases.view_webhook_secret"),
            "superuser": world.staff,
        }.items()
    }
    assert seen == {
        "view-only staff": MASKED_SECRET,
        "tenant admin": MASKED_SECRET,
        "secret holder": alpha.webhook_secret,
        "superuser": alpha.webhook_secret,
    }


def test_webhook_secrets_are_masked_in_the_admin_and_cannot_be_changed_blind(world):
    alpha = world.alpha.tenant
    secret = alpha.webhook_secret
    url = reverse("admin:leases_tenant_change", args=[alpha.pk])
    editor = Client(HTTP_ACCEPT_LANGUAGE="en")
    editor.force_login(staff_with("tenant-editor", "leases.change_tenant"))
    page = editor.get(url)
    assert page.status_code == 200
    assert secret not in page.content.decode() and MASKED_SECRET in page.content.decode()
    assert "webhook_secret" not in page.context["adminform"].form.fields
    holder = Client(HTTP_ACCEPT_LANGUAGE="en")
    holder.force_login(staff_with("secret-staff", "leases.view_webhook_secret"))
    assert secret in holder.get(url).content.decode()
    assert Tenant.objects.get(pk=alpha.pk).webhook_secret == secret


# --- the admin ----------------------------------------------------------------------------


def admin_actions() -> list[tuple[Any, str, Any]]:
    """(model admin, action name, action function) for every action of every admin."""
    return [
        (model_admin, name, func)
        for model_admin in admin.site._registry.values()
        for func, name, _description in model_admin._get_base_actions()
    ]


def required_permissions(model_admin: Any, func: Any) -> list[str]:
    """The Django permissions an action's declared checks ask for ("change": the model's
    change_<model>; a custom check: what requires() recorded)."""
    opts = model_admin.opts
    needed = []
    for name in getattr(func, "allowed_permissions", ()):
        check = getattr(type(model_admin), f"has_{name}_permission")
        recorded = getattr(check, "permission", None)
        if recorded is None:
            assert name in {"add", "change", "delete", "view"}, (model_admin, name)
            recorded = f"{opts.app_label}.{name}_{opts.model_name}"
        needed.append(recorded)
    return needed


def test_every_admin_action_declares_a_permission(db):
    undeclared = [
        f"{type(model_admin).__name__}.{name}"
        for model_admin, name, func in admin_actions()
        if not getattr(func, "allowed_permissions", None)
    ]
    assert undeclared == []
    custom = {
        f"{type(model_admin).__name__}.{name}": required_permissions(model_admin, func)
        for model_admin, name, func in admin_actions()
        if name != "delete_selected"
    }
    assert custom == {
        "LeaseWithProbesAdmin.activate": ["leases.transition_lease"],
        "LeaseWithProbesAdmin.end": ["leases.transition_lease"],
        "LeaseWithProbesAdmin.cancel": ["leases.transition_lease"],
        "LeaseWithProbesAdmin.run_probes_now": ["benchmarks.run_probes_now"],
        "LeaseTermsAdmin.rerate_from_corrected_terms": ["billing.rerate_lease"],
        "TermsAmendmentAdmin.rerate_from_corrected_terms": ["billing.rerate_lease"],
        "InvoiceAdmin.issue": ["billing.issue_invoice"],
        "InvoiceAdmin.mark_paid": ["billing.mark_invoice_paid"],
        "InvoiceAdmin.void": ["billing.void_invoice"],
        "InvoiceAdmin.recompute": ["billing.recompute_invoice"],
        "IncidentAdmin.resolve_disputes": ["incidents.change_incident"],
        "IncidentAdmin.clear_ports": ["incidents.change_incident"],
        "IncidentAdmin.acknowledge": ["incidents.acknowledge_incident"],
        "IncidentAdmin.mitigate": ["incidents.mitigate_incident"],
        "DeclaredPeriodicTaskAdmin.enable_tasks": ["django_celery_beat.change_periodictask"],
        "DeclaredPeriodicTaskAdmin.disable_tasks": ["django_celery_beat.change_periodictask"],
        "DeclaredPeriodicTaskAdmin.toggle_tasks": ["django_celery_beat.change_periodictask"],
        "DeclaredPeriodicTaskAdmin.run_tasks": ["django_celery_beat.change_periodictask"],
        "DeclaredAccessAttemptAdmin.cleanup_expired_attempts": ["axes.delete_accessattempt"],
    }


def _request_as(user: Any) -> Any:
    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def test_view_only_staff_are_offered_no_admin_action_and_posting_one_changes_nothing(world):
    issued_invoice_of(world.alpha)
    user = staff_with("viewer-staff")
    offered = {
        f"{type(model_admin).__name__}": sorted(model_admin.get_actions(_request_as(user)))
        for model_admin, _name, _func in admin_actions()
    }
    assert offered == {key: [] for key in offered}
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(user)
    problems = []
    for model_admin, name, _func in admin_actions():
        opts = model_admin.opts
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        selected = list(model_admin.model._base_manager.values_list("pk", flat=True)[:20])
        before = snapshot()
        # Every form the action could ask for, filled in, as if confirmed.
        data = {"action": name, "index": 0, "_selected_action": selected, "post": "yes"}
        data |= {"reason": "because", "confirm": "1", "paid_on": ""}
        response = client.post(url, data)
        changed = changed_tables(before, snapshot())
        if response.status_code not in (200, 302) or changed:
            problems.append(
                f"{type(model_admin).__name__}.{name}: {response.status_code} {changed}"
            )
    assert problems == []
    assert Lease.objects.get(pk=world.alpha.lease.pk).status == LeaseStatus.ACTIVE


def test_each_admin_action_is_offered_to_staff_with_its_permission(world):
    """As to the superuser: read-only admins offer no deletion to anybody."""
    offered, expected = {}, {}
    for index, (model_admin, name, func) in enumerate(admin_actions()):
        key = f"{type(model_admin).__name__}.{name}"
        user = staff_with(f"granted-{index}", *required_permissions(model_admin, func))
        offered[key] = name in model_admin.get_actions(_request_as(user))
        expected[key] = name in model_admin.get_actions(_request_as(world.staff))
    assert offered == expected
    assert sum(expected.values()) >= 30  # 12 of ours, 5 of other packages', deletions


def test_staff_with_void_invoice_void_one_through_the_admin(world):
    invoice = issued_invoice_of(world.alpha)
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(staff_with("billing-staff", "billing.void_invoice"))
    response = client.post(
        reverse("admin:billing_invoice_changelist"),
        {"action": "void", "index": 0, "_selected_action": [invoice.pk], "reason": "wrong buyer"},
    )
    assert response.status_code == 302
    invoice.refresh_from_db()
    assert (invoice.status, invoice.void_reason) == (InvoiceStatus.VOID, "wrong buyer")


def test_staff_with_transition_lease_end_one_through_the_admin(world):
    lease = world.alpha.lease
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(staff_with("ops-staff", "leases.transition_lease"))
    response = client.post(
        reverse("admin:leases_lease_changelist"),
        {"action": "end", "index": 0, "_selected_action": [lease.pk]},
    )
    assert response.status_code == 302
    lease.refresh_from_db()
    assert lease.status == LeaseStatus.ENDED


# --- the provider staff group -------------------------------------------------------------


def test_the_provider_staff_group_runs_the_business_but_holds_no_keys(world):
    from common.staff_groups import PROVIDER_STAFF_GROUP, ensure_provider_staff_group

    group = ensure_provider_staff_group()
    group.permissions.remove(permission("billing.void_invoice"))  # an operator's edit...
    assert ensure_provider_staff_group().pk == group.pk  # ...put back, the group kept
    operator = UserFactory(username="ops", is_staff=True)
    operator.groups.add(group)
    operator = type(operator).objects.get(pk=operator.pk)
    held = operator.get_all_permissions()
    assert {"billing.void_invoice", "leases.transition_lease", "billing.view_invoice"} <= held
    keys = {"leases.view_webhook_secret", "accounts.issue_any_token", "accounts.revoke_any_token"}
    assert held & keys == set()
    # No deletions, no users, groups or memberships to edit, no tokens but their own.
    assert sorted(
        p for p in held if ".delete_" in p or p.split(".")[0] in {"auth", "accounts"}
    ) == [
        "accounts.view_apitoken",
        "accounts.view_membership",
        "auth.view_group",
        "auth.view_permission",
        "auth.view_user",
    ]
    assert world.alpha.tenant.webhook_secret_for(operator) == MASKED_SECRET
    assert group.name == PROVIDER_STAFF_GROUP
