"""Hostile input never gets a 500 from the portal, on SQLite or on PostgreSQL.

Every portal page found in the URLconf is asked for ids past any database's integer
range and sent NUL and garbage in its query string. The forms that write (evidence
upload, token creation, token revocation, the language switch, login) are sent NUL in
every field, dates at the edge of the calendar, values that are not among the choices,
bodies that are not UTF-8, too many fields and bodies past the size limit. A form of
ours answers 400 with the reason shown beside its field; Django's own views (login,
language switch) keep their answers, which are never a 5xx."""

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils.html import escape

from accounts import services as tokens
from accounts.choices import Role
from accounts.models import ApiToken
from billing.models import Evidence
from incidents.services import INGEST, open_incident
from tests.benchmarks.parsers import fixture_text
from tests.factories import MembershipFactory, NodeFactory, StaffFactory, at, make_lease
from tests.portal.support import active, client_for, october_invoice

pytestmark = pytest.mark.django_db

IPERF3 = fixture_text("iperf3", "tcp_3.14_macos.json")
HUGE_ID = "99999999999999999999"  # past 2**64: PostgreSQL's bigint and SQLite's INTEGER
NUL_TEXTS = ["\x00", "a\x00b"]
YEARS = "Give an instant between 2000 and 2999."
NOT_A_TIME = "Enter a valid date/time."
# What a datetime-local input may send -> the form's answer. Read in Asia/Shanghai.
EDGE_LOCAL_TIMES = {
    "9999-12-31T23:59": YEARS,
    "0001-01-01T00:00": YEARS,  # year 0 once moved to UTC: past datetime's range
    "1969-12-31T23:59": YEARS,
    "3000-01-01T00:00": YEARS,
    "0000-01-01T00:00": NOT_A_TIME,
    "2027-02-30T08:00": NOT_A_TIME,
    "2027-01-01T24:00": NOT_A_TIME,
}


def rolled_back(call):  # type: ignore[no-untyped-def]
    """One request's answer with what it wrote undone: every case meets the same state."""
    with transaction.atomic():
        response = call()
        transaction.set_rollback(True)
    return response


@pytest.fixture
def admin():
    return MembershipFactory(role=Role.ADMIN, user__username="zy-admin")


@pytest.fixture
def lease(admin):
    nodes = [NodeFactory(hostname="gz-a100-01"), NodeFactory(hostname="gz-a100-02")]
    return active(make_lease(tenant=admin.tenant, reference="ZY-2026-401", nodes=nodes))


@pytest.fixture
def page_ids(admin, lease) -> dict[str, Any]:
    """URL kwargs of one object for each portal route that names one."""
    from billing import evidence as evidence_services
    from billing import services as billing_services
    from billing.models import Invoice
    from tests.portal.support import NOW

    item = evidence_services.submit_evidence(
        lease=lease,
        user=admin.user,
        tool="iperf3",
        raw_output=IPERF3,
        nodes=["gz-a100-01", "gz-a100-02"],
        now=NOW,
    )
    issued = october_invoice(tenant=admin.tenant, lease=lease)
    Invoice.objects.filter(pk=issued.pk).update(
        status="issued", number="GL-2026-000001", issue_date=NOW.date(), period="2026-09"
    )
    invoice = october_invoice(tenant=admin.tenant, lease=lease)
    note = billing_services.create_credit_note(invoice=issued, reason="Goodwill.", now=NOW)
    from billing.models import Voucher

    voucher = Voucher.objects.create(
        tenant=admin.tenant,
        lease=lease,
        source_invoice=issued,
        number="GL-VC-2026-000001",
        period="2026-09",
        amount="100.00",
        issued_at=NOW,
        validity_months=12,
        expires_at=NOW + timedelta(days=365),
        description="SLA credit",
    )
    token = tokens.issue_token(user=admin.user, scopes=["read"], name="ci").token
    from leases import services as lease_services
    from tests.factories import register_tenant_key

    amendment = lease_services.propose_retroactive_amendment(
        lease=lease,
        effective_from=at("2026-11-10 00:00"),
        changes={"credit_cap_percent": "40"},
        reason="Signed on the 10th, recorded late.",
    )
    _, key = register_tenant_key(admin.user, admin.tenant)
    incident = open_incident(
        actor=INGEST,
        lease_id=lease.pk,
        terms_id=lease.terms.latest("version").pk,
        kind="throughput",
        pattern="pairwise",
        target="gz-a100-01>gz-a100-02",
        opened_at=at("2026-11-10 00:00"),
        rule="below 95 %",
    )
    return {
        "portal:amendment": {"pk": amendment.pk},
        "portal:signing-key-revoke": {"pk": key.pk},
        "portal:lease": {"pk": lease.pk},
        "portal:lease-sla": {"pk": lease.pk},
        "portal:incident": {"pk": lease.pk, "incident_pk": incident.pk},
        "portal:chart-csv": {"pk": lease.pk, "chart": "throughput"},
        "portal:lease-audit": {"pk": lease.pk, "period": "2026-11"},
        "portal:lease-checkpoint": {"pk": lease.pk},
        "portal:evidence-upload": {"pk": lease.pk},
        "portal:evidence": {"pk": lease.pk, "evidence_pk": item.pk},
        "portal:token-revoke": {"pk": token.pk},
        "portal:invoice": {"pk": invoice.pk},
        "portal:invoice-csv": {"pk": invoice.pk},
        "portal:invoice-pdf": {"pk": invoice.pk},
        "portal:invoice-xlsx": {"pk": invoice.pk},
        "portal:credit-note-pdf": {"pk": note.pk},
        "portal:invoice-einvoice": {"pk": issued.pk},
        "portal:credit-note-einvoice": {"pk": note.pk},
        "portal:voucher": {"pk": voucher.pk},
    }


def portal_routes() -> dict[str, tuple[str, ...]]:
    """Name -> URL kwargs of every route outside /api/ and /admin/."""
    found = {}

    def walk(patterns, prefix: str, namespace: str | None) -> None:  # type: ignore[no-untyped-def]
        for pattern in patterns:
            text = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, text, pattern.namespace or namespace)
            elif isinstance(pattern, URLPattern) and pattern.name:
                name = f"{namespace}:{pattern.name}" if namespace else pattern.name
                found[name] = tuple(pattern.pattern.regex.groupindex)

    walk(get_resolver().url_patterns, "", None)
    return {
        name: kwargs
        for name, kwargs in found.items()
        # The probes answer 503 by design while a check fails (tests/deploy/test_health.py).
        if not name.startswith(("api:", "admin:")) and name not in {"health", "ready"}
    }


# --- every page ---------------------------------------------------------------------


def test_every_page_with_an_id_answers_404_for_ids_past_any_integer(admin, page_ids):
    client = client_for(admin.user)
    routes = {name: kwargs for name, kwargs in portal_routes().items() if kwargs}
    assert set(routes) == set(page_ids), "add the new page's object to page_ids"
    for name, kwargs in routes.items():
        for huge in (HUGE_ID, str(2**63), "9" * 400):
            url = reverse(name, kwargs=dict.fromkeys(kwargs, huge))
            revokes = {"portal:token-revoke", "portal:signing-key-revoke"}
            method = client.post if name in revokes else client.get
            response = rolled_back(lambda: method(url))  # noqa: B023
            assert response.status_code == 404, (url, response.status_code)


def test_every_page_shrugs_off_nul_and_unknown_query_parameters(admin, page_ids):
    staff = client_for(StaffFactory())
    revokes = {"portal:token-revoke", "portal:signing-key-revoke"}
    plain = [name for name in portal_routes() if name not in revokes]
    for name in plain:
        kwargs = page_ids.get(name, {})
        url = reverse(name, kwargs=kwargs)
        for query in ({"days": "\x00"}, {"colour": "blue"}, {"\x00": "\x00"}, {"next": "\x00"}):
            response = rolled_back(lambda: staff.get(url, query))  # noqa: B023
            assert response.status_code < 500, (url, query, response.status_code)


@pytest.mark.parametrize("days", ["\x00", HUGE_ID, "-1", "1e5", "NaN", "٣٠", "30\x00"])
def test_a_garbage_chart_window_falls_back_to_thirty_days(admin, lease, days):
    response = client_for(admin.user).get(f"/leases/{lease.pk}/", {"days": days})
    assert response.status_code == 200
    assert "Measured throughput per node pair, last 30 days" in response.content.decode()


@pytest.mark.parametrize(
    "query",
    [
        {"from": "\x00", "to": "2026-11-05"},
        {"from": "2026-11-05", "to": "2026-11-01"},
        {"from": "0001-01-01", "to": "9999-12-31"},
        {"from": "2026-02-30", "to": "2026-03-01"},
        {"from": "2026-11-05"},
        {"from": "2099-01-01", "to": "2099-01-02"},
        {"range": "\x00"},
        {"range": HUGE_ID},
    ],
)
def test_a_garbage_chart_range_falls_back_to_thirty_days(admin, lease, query):
    client = client_for(admin.user)
    response = client.get(f"/leases/{lease.pk}/", query)
    assert response.status_code == 200
    assert "Measured throughput per node pair, last 30 days" in response.content.decode()
    csv_response = client.get(f"/leases/{lease.pk}/charts/throughput.csv", query)
    assert csv_response.status_code == 200
    assert csv_response.content.decode().splitlines()[0] == "time,series,value,unit"


@pytest.mark.parametrize("period", ["\x00", "2026-11\x00", "9999-12", "0000-01", HUGE_ID])
def test_a_garbage_cost_share_period_is_a_400_that_says_so(period):
    response = client_for(StaffFactory()).get("/provider/cost-share/", {"period": period})
    assert response.status_code == 400
    assert "The period must be a month written YYYY-MM" in response.content.decode()


# --- evidence upload ------------------------------------------------------------------


def upload(client, lease, **fields):  # type: ignore[no-untyped-def]
    data = {"tool": "iperf3", "nodes": ["gz-a100-01", "gz-a100-02"], "raw_output": IPERF3}
    data.update(fields)
    return rolled_back(lambda: client.post(f"/leases/{lease.pk}/evidence/new/", data))


@pytest.mark.parametrize("field", ["tool", "nodes", "raw_output", "measured_at", "note"])
@pytest.mark.parametrize("value", NUL_TEXTS)
def test_nul_in_any_evidence_field_is_a_400(admin, lease, field, value):
    response = upload(client_for(admin.user), lease, **{field: value})
    assert response.status_code == 400
    assert not Evidence.objects.exists()


@pytest.mark.parametrize("measured_at", sorted(EDGE_LOCAL_TIMES))
def test_an_evidence_time_at_the_edge_of_the_calendar_is_a_400(admin, lease, measured_at):
    response = upload(client_for(admin.user), lease, measured_at=measured_at)
    assert response.status_code == 400
    assert escape(EDGE_LOCAL_TIMES[measured_at]) in response.content.decode()


@pytest.mark.parametrize(
    "fields",
    [
        {"tool": "teleport"},
        {"nodes": ["gz-a100-01", "not-a-node"]},
        {"nodes": [HUGE_ID]},
        {"raw_output": "x" * (1024 * 1024 + 1)},
        {"raw_output": ""},
        {"note": "n" * 4001},
    ],
)
def test_garbage_in_the_evidence_form_is_a_400(admin, lease, fields):
    assert upload(client_for(admin.user), lease, **fields).status_code == 400
    assert not Evidence.objects.exists()


def test_an_evidence_body_that_is_not_utf8_is_not_a_500(admin, lease):
    client = client_for(admin.user)
    body = b"tool=iperf3&nodes=gz-a100-01&nodes=gz-a100-02&raw_output=caf%E9&note=\xff\xfe"
    response = rolled_back(
        lambda: client.generic(
            "POST",
            f"/leases/{lease.pk}/evidence/new/",
            body,
            content_type="application/x-www-form-urlencoded",
        )
    )
    assert response.status_code == 400  # the output "caf\ufffd" is not iperf3 JSON
    assert not Evidence.objects.exists()


def test_too_many_fields_or_too_large_a_body_is_a_400(admin, lease, settings):
    client = client_for(admin.user)
    many = "&".join(f"nodes=n{i}" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    url = f"/leases/{lease.pk}/evidence/new/"
    form = "application/x-www-form-urlencoded"
    response = rolled_back(lambda: client.generic("POST", url, many, content_type=form))
    assert response.status_code == 400
    huge = "raw_output=" + "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = rolled_back(lambda: client.generic("POST", url, huge, content_type=form))
    assert response.status_code == 400
    assert not Evidence.objects.exists()


# --- tokens ---------------------------------------------------------------------------


def create_token(client, **fields):  # type: ignore[no-untyped-def]
    data = {"name": "ci", "scopes": ["read"]}
    data.update(fields)
    return rolled_back(lambda: client.post("/tokens/", data))


@pytest.mark.parametrize("field", ["name", "scopes", "expires_at"])
@pytest.mark.parametrize("value", NUL_TEXTS)
def test_nul_in_any_token_field_is_a_400(admin, lease, field, value):
    response = create_token(client_for(admin.user), **{field: value})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("expires_at", sorted(EDGE_LOCAL_TIMES))
def test_a_token_expiry_at_the_edge_of_the_calendar_is_a_400(admin, lease, expires_at):
    response = create_token(client_for(admin.user), expires_at=expires_at)
    assert response.status_code == 400
    assert escape(EDGE_LOCAL_TIMES[expires_at]) in response.content.decode()
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    "fields", [{"scopes": ["root"]}, {"scopes": []}, {"name": "n" * 101}, {"scopes": HUGE_ID}]
)
def test_garbage_in_the_token_form_is_a_400(admin, lease, fields):
    assert create_token(client_for(admin.user), **fields).status_code == 400
    assert not ApiToken.objects.exists()


def test_revoking_a_token_that_is_not_an_id_is_a_404(admin):
    client = client_for(admin.user)
    for pk in (HUGE_ID, "9" * 400):
        assert rolled_back(lambda: client.post(f"/tokens/{pk}/revoke/")).status_code == 404  # noqa: B023


# --- the tenant settings page (?tenant=<slug>, its forms) --------------------------------


@pytest.mark.parametrize("slug", ["\x00", "zy\x00", HUGE_ID, "x" * 10_000, "../admin", "%00"])
def test_a_garbage_tenant_on_the_settings_page_is_a_404(admin, slug):
    client = client_for(admin.user)
    assert rolled_back(lambda: client.get("/settings/", {"tenant": slug})).status_code == 404
    data = {"tenant": slug, "action": "rotate", "confirm": "on"}
    assert rolled_back(lambda: client.post("/settings/", data)).status_code == 404


SETTINGS_FORMS = {
    "contacts": {"contact_name": "王工", "contact_email": "noc@example.cn", "contact_phone": ""},
    "webhook": {"webhook_url": "https://93.184.215.14/hook"},
}


@pytest.mark.parametrize(
    ("action", "field"),
    [(action, name) for action, fields in SETTINGS_FORMS.items() for name in fields],
)
@pytest.mark.parametrize("value", NUL_TEXTS)
def test_nul_in_any_settings_field_is_a_400_that_changes_nothing(admin, action, field, value):
    from leases.models import Tenant, TenantSettingsEvent

    before = Tenant.objects.filter(pk=admin.tenant_id).values().get()
    data = {"tenant": admin.tenant.slug, "action": action, **SETTINGS_FORMS[action]}
    data[field] = value
    client = client_for(admin.user)
    assert rolled_back(lambda: client.post("/settings/", data)).status_code == 400
    assert Tenant.objects.filter(pk=admin.tenant_id).values().get() == before
    assert not TenantSettingsEvent.objects.exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"action": "contacts", "contact_name": "n" * 201},
        {"action": "contacts", "contact_email": "e" * 250 + "@x.cn"},
        {"action": "contacts", "contact_phone": "1" * 51},
        {"action": "webhook", "webhook_url": "https://93.184.215.14/" + "p" * 200},
        {"action": "webhook", "webhook_url": "http://[::1"},
        {"action": "webhook", "webhook_url": "javascript:alert(1)"},
        {"action": "rotate", "confirm": "false"},
        {"action": "rotate"},
        {"action": "\x00"},
        {"action": "x" * 10_000},
    ],
)
def test_garbage_in_the_settings_forms_is_a_400(admin, fields):
    from leases.models import TenantSettingsEvent

    client = client_for(admin.user)
    data = {"tenant": admin.tenant.slug, **fields}
    assert rolled_back(lambda: client.post("/settings/", data)).status_code == 400
    assert not TenantSettingsEvent.objects.exists()


def test_a_settings_body_that_is_not_utf8_is_not_a_500(admin):
    client = client_for(admin.user)
    body = f"tenant={admin.tenant.slug}&action=contacts&contact_name=caf%E9&contact_phone=\xff"
    response = rolled_back(
        lambda: client.generic(
            "POST",
            "/settings/",
            body.encode("latin-1"),
            content_type="application/x-www-form-urlencoded",
        )
    )
    assert response.status_code == 400  # the phone "\ufffd" is not a phone number


# --- Django's own forms: login and the language switch -----------------------------


LOGINS = ["/accounts/login/", "/admin/login/"]


@pytest.mark.parametrize("url", LOGINS)
@pytest.mark.parametrize(
    "data",
    [
        {"username": "zy-admin\x00", "password": "x"},
        {"username": "\x00", "password": "\x00"},
        {"username": "zy-admin", "password": "p\x00" * 5000},
        {"username": ["a", "b"], "password": "x"},
    ],
)
def test_login_with_hostile_credentials_is_refused_on_the_form(admin, url, data):
    from django.test import Client

    response = rolled_back(lambda: Client().post(url, data))
    assert response.status_code == 200  # Django's login views show the form again
    assert 'type="password"' in response.content.decode()
    assert "_auth_user_id" not in response.client.session


@pytest.mark.parametrize("url", LOGINS)
def test_a_ten_thousand_character_username_is_refused_and_counted(admin, url):
    # PostgreSQL refused axes' record of this attempt (varchar(255)): a 500 until
    # common.login_attempts cut the name to the column.
    from axes.models import AccessAttempt
    from django.test import Client

    response = Client(HTTP_ACCEPT_LANGUAGE="en").post(
        url, {"username": "u" * 10_000, "password": "x"}
    )
    assert response.status_code == 200
    assert "correct username and password" in response.content.decode()
    attempt = AccessAttempt.objects.get()
    assert attempt.username == "u" * 255 and attempt.failures_since_start == 1


@pytest.mark.parametrize(
    "data",
    [
        {"language": "\x00"},
        {"language": "zh-hans\x00"},
        {"language": "x" * 10_000},
        {"language": "en", "next": "\x00"},
        {"language": "en", "next": "/\x00/"},
        {"language": "en", "next": "https://evil.example/"},
    ],
)
def test_the_language_switch_never_fails_and_never_leaves_the_site(admin, data):
    client = client_for(admin.user)
    response = rolled_back(lambda: client.post("/i18n/setlang/", data))
    assert response.status_code == 302
    assert response["Location"].startswith("/")
    assert "\x00" not in response["Location"]
    language = response.cookies.get(settings.LANGUAGE_COOKIE_NAME)
    assert language is None or language.value in {"en", "zh-hans"}


# --- a month of a lease (?period= and the audit bundle's month) -------------------------

NOT_A_MONTH = "The period must be a month written YYYY-MM"
BAD_MONTHS = {
    "\x00": NOT_A_MONTH,
    "2026-11\x00": NOT_A_MONTH,
    "2026-11\n": NOT_A_MONTH,
    "2026-13": NOT_A_MONTH,
    "\uff12\uff10\uff12\uff16-\uff11\uff11": NOT_A_MONTH,  # full-width digits
    "0000-01": NOT_A_MONTH,
    "9999-12": NOT_A_MONTH,
    HUGE_ID: NOT_A_MONTH,
    "1999-12": "The period must be a month between 2000-01 and 2999-12.",
    "2026-12": "2026-12 has not begun yet; the latest month is 2026-11.",
    "2999-12": "2999-12 has not begun yet; the latest month is 2026-11.",
}


@pytest.mark.parametrize("period", sorted(BAD_MONTHS))
@pytest.mark.parametrize("page", ["", "sla/"])
def test_a_garbage_or_future_month_of_a_lease_is_a_400_that_says_so(admin, lease, page, period):
    response = client_for(admin.user).get(f"/leases/{lease.pk}/{page}", {"period": period})
    assert response.status_code == 400
    assert escape(BAD_MONTHS[period]) in response.content.decode()


@pytest.mark.parametrize("period", ["2026-13", "2026-12", "1999-12", HUGE_ID, "x" * 400])
def test_a_garbage_or_future_audit_month_is_a_400(admin, lease, period):
    client = client_for(admin.user)
    assert client.get(f"/leases/{lease.pk}/audit/{period}.json").status_code == 400
    checkpoint = client.get(f"/leases/{lease.pk}/checkpoint.json", {"period": period})
    assert checkpoint.status_code == 400


# --- the thresholds on the settings page (its forms name a threshold or a lease by id) -----


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "spend_cny", "value": "\x00"},
        {"kind": "spend_cny", "value": "1e300"},
        {"kind": "spend_cny", "value": "NaN"},
        {"kind": "spend_cny", "value": "-5"},
        {"kind": "spend_cny", "value": "0"},
        {"kind": "spend_cny", "value": "9" * 400},
        {"kind": "\x00", "value": "100"},
        {"kind": "everything", "value": "100"},
        {"kind": "spend_cny", "value": "100", "lease": HUGE_ID},
        {"kind": "spend_cny", "value": "100", "lease": "\x00"},
        {"kind": "spend_cny", "value": "100", "lease": "-1"},
    ],
)
def test_garbage_in_the_threshold_form_is_a_400_that_adds_nothing(admin, lease, fields):
    from billing.models import Threshold

    data = {"tenant": admin.tenant.slug, "action": "threshold-add", **fields}
    client = client_for(admin.user)
    assert rolled_back(lambda: client.post("/settings/", data)).status_code == 400
    assert not Threshold.objects.exists()


@pytest.mark.parametrize("pk", [HUGE_ID, "9" * 400, "\x00", "-1", "1.5", "\u0661", ""])
@pytest.mark.parametrize("action", ["threshold-delete", "threshold-enable", "threshold-disable"])
def test_a_garbage_or_foreign_threshold_id_is_a_404(admin, action, pk):
    from decimal import Decimal

    from billing import thresholds

    other = MembershipFactory(role=Role.ADMIN)
    theirs = thresholds.create_threshold(
        tenant=other.tenant, user=other.user, kind="spend_cny", value=Decimal(5)
    )
    client = client_for(admin.user)
    for value in (pk, str(theirs.pk)):
        data = {"tenant": admin.tenant.slug, "action": action, "threshold": value}
        assert rolled_back(lambda: client.post("/settings/", data)).status_code == 404  # noqa: B023
    theirs.refresh_from_db()
    assert theirs.enabled
