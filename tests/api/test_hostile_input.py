"""Hostile input never gets a 500 from the API, on SQLite or on PostgreSQL.

Every write route found in the URLconf is sent bodies a parser chokes on (JSON nested
10,000 levels deep, invalid UTF-8, a body that is not an object, one past the size limit)
and, field by field, values a database or a datetime chokes on (NUL, a lone surrogate,
1e300, 9e999, 2**64, NaN, year 9999, UTC offsets past ±14:00). Every read route is sent
unknown query parameters and NUL; every filter garbage of its kind. Each answer is a 4xx in
the API's one error shape ({"error": {"code", "message", "fields"}}) saying what was wrong.

PostgreSQL is the stricter of the two (its text columns refuse NUL, its bigint stops at
2**63), so run this file against both: DATABASE_URL=sqlite:///... and postgres://...."""

import copy
import io
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import django_filters
import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.urls import resolve, reverse
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend

from accounts.choices import Role
from api.filtersets import IdFilter, InstantRangeFilter
from api.parsers import MAX_DEPTH, StrictJSONParser
from api.throttling import TokenRateThrottle
from leases import services
from tests.api.conftest import build_world
from tests.api.isolation_cases import (
    CASES,
    IPERF3_OUTPUT,
    DetailOf,
    ListOf,
    acceptance_run_of,
    amendment_of,
    dispute_of,
    evidence_of,
    issued_invoice_of,
    key_of,
    threshold_of,
)
from tests.api.test_isolation import api_routes
from tests.conftest import built_once
from tests.factories import at

pytestmark = pytest.mark.django_db

FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="module")
def shared_world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Any]:
    """The two tenants' world, built once for the module's few hundred tests (a few seconds
    a build): each test writes in its own savepoint, rolled back after it
    (tests.conftest.built_once), so no write reaches the next test."""
    var_dir = tmp_path_factory.mktemp("hostile-var")

    def build() -> Any:
        with override_settings(VAR_DIR=var_dir, PASSWORD_HASHERS=FAST_HASHERS):
            return var_dir, build_world()

    with built_once(django_db_blocker, build) as built:
        yield built


@pytest.fixture
def world(db, shared_world):  # type: ignore[no-untyped-def]
    """A copy of the shared world per test (one that changes an object in memory changes
    only its own), and what its build left in its VAR_DIR, as if built in this test's."""
    var_dir, built = shared_world
    shutil.copytree(var_dir, settings.VAR_DIR, dirs_exist_ok=True)
    return copy.deepcopy(built)


@pytest.fixture(autouse=True)
def _no_rate_limit(monkeypatch):
    """A few hundred requests per test: the per-token budget is not what is tested here."""
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"api": "1000000/min"})


def error_of(response, status: int | None = None) -> dict:  # type: ignore[no-untyped-def]
    """The error of a 4xx answer (of ``status`` when given), checked for the one shape."""
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    if status is not None:
        assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "fields"}, body
    assert body["error"]["message"].strip(), body
    return body["error"]


def rolled_back(call: Callable[[], Any]) -> Any:
    """The answer to one request, with whatever it wrote undone, so that every hostile
    value meets the same state (a lease created by one case would make the next one fail
    for its duplicate reference instead of its own value)."""
    with transaction.atomic():
        response = call()
        transaction.set_rollback(True)
    return response


# --- the write routes -------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """How to call a write route: with what method, on which object, as whom, and a body
    it accepts (empty for actions that take none)."""

    method: str
    kwargs: Callable[[Any], dict[str, Any]] = lambda world: {}
    body: Callable[[Any], dict[str, Any]] | None = None
    writer: Callable[[Any], Any] = lambda world: world.staff


def _site(world: Any) -> dict[str, Any]:
    return {"pk": world.alpha.nodes[0].leaf_switch.fabric.site_id}


def _fabric(world: Any) -> dict[str, Any]:
    return {"pk": world.alpha.nodes[0].leaf_switch.fabric_id}


def _lease(world: Any) -> dict[str, Any]:
    return {"pk": world.alpha.lease.pk}


def _dispute(world: Any) -> dict[str, Any]:
    return {"pk": dispute_of(world.alpha).pk}


def _october_draft(world: Any) -> dict[str, Any]:
    """Alpha's October invoice, a draft (empty: the lease starts in November)."""
    from billing import invoicing

    draft = invoicing.draft_invoice(
        tenant=world.alpha.tenant, period="2026-10", now=at("2026-11-01 01:00")
    )
    return {"pk": draft.pk}


def _incident(world: Any) -> dict[str, Any]:
    return {"pk": world.alpha.incident.pk}


def _issued_invoice(world: Any) -> dict[str, Any]:
    return {"pk": issued_invoice_of(world.alpha).pk}


def _issued_today(world: Any) -> dict[str, Any]:
    """Alpha's September invoice (empty: nothing blocks it), issued now, once: a payment
    dated today is then valid."""
    side = world.alpha
    if getattr(side, "issued_today", None) is None:
        from billing import invoicing
        from billing import services as billing_services

        draft = invoicing.draft_invoice(
            tenant=side.tenant, period="2026-09", now=at("2026-10-01 01:00")
        )
        side.issued_today = billing_services.issue_invoice(invoice=draft)
    return {"pk": side.issued_today.pk}


def _today(world: Any) -> dict[str, Any]:
    zone = ZoneInfo(world.alpha.tenant.time_zone)
    return {"paid_on": timezone.now().astimezone(zone).date().isoformat()}


def _admin(world: Any) -> Any:
    return world.alpha.members[Role.ADMIN]


def _registration(world: Any) -> dict[str, Any]:
    """A fresh key of alpha, its registration signed by the key as alpha's admin makes it."""
    from gpulease_verify import cosign as rules
    from leases import cosign

    private = rules.generate()
    public = rules.public_key_text(private.public_key())
    now = timezone.now()
    content = cosign.registration_content(
        tenant=world.alpha.tenant, user=_admin(world), public_key=public, at=now
    )
    return {
        "tenant": "alpha",
        "public_key": public,
        "signed_at": content["at"],
        "signature": rules.sign(private, content),
        "label": "laptop",
    }


def _signed_acknowledgement(world: Any) -> dict[str, Any]:
    """Alpha's admin acknowledges with a signature by alpha's key (registered here, once:
    the routes after this one in WRITES take no unsigned tenant record)."""
    from gpulease_verify import cosign as rules

    key_of(world.alpha)
    content = services.acknowledgement_content(
        amendment=amendment_of(world.alpha),
        user=_admin(world),
        reason="Agreed.",
        at=timezone.now(),
    )
    return {
        "reason": "Agreed.",
        "signed_at": content["at"],
        "signature": rules.sign(world.alpha.private_key, content),
    }


def _dispute_claim(world: Any) -> dict[str, Any]:
    return {
        "lease": world.alpha.lease.pk,
        "reason": "Our job saturated the link.",
        "probe_run": world.alpha.runs[1].pk,
        "incident": world.alpha.incident.pk,
        "invoice": world.alpha.invoice.pk,
        "evidence": [evidence_of(world.alpha).pk],
    }


def _signed_dispute(world: Any) -> dict[str, Any]:
    """Alpha's claim, signed by alpha's key as its admin opens it."""
    from billing.evidence import dispute_content
    from gpulease_verify import cosign as rules

    key_of(world.alpha)
    side = world.alpha
    content = dispute_content(
        lease=side.lease,
        user=_admin(world),
        reason="Our job saturated the link.",
        at=timezone.now(),
        probe_run=side.runs[1],
        incident=side.incident,
        invoice=side.invoice,
        evidence=[evidence_of(side)],
    )
    return {
        **_dispute_claim(world),
        "signed_at": content["at"],
        "signature": rules.sign(side.private_key, content),
    }


def _acceptance(world: Any) -> dict[str, Any]:
    """Alpha's acceptance sign-off, signed by alpha's key."""
    from benchmarks import acceptance
    from gpulease_verify import cosign as rules

    key_of(world.alpha)
    run = acceptance_run_of(world.alpha)
    content = acceptance.acceptance_content(run=run, user=_admin(world), at=timezone.now())
    return {
        "run": run.pk,
        "signed_at": content["at"],
        "signature": rules.sign(world.alpha.private_key, content),
    }


FABRIC = {
    "site": "site-alpha",
    "name": "Spine B",
    "technology": "roce",
    "port_speed_gbps": 400,
    "topology": "fat_tree",
    "oversubscription": "2.00",
    "adaptive_routing": False,
}

TERMS = {
    "contracted_bandwidth_gbps": "100",
    "technology": "roce",
    "sla_threshold_percent": "95",
    "collective_busbw_floor_gbps": "80",
    "latency_ceiling_us": "5.5",
    "probe_cadence_s": {"link": 300},
    "incident_after_violations": 3,
    "maintenance_windows": [{"weekday": 6, "start": "02:00", "end": "04:00", "note": "BIOS"}],
    "credit_tiers": [{"below_percent": "95", "credit_percent": "10"}],
    "credit_cap_percent": "30",
    "billing_mode": "monthly",
    "node_rent_per_month": "45000.00",
    "network_fee_per_month": "6000.00",
    "tax_rate_percent": "6",
}

LEASE = {
    "tenant": "alpha",
    "reference": "ALPHA-2",
    "name": "Second lease",
    "notes": "Two nodes.",
    "starts_at": "2027-01-01T00:00:00+08:00",
    "ends_at": "2027-07-01T00:00:00+08:00",
    "probes_enabled": True,
    "terms": TERMS,
    "nodes": [],
}


def _alertmanager(world: Any) -> Any:
    """Alertmanager's webhook authenticates with ALERTMANAGER_TOKEN, not as a user."""
    from monitoring.views import AlertmanagerClient

    return AlertmanagerClient()


ALERTMANAGER_PAYLOAD = {
    "version": "4",
    "status": "firing",
    "receiver": "gpulease",
    "groupKey": '{}:{alertname="NodeDown"}',
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "NodeDown", "instance": "elsewhere:9100"},
            "annotations": {"summary": "down"},
            "startsAt": "2026-11-10T08:00:00Z",
            # No endsAt: Alertmanager sends Go's zero time 0001-01-01T00:00:00Z for "not
            # ended", which the intake must take (tests/monitoring/test_alertmanager.py).
            "generatorURL": "http://prometheus:9090/graph",
            "fingerprint": "0123456789abcdef",
        }
    ],
}

WRITES: dict[str, Write] = {
    "api:alertmanager-alerts": Write(
        "post", body=lambda w: ALERTMANAGER_PAYLOAD, writer=_alertmanager
    ),
    "api:site-list": Write(
        "post", body=lambda w: {"name": "Foshan", "code": "fs", "city": "Foshan", "region": "GD"}
    ),
    "api:site-detail": Write("patch", _site, lambda w: {"name": "Alpha DC", "city": "Zhuhai"}),
    "api:fabric-list": Write("post", body=lambda w: FABRIC),
    "api:fabric-detail": Write("patch", _fabric, lambda w: {"name": "C", "port_speed_gbps": 200}),
    "api:lease-list": Write("post", body=lambda w: LEASE),
    "api:lease-activate": Write("post", _lease),
    "api:lease-end": Write("post", _lease),
    "api:lease-cancel": Write("post", _lease),
    "api:termsamendment-list": Write(
        "post",
        body=lambda w: {
            "lease": w.alpha.lease.pk,
            "effective_from": "2026-11-10T00:00:00+08:00",
            "changes": {"credit_cap_percent": "40"},
            "reason": "Signed on the 10th, recorded late.",
        },
    ),
    "api:termsamendment-acknowledge": Write(
        "post", lambda w: {"pk": amendment_of(w.alpha).pk}, _signed_acknowledgement, writer=_admin
    ),
    "api:termsamendment-signing-content": Write(
        "post",
        lambda w: {"pk": amendment_of(w.alpha).pk},
        lambda w: {"reason": "Agreed."},
        writer=_admin,
    ),
    "api:tenantkey-list": Write("post", body=_registration, writer=_admin),
    "api:tenantkey-signing-content": Write(
        "post",
        body=lambda w: {key: _registration(w)[key] for key in ("tenant", "public_key")},
        writer=_admin,
    ),
    "api:tenantkey-revoke": Write("post", lambda w: {"pk": key_of(w.alpha).pk}, writer=_admin),
    "api:lease-acceptance-signing-content": Write(
        "post", _lease, lambda w: {"run": acceptance_run_of(w.alpha).pk}, writer=_admin
    ),
    "api:lease-acceptance-sign-off": Write("post", _lease, _acceptance, writer=_admin),
    "api:lease-run-now": Write("post", _lease, lambda w: {"kinds": ["link"]}, writer=_admin),
    "api:apitoken-list": Write(
        "post",
        body=lambda w: {
            "name": "ci",
            "scopes": ["read"],
            "expires_at": (timezone.now() + timedelta(days=30)).isoformat(),
            "user": "alpha-viewer",
        },
        writer=_admin,
    ),
    "api:apitoken-revoke": Write("post", lambda w: {"pk": w.alpha.token.pk}, writer=_admin),
    "api:lease-evidence": Write(
        "post",
        _lease,
        lambda w: {
            "tool": "iperf3",
            "raw_output": IPERF3_OUTPUT.read_text(),
            "nodes": [node.hostname for node in w.alpha.nodes],
            "measured_at": "2026-11-05T10:00:00+08:00",
            "note": "our own run",
        },
        writer=_admin,
    ),
    "api:dispute-list": Write("post", body=_signed_dispute, writer=_admin),
    "api:dispute-signing-content": Write("post", body=_dispute_claim, writer=_admin),
    "api:dispute-accept": Write(
        "post", _dispute, lambda w: {"reason": "Confirmed.", "credit_cny": "100.00"}
    ),
    "api:dispute-reject": Write("post", _dispute, lambda w: {"reason": "Not ours."}),
    "api:invoice-issue": Write("post", _october_draft, lambda w: {"force": True, "reason": "x"}),
    "api:invoice-void": Write("post", _issued_invoice, lambda w: {"reason": "Wrong buyer."}),
    "api:incident-acknowledge": Write("post", _incident, lambda w: {"note": "On it."}),
    "api:incident-mitigate": Write("post", _incident, lambda w: {"note": "Traffic moved."}),
    "api:invoice-mark-paid": Write("post", _issued_today, _today),
    "api:threshold-list": Write(
        "post",
        body=lambda w: {"tenant": "alpha", "kind": "usage_gb", "value": "150.00", "lease": None},
        writer=_admin,
    ),
    "api:threshold-detail": Write(
        "patch",
        lambda w: {"pk": threshold_of(w.alpha).pk},
        lambda w: {"value": "120.50", "enabled": False},
        writer=_admin,
    ),
    "api:invoice-credit-notes": Write(
        "post",
        _issued_invoice,
        lambda w: {"reason": "Overstated.", "lines": [{"position": 1, "amount": "1.00"}]},
    ),
}
NO_BODY = sorted(name for name, write in WRITES.items() if write.body is None)
WITH_BODY = sorted(set(WRITES) - set(NO_BODY))


def test_every_write_route_is_here():
    writes = {route.name for route in api_routes() if {"post", "put", "patch"} & set(route.methods)}
    assert writes == set(WRITES), "add the missing write routes to WRITES with a valid body"


def send(world, client_for, name: str, raw: bytes | str, **extra):  # type: ignore[no-untyped-def]
    write = WRITES[name]
    client = client_for(write.writer(world))
    url = reverse(name, kwargs=write.kwargs(world))
    return rolled_back(
        lambda: client.generic(
            write.method.upper(), url, raw, content_type="application/json", **extra
        )
    )


def test_the_valid_bodies_here_are_accepted(world, client_for):
    """The hostile variants below start from these bodies, so each must be accepted as is:
    otherwise a 400 below could be about something else than the hostile value."""
    for name in WITH_BODY:
        response = send(world, client_for, name, json.dumps(WRITES[name].body(world)))  # type: ignore[misc]
        assert response.status_code in (200, 201, 202), (name, response.content[:300])


# --- whole bodies -------------------------------------------------------------------------

DEPTH = 10_000

NOT_AN_OBJECT = {
    "an array": "[1, 2, 3]",
    "an empty array": "[]",
    "a string": '"colour"',
    "a number": "42",
    "null": "null",
    "true": "true",
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_json_nested_ten_thousand_levels_deep_is_a_400(world, client_for, name):
    for raw in ("[" * DEPTH + "]" * DEPTH, '{"a":' * DEPTH + "1" + "}" * DEPTH):
        error = error_of(send(world, client_for, name, raw), 400)
        assert error["code"] == "parse_error"
        assert error["message"] == "The JSON is nested more than 32 levels deep."


def test_json_nested_just_past_the_limit_is_a_400_and_at_it_a_plain_refusal(world, client_for):
    # Deep enough to refuse without the RecursionError json.loads raises near 1,000 levels.
    too_deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    error = error_of(send(world, client_for, "api:lease-run-now", too_deep), 400)
    assert error["message"] == "The JSON is nested more than 32 levels deep."
    at_limit = '{"kinds": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    error = error_of(send(world, client_for, "api:lease-run-now", at_limit), 400)
    assert error["code"] == "invalid" and "kinds" in error["fields"]


@pytest.mark.parametrize("name", sorted(WRITES))
def test_invalid_utf8_is_a_400_saying_where(world, client_for, name):
    raw = b'{"note": "caf\xe9"}'  # Latin-1 é at offset 13; UTF-8 wants a continuation after it
    error = error_of(send(world, client_for, name, raw), 400)
    assert error["code"] == "parse_error"
    assert error["message"] == (
        "The body is not valid UTF-8: invalid continuation byte at offset 13."
    )


@pytest.mark.parametrize("name", sorted(WRITES))
@pytest.mark.parametrize("kind", sorted(NOT_AN_OBJECT))
def test_a_body_that_is_not_an_object_is_a_400(world, client_for, name, kind):
    error = error_of(send(world, client_for, name, NOT_AN_OBJECT[kind]), 400)
    assert error["code"] == "invalid"
    assert error["message"] == "The body must be a JSON object."


@pytest.mark.parametrize("name", NO_BODY)
def test_an_action_that_takes_no_body_refuses_one_by_key(world, client_for, name):
    error = error_of(send(world, client_for, name, '{"reason": "because", "force": true}'), 400)
    assert error["fields"] == {"force": ["Unknown field."], "reason": ["Unknown field."]}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_body_past_the_limit_is_a_413(world, client_for, name):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    raw = json.dumps({"note": "x" * limit})
    error = error_of(send(world, client_for, name, raw), 413)
    assert error["code"] == "payload_too_large"
    assert f"the limit is {limit} bytes" in error["message"]


def test_the_parser_stops_reading_at_the_limit_when_no_length_was_sent(settings):
    # Behind a proxy that streams a chunked upload, the middleware sees no Content-Length.
    from api.exceptions import PayloadTooLarge

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    stream = io.BytesIO(json.dumps({"note": "x" * 5000}).encode())
    with pytest.raises(PayloadTooLarge, match="larger than 1000 bytes"):
        StrictJSONParser().parse(stream, "application/json", {})
    assert stream.tell() == 1001  # read one byte past the limit, not the whole body


# --- field by field ---------------------------------------------------------------------

Path = tuple[str | int, ...]


def leaves(body: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every scalar of a JSON body with its path; an empty list or object counts as one."""
    children = (
        body.items()
        if isinstance(body, dict)
        else enumerate(body)
        if isinstance(body, list)
        else None
    )
    if not children and path:
        yield path, body
        return
    for key, value in children or ():
        yield from leaves(value, (*path, key))


SENTINEL = "__hostile__"


def with_raw(body: Any, path: Path, raw_value: str) -> str:
    """``body`` as JSON text with the value at ``path`` replaced by ``raw_value`` as written
    (9e999 and NaN are what a client can send, not what json.dumps writes)."""
    copy = json.loads(json.dumps(body))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = SENTINEL
    return json.dumps(copy, ensure_ascii=False).replace(json.dumps(SENTINEL), raw_value, 1)


def looks_like_instant(value: Any) -> bool:
    return isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T"


def looks_like_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


# Raw JSON: 9e999 is what a client can send; Python's json reads it as infinity.
ABSURD_NUMBERS = ["1e300", "9e999", "-9e999", "-1", "NaN", "Infinity", str(2**64), "1" * 5000]
ABSURD_NUMBER_TEXTS = ['"1e300"', '"9e999"', '"-1"', '"NaN"', '"Infinity"', f'"{2**64}"']
# Years a filter may name (an open-ended "before the end of time") but a write may not.
LATE_INSTANTS = ["9999-12-31T23:59:59+14:00", "9999-12-31T23:59:59Z"]
EDGE_INSTANTS = [
    *LATE_INSTANTS,
    "9999-12-31T23:59:59-14:00",  # 10000-01-01 in UTC: past datetime's range
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+14:00",  # year 0 in UTC
    "2027-01-01T00:00:00+15:00",
    "2027-01-01T00:00:00-23:59",
    "2027-02-30T00:00:00Z",
]
NUL_TEXTS = ["\x00", "a\x00b", "x" * 50 + "\x00"]
LONE_SURROGATE = '"caf\\ud800"'  # raw JSON: json.loads takes it, UTF-8 cannot hold it


def hostile_values(value: Any) -> list[str]:
    """Raw JSON texts to put in place of a valid ``value``."""
    nul = [*(json.dumps(text) for text in NUL_TEXTS), LONE_SURROGATE]
    if looks_like_instant(value):
        return [json.dumps(text) for text in EDGE_INSTANTS] + nul
    if isinstance(value, str) and looks_like_number(value):  # a decimal, written as text
        return ABSURD_NUMBER_TEXTS + ABSURD_NUMBERS + nul
    if isinstance(value, int) and not isinstance(value, bool):
        return [*ABSURD_NUMBERS, '"1e5"', "1.5", *nul]
    if isinstance(value, str):
        return [*nul, "9e999", "NaN", "[]", "{}"]
    if isinstance(value, bool):
        return ['"yes\\u0000"', "2", "NaN"]
    return [*nul, "9e999"]  # an empty list or object


def refusal_problem(response, field: str) -> str | None:  # type: ignore[no-untyped-def]
    """Why ``response`` is not a 4xx refusal of ``field``, or None."""
    try:
        error = error_of(response)
    except AssertionError as exc:
        return str(exc)[:300]
    if error["code"] == "parse_error" or field in error["fields"]:
        return None
    if "non_field_errors" in error["fields"]:  # a rule across fields (a model constraint)
        return None
    return f"the error does not name {field}: {error}"[:300]


@pytest.mark.parametrize("name", WITH_BODY)
def test_hostile_field_values_are_a_4xx_naming_the_field(world, client_for, name):
    body = WRITES[name].body(world)  # type: ignore[misc]
    problems = []
    for path, value in leaves(body):
        for raw_value in hostile_values(value):
            response = send(world, client_for, name, with_raw(body, path, raw_value))
            problem = refusal_problem(response, str(path[0]))
            if problem:
                problems.append(f"{'.'.join(map(str, path))} = {raw_value[:30]}: {problem}")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.mark.parametrize("name", WITH_BODY)
def test_nul_in_a_key_is_a_400_naming_its_field(world, client_for, name):
    body = dict(WRITES[name].body(world))  # type: ignore[misc]
    first = next(iter(body))
    body[first + "\x00"] = body.pop(first)
    error = error_of(send(world, client_for, name, json.dumps(body)), 400)
    assert error["fields"] == {first + "\x00": ["Text may not contain the NUL character (U+0000)."]}


def test_a_nul_deep_inside_is_refused_under_its_top_level_field(world, client_for):
    body = json.loads(json.dumps(LEASE))
    body["terms"]["probe_cadence_s"] = {"link\x00": 300}  # a key SQLite would store as is
    error = error_of(send(world, client_for, "api:lease-list", json.dumps(body)), 400)
    assert error["fields"] == {"terms": ["Text may not contain the NUL character (U+0000)."]}
    assert error["message"] == "terms: Text may not contain the NUL character (U+0000)."


SURROGATE = (
    "Text may not contain a lone surrogate (U+D800): half of a UTF-16 pair, not a character."
)


def test_a_lone_surrogate_is_a_400_naming_its_field_on_every_write_route(world, client_for):
    """json.loads takes "\\ud800" without its pair; no UTF-8 text can hold it, neither the
    database nor the error that names it (a key): each is refused by name, as text. (Every
    field of every valid body gets one too: hostile_values.)"""
    for name in sorted(WRITES):
        error = error_of(send(world, client_for, name, '{"note": "caf\\ud800"}'), 400)
        assert error["fields"] == {"note": [SURROGATE]}, name
        error = error_of(send(world, client_for, name, '{"caf\\ud800": 1}'), 400)
        assert error["fields"] == {"caf\\ud800": [SURROGATE]}, name
        error = error_of(send(world, client_for, name, '["\\udfff"]'), 400)
        assert error["message"] == SURROGATE.replace("D800", "DFFF"), name


def test_a_lone_surrogate_deep_inside_is_refused_under_its_top_level_field(world, client_for):
    body = json.dumps(LEASE).replace('"link"', '"\\udbff"')  # a key in terms.probe_cadence_s
    error = error_of(send(world, client_for, "api:lease-list", body), 400)
    assert error["fields"] == {"terms": [SURROGATE.replace("D800", "DBFF")]}


def test_a_surrogate_pair_is_one_character_and_taken(world, client_for):
    body = json.dumps(LEASE | {"name": "Rocket \U0001f680"}, ensure_ascii=True)
    assert "\\ud83d\\ude80" in body
    response = send(world, client_for, "api:lease-list", body)
    assert response.status_code == 201, response.content[:300]
    assert response.json()["name"] == "Rocket \U0001f680"


ONLY = "only letters, digits, '.', '_' and '-' are allowed"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("A\r\nB", f"contract reference 'A\\r\\nB' has '\\r'; {ONLY}"),
        ("ALPHA-2\n", f"contract reference 'ALPHA-2\\n' has '\\n'; {ONLY}"),
        ("=HYPERLINK(1)", f"contract reference '=HYPERLINK(1)' has '='; {ONLY}"),
        ("ALPHA 2", f"contract reference 'ALPHA 2' has ' '; {ONLY}"),
        ("合同-2", f"contract reference '合同-2' has '合'; {ONLY}"),
        ("-rf", "contract reference '-rf' must start with a letter or a digit"),
        (".hidden", "contract reference '.hidden' must start with a letter or a digit"),
        ("A" * 65, "Ensure this field has no more than 64 characters."),
    ],
)
def test_a_reference_outside_the_pattern_is_a_400_saying_why(world, client_for, reference, message):
    body = json.dumps(LEASE | {"reference": reference})
    error = error_of(send(world, client_for, "api:lease-list", body), 400)
    assert list(error["fields"]) == ["reference"]
    assert message in error["fields"]["reference"], error


def test_a_reference_at_the_edges_of_the_pattern_is_taken(world, client_for):
    for reference in ("A", "9.2026_x-1", "Z" * 64):
        body = json.dumps(LEASE | {"reference": reference})
        response = send(world, client_for, "api:lease-list", body)
        assert response.status_code == 201, (reference, response.content[:300])
        assert response.json()["reference"] == reference


@pytest.mark.parametrize(
    ("instant", "message"),
    [
        ("2027-01-01T00:00:00+15:00", "A UTC offset is at most ±14:00."),
        ("2027-01-01T00:00:00-23:59", "A UTC offset is at most ±14:00."),
        ("9999-12-31T23:59:59-14:00", "Give an instant between 2000 and 2999."),
        ("9999-12-31T23:59:59+14:00", "Give an instant between 2000 and 2999."),
        ("0001-01-01T00:00:00Z", "Give an instant between 2000 and 2999."),
        ("2999-12-31T23:59:59-01:00", "Give an instant between 2000 and 2999."),  # 3000 in UTC
    ],
)
def test_an_instant_out_of_bounds_says_which_bound(world, client_for, instant, message):
    body = json.dumps(LEASE | {"starts_at": instant, "ends_at": None})
    error = error_of(send(world, client_for, "api:lease-list", body), 400)
    assert error["fields"] == {"starts_at": [message]}


def test_the_last_offsets_on_earth_are_taken(world, client_for):
    # Kiribati's Line Islands are UTC+14:00; Baker Island is UTC-12:00.
    for starts_at in ("2027-01-01T00:00:00+14:00", "2027-01-01T00:00:00-12:00"):
        body = json.dumps(LEASE | {"starts_at": starts_at, "ends_at": None})
        response = send(world, client_for, "api:lease-list", body)
        assert response.status_code == 201, response.content[:300]


# --- query parameters -----------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    name: str
    url: str
    query: dict[str, str]
    listing: bool


def reads(world: Any) -> list[Read]:
    """Every GET route of the API, on alpha's objects (isolation_cases knows how to reach
    each one)."""
    found = []
    for route in api_routes():
        if "get" not in route.methods:
            continue
        case = CASES[route.name]
        kwargs = case.kwargs(world.alpha) if isinstance(case, DetailOf) else {}
        query = dict(getattr(case, "query", {}))
        found.append(
            Read(route.name, reverse(route.name, kwargs=kwargs), query, isinstance(case, ListOf))
        )
    return found


def get(client, read: Read, **query: str):  # type: ignore[no-untyped-def]
    return rolled_back(lambda: client.get(read.url, {**read.query, **query}))


def test_an_unknown_query_parameter_is_a_400_naming_it_on_every_read_route(world, client_for):
    client = client_for(world.staff)
    for read in reads(world):
        for name in ("colour", "leese", "lease\x00", "\x00"):
            error = error_of(get(client, read, **{name: "1"}), 400)
            assert error["fields"] == {name: ["Unknown query parameter."]}, read.name


def test_nul_in_a_known_query_parameter_is_a_4xx_on_every_read_route(world, client_for):
    client = client_for(world.staff)
    problems = []
    for read in reads(world):
        for name in [*read.query, *(["page", "page_size"] if read.listing else []), "format"]:
            for value in ("\x00", "2026-11\x00"):
                response = get(client, read, **{name: value})
                try:
                    error_of(response)
                except AssertionError as exc:
                    problems.append(f"{read.name} ?{name}={value!r}: {exc}"[:300])
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def filters_of(url: str) -> dict[str, Any]:
    """The django-filter filters the view behind ``url`` applies to its list."""
    view = resolve(url).func
    cls = view.cls
    if not any(issubclass(backend, DjangoFilterBackend) for backend in cls.filter_backends):
        return {}
    filterset = DjangoFilterBackend().get_filterset_class(cls, cls.queryset)
    return dict(filterset.base_filters) if filterset else {}


# The list routes with filters; a new one must show up here (and in garbage_for).
FILTERED_LISTS = {
    "api:tenant-list",
    "api:site-list",
    "api:fabric-list",
    "api:node-list",
    "api:lease-list",
    "api:proberun-list",
    "api:incident-list",
    "api:invoice-list",
    "api:creditnote-list",
    "api:voucher-list",
    "api:apitoken-list",
    "api:dispute-list",
}
GARBAGE_IDS = [
    "abc",
    "99999999999999999999",
    str(2**63),
    "-1",
    "0",
    "1e5",
    "1.5",
    "NaN",
    "Infinity",
]


def garbage_for(name: str, item: Any) -> dict[str, list[str]]:
    """Parameter -> values that must be refused, by the kind of filter."""
    nul = ["\x00", "1\x00", "alpha\x00"]
    if isinstance(item, InstantRangeFilter):
        values = [
            *(value for value in EDGE_INSTANTS if value not in LATE_INSTANTS),
            "yesterday",
            "2026-11-02 10:00:00+99:00",
            *nul,
        ]
        return {f"{name}_after": values, f"{name}_before": values}
    if isinstance(item, IdFilter):
        return {name: GARBAGE_IDS + nul}
    if isinstance(item, django_filters.ChoiceFilter):
        return {name: ["teleport", "PASS", *nul]}
    if isinstance(item, django_filters.UUIDFilter):
        return {name: ["not-a-uuid", "1" * 33, *nul]}
    if isinstance(item, django_filters.CharFilter):
        return {name: nul}
    raise AssertionError(f"no garbage for {type(item).__name__} {name}: add its kind here")


def test_garbage_in_every_filter_is_a_400_naming_it(world, client_for):
    client = client_for(world.staff)
    problems, filtered = [], set()
    for read in reads(world):
        if not read.listing:
            continue
        for name, item in filters_of(read.url).items():
            filtered.add(read.name)
            for parameter, values in garbage_for(name, item).items():
                for value in values:
                    response = get(client, read, **{parameter: value})
                    try:
                        error = error_of(response, 400)
                        assert name in error["fields"], error
                    except AssertionError as exc:
                        problems.append(f"{read.name} ?{parameter}={value!r}: {exc}"[:300])
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    assert filtered == FILTERED_LISTS


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1e5", "NaN", "\x00", "99999999999999999999"])
def test_a_garbage_page_size_is_a_400(world, client_for, value):
    client = client_for(world.alpha.members[Role.VIEWER])
    for url in ("/api/v1/leases/", "/api/v1/probe-runs/"):
        error = error_of(client.get(url, {"page_size": value}), 400)
        assert error["fields"] == {"page_size": ["Give a whole number of rows, 1 or more."]}


def test_a_page_size_past_the_maximum_is_cut_to_it(world, client_for, monkeypatch):
    from api.pagination import SlotCursorPagination

    monkeypatch.setattr(SlotCursorPagination, "max_page_size", 4)
    response = client_for(world.staff).get("/api/v1/probe-runs/", {"page_size": "5000"})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 4  # of the 6 runs of both tenants


@pytest.mark.parametrize("pk", ["99999999999999999999", str(2**63), "abc", "1e5", "-1", "0"])
def test_an_id_out_of_range_in_the_path_is_a_404(world, client_for, pk):
    client = client_for(world.staff)
    for route in ("leases", "nodes", "probe-runs", "disputes", "evidence", "api-tokens"):
        error = error_of(client.get(f"/api/v1/{route}/{pk}/"), 404)
        assert error["code"] == "not_found"
    for url in (f"/api/v1/leases/{pk}/audit/?period=2026-11", f"/api/v1/leases/{pk}/evidence/"):
        response = client.get(url)
        assert response.status_code == 404, (url, response.content[:200])


# --- a filter must not reveal another tenant's ids ------------------------------------


def test_a_node_that_moved_between_tenants_reveals_neither_lease_through_the_filter(
    world, client_for
):
    alpha, beta = world.alpha, world.beta
    moved = alpha.nodes[1]  # alpha-n2 serves ALPHA-1 until the 10th, then BETA-1
    services.release_node(assignment=alpha.lease.assignments.get(node=moved), at=at("2026-11-10"))
    services.assign_node(lease=beta.lease, node=moved, assigned_from=at("2026-11-10"))

    def hostnames(side, lease_pk):  # type: ignore[no-untyped-def]
        client = client_for(side.members[Role.VIEWER])
        response = client.get("/api/v1/nodes/", {"lease": lease_pk})
        assert response.status_code == 200, response.content[:300]
        return sorted(row["hostname"] for row in response.json()["results"])

    # Each tenant still sees the moved node under its own lease...
    assert hostnames(alpha, alpha.lease.pk) == ["alpha-n1", "alpha-n2"]
    assert hostnames(beta, beta.lease.pk) == ["alpha-n2", "beta-n1", "beta-n2"]
    # ...and the other tenant's lease id answers exactly what an unused id answers.
    assert hostnames(alpha, 2**62) == []
    assert hostnames(alpha, beta.lease.pk) == []
    assert hostnames(beta, alpha.lease.pk) == []


# --- credentials ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        "Bearer gpl_abc\x00defg_secret",  # a NUL inside the 8-character prefix
        "Bearer gpl_\x00\x00\x00\x00\x00\x00\x00\x00_secret",
        "Bearer gpl_" + "a" * 10_000,
        "Bearer gpl_caf\xe9caf\xe9_secret",  # Latin-1, as WSGI hands over header bytes
        "Bearer gpl_12345678_" + "\x00" * 43,
        "Token \x00",
        "Bearer",
        "Bearer one two",
    ],
)
def test_a_hostile_authorization_header_is_a_401(db, header):
    from django.test import Client

    response = Client(HTTP_ACCEPT_LANGUAGE="en").get("/api/v1/leases/", HTTP_AUTHORIZATION=header)
    error = error_of(response, 401)
    assert error["code"] == "authentication_failed"
