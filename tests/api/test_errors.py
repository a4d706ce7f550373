"""Bad input answers 4xx in one JSON shape, {"error": {"code", "message", "fields"}},
never 500: malformed JSON, unknown fields, wrong types, oversized bodies, bad dates, bad
periods, and the services' own refusals."""

import pytest

from accounts.choices import Role

pytestmark = pytest.mark.django_db


def error_of(response, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["message"]
    return body["error"]


@pytest.fixture
def staff(world, client_for):
    return client_for(world.staff)


def valid_lease(**changes):  # type: ignore[no-untyped-def]
    body = {
        "tenant": "alpha",
        "reference": "ALPHA-2",
        "starts_at": "2027-01-01T00:00:00+08:00",
        "terms": {
            "contracted_bandwidth_gbps": "100",
            "technology": "roce",
            "billing_mode": "monthly",
        },
    }
    body.update(changes)
    return body


def test_malformed_json_is_a_400(staff):
    response = staff.generic(
        "POST", "/api/v1/leases/", '{"tenant": "alpha",', content_type="application/json"
    )
    error = error_of(response, 400)
    assert error["code"] == "parse_error"
    assert "not valid JSON" in error["message"]


def test_nan_is_not_json(staff):
    response = staff.generic(
        "POST", "/api/v1/sites/", '{"name": NaN}', content_type="application/json"
    )
    assert error_of(response, 400)["code"] == "parse_error"


def test_a_body_that_is_not_an_object_is_a_400(staff):
    error = error_of(staff.post("/api/v1/leases/", [1, 2], format="json"), 400)
    assert error["code"] == "invalid"


def test_unknown_fields_are_refused_by_name(staff):
    error = error_of(staff.post("/api/v1/leases/", valid_lease(colour="blue"), format="json"), 400)
    assert error["fields"] == {"colour": ["Unknown field."]}
    nested = valid_lease()
    nested["terms"]["discount"] = "5"
    error = error_of(staff.post("/api/v1/leases/", nested, format="json"), 400)
    assert error["fields"] == {"terms": {"discount": ["Unknown field."]}}
    assert error["message"].startswith("terms")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"starts_at": "tomorrow"}, "starts_at"),
        ({"starts_at": 12}, "starts_at"),
        ({"probes_enabled": "perhaps"}, "probes_enabled"),
        ({"nodes": ["one"]}, "nodes"),
        ({"nodes": [10**12]}, "nodes"),
        ({"tenant": "no-such-tenant"}, "tenant"),
        ({"terms": "fast"}, "terms"),
        ({"reference": ["ALPHA"]}, "reference"),
    ],
)
def test_wrong_types_name_the_field(staff, changes, field):
    error = error_of(staff.post("/api/v1/leases/", valid_lease(**changes), format="json"), 400)
    assert error["code"] == "invalid"
    assert field in error["fields"]


@pytest.mark.parametrize(
    "terms",
    [
        {"probe_cadence_s": {"link": 5}},
        {"probe_cadence_s": {"teleport": 300}},
        {"credit_tiers": [{"below_percent": "NaN", "credit_percent": "10"}]},
        {"credit_tiers": [{"below_percent": "150", "credit_percent": "10"}]},
        {"maintenance_windows": [{"weekday": 9, "start": "02:00", "end": "04:00"}]},
        {"contracted_bandwidth_gbps": "-1"},
        {"sla_threshold_percent": "101"},
    ],
)
def test_bad_terms_are_refused_with_a_sentence(staff, terms):
    body = valid_lease()
    body["terms"].update(terms)
    error = error_of(staff.post("/api/v1/leases/", body, format="json"), 400)
    assert "terms" in error["fields"] or error["fields"]


def test_a_service_refusal_is_a_400_with_its_sentence(world, staff):
    error = error_of(staff.post(f"/api/v1/leases/{world.alpha.lease.pk}/activate/"), 400)
    assert error["message"] == "Lease ALPHA-1 is active and cannot become active."
    busy = valid_lease(nodes=[world.alpha.nodes[0].pk], starts_at="2026-11-15T00:00:00+08:00")
    error = error_of(staff.post("/api/v1/leases/", busy, format="json"), 400)
    assert "already leased" in error["message"]
    ends_first = valid_lease(ends_at="2026-12-01T00:00:00+08:00")
    error = error_of(staff.post("/api/v1/leases/", ends_first, format="json"), 400)
    assert "end after it starts" in error["message"]


def test_an_oversized_body_is_a_413(staff, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    error = error_of(
        staff.post("/api/v1/leases/", valid_lease(notes="x" * 5000), format="json"), 413
    )
    assert error["code"] == "payload_too_large"
    assert "1000" in error["message"]


@pytest.mark.parametrize(
    "period", ["", "2026-13", "2026-1", "26-11", "2026-11-01", "abcd-ef", "0000-01", "9999-12"]
)
def test_a_bad_period_is_a_400(world, client_for, period):
    client = client_for(world.alpha.members[Role.VIEWER])
    response = client.get(f"/api/v1/leases/{world.alpha.lease.pk}/sla/", {"period": period})
    error = error_of(response, 400)
    assert "period" in error["fields"]


@pytest.mark.parametrize(
    "query",
    [
        {"slot_at_after": "yesterday"},
        {"slot_at_before": "2026-02-30T00:00:00Z"},
        {"lease": "abc"},
        {"lease": str(10**30)},
        {"node": "-1"},
        {"kind": "teleport"},
        {"state": "happy"},
        {"batch": "not-a-uuid"},
    ],
)
def test_bad_filters_are_a_400(world, client_for, query):
    client = client_for(world.alpha.members[Role.VIEWER])
    error = error_of(client.get("/api/v1/probe-runs/", query), 400)
    # A range filter reports under its own name (slot_at for slot_at_after).
    assert any(key.startswith(name) for key in query for name in error["fields"])


def test_a_bad_cursor_or_page_is_a_404_in_the_same_shape(world, client_for):
    client = client_for(world.alpha.members[Role.VIEWER])
    assert error_of(client.get("/api/v1/probe-runs/", {"cursor": "garbage"}), 404)
    assert error_of(client.get("/api/v1/leases/", {"page": "99"}), 404)


def test_other_client_errors_share_the_shape(world, client_for):
    client = client_for(world.alpha.members[Role.ADMIN])
    assert error_of(client.delete(f"/api/v1/leases/{world.alpha.lease.pk}/"), 405)["code"] == (
        "method_not_allowed"
    )
    response = client.generic(
        "POST",
        f"/api/v1/leases/{world.alpha.lease.pk}/run-now/",
        "kinds=link",
        content_type="application/x-www-form-urlencoded",
    )
    assert error_of(response, 415)["code"] == "unsupported_media_type"
    assert error_of(client.get("/api/v1/leases/999999999/"), 404)["code"] == "not_found"
    assert error_of(client_for(None).get("/api/v1/leases/"), 401)["code"] == "not_authenticated"


def test_run_now_on_a_lease_that_is_not_active_is_a_409(world, client_for):
    world.alpha.lease.status = "ended"
    world.alpha.lease.save(update_fields=["status"])
    client = client_for(world.alpha.members[Role.ADMIN])
    error = error_of(client.post(f"/api/v1/leases/{world.alpha.lease.pk}/run-now/"), 409)
    assert "only an active lease" in error["message"]


def test_rate_limit_per_token_is_a_429(world, token_client, monkeypatch):
    from accounts import services as tokens
    from api.throttling import TokenRateThrottle

    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"api": "3/min"})
    one = token_client(tokens.issue_token(user=world.staff, scopes=["read"]).secret)
    two = token_client(tokens.issue_token(user=world.staff, scopes=["read"]).secret)
    assert [one.get("/api/v1/sites/").status_code for _ in range(3)] == [200, 200, 200]
    error = error_of(one.get("/api/v1/sites/"), 429)
    assert error["code"] == "throttled"
    assert two.get("/api/v1/sites/").status_code == 200  # its own budget


def test_a_filter_value_the_database_cannot_hold_is_a_400(world, client_for):
    # Found by schemathesis: an offset of -19:16 passes the form field but not PostgreSQL.
    client = client_for(world.staff)
    response = client.get("/api/v1/incidents/", {"opened_at_after": "1530-03-30T07:28:37-19:16"})
    error = error_of(response, 400)
    assert error["fields"] == {"opened_at": ["A UTC offset is at most ±14:00."]}
    ancient = client.get("/api/v1/incidents/", {"opened_at_after": "0337-06-23T02:19:22Z"})
    assert error_of(ancient, 400)["fields"] == {
        "opened_at": ["Give an instant between 1970 and 9999."]
    }
