"""The log format every process shares (common.logs), in-process: UTC times with their
offset, secrets redacted wherever they appear in a line, what the access line learns from
the app (monitoring.middleware) and the client address behind a proxy. The processes
themselves: tests/deploy/test_production_stack.py and test_systemd.py."""

import json
import logging
import time

import pytest
from django.test import RequestFactory, override_settings
from django.utils.module_loading import import_string
from rest_framework.test import APIClient

from accounts import services as tokens
from common.client_address import client_address
from common.logs import ACCESS_ENVIRON_KEY, logging_config, redact
from tests.factories import MembershipFactory, StaffFactory, TenantFactory

AT = 1_800_000_000.5  # 2027-01-15 08:00:00.500 UTC, 16:00 in Shanghai


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET /x?token=abc&page=2", "GET /x?token=***&page=2"),
        ("/a?page=1&access_token=a.b-c", "/a?page=1&access_token=***"),
        ("/a?api_key=k1&apikey=k2&key=k3", "/a?api_key=***&apikey=***&key=***"),
        (
            "/s3?X-Amz-Signature=ab12&X-Amz-Date=20270115",
            "/s3?X-Amz-Signature=***&X-Amz-Date=20270115",
        ),
        ("password=hunter2 csrfmiddlewaretoken=Zz9", "password=*** csrfmiddlewaretoken=***"),
        ("('password=hunter2',)", "('password=***',)"),
        ("client_secret=x;sig=y", "client_secret=***;sig=***"),
        # Names that only contain a secret-looking word are left alone.
        (
            "/a?monkey=1&author=bob&ordering=key&page=2",
            "/a?monkey=1&author=bob&ordering=key&page=2",
        ),
        ("redis://:hunter2@redis:6379/0", "redis://:***@redis:6379/0"),
        ("postgres://gpulease:pw@db:5432/gpulease", "postgres://gpulease:***@db:5432/gpulease"),
        ("https://example.cn/path", "https://example.cn/path"),
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer ***"),
        ("token gpl_0123abcd_Se_cr-Et9 revoked", "token gpl_0123abcd_*** revoked"),
    ],
)
def test_redact(text, expected):
    assert redact(text) == expected


def _record(message="GET /x?token=s3cret 200", **extra):  # type: ignore[no-untyped-def]
    record = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, message, (), None)
    record.created = AT
    record.__dict__.update(extra)
    return record


def _formatter(name):  # type: ignore[no-untyped-def]
    """The formatter settings.LOGGING builds under this name."""
    spec = dict(logging_config("json")["formatters"][name])
    return import_string(spec.pop("()"))(**spec)


def test_json_lines_are_in_utc_whatever_the_display_zone():
    assert time.localtime(AT).tm_hour == 16  # Django set TZ to Asia/Shanghai (TIME_ZONE)
    line = json.loads(_formatter("json").format(_record(request_id="r1")))
    assert line["time"] == "2027-01-15T08:00:00.500+00:00"
    assert (line["level"], line["logger"], line["request_id"]) == ("INFO", "gunicorn.access", "r1")
    assert line["message"] == "GET /x?token=*** 200"
    plain = _formatter("plain").format(_record())
    assert plain == "2027-01-15T08:00:00.500+00:00 INFO gunicorn.access GET /x?token=*** 200"


def test_json_lines_redact_every_field_and_leave_out_the_request():
    request = RequestFactory().get("/api/v1/leases/?token=s3cret")
    data = {"args": ["password=hunter2"], "nested": {"url": "redis://:pw@r/0"}, "n": 3}
    line = json.loads(
        _formatter("json").format(_record(request=request, data=data, path="/x?key=k&a=1"))
    )
    assert "request" not in line  # django.request attaches it: its repr holds the query
    assert line["data"] == {"args": ["password=***"], "nested": {"url": "redis://:***@r/0"}, "n": 3}
    assert line["path"] == "/x?key=***&a=1"
    assert "s3cret" not in json.dumps(line) and "hunter2" not in json.dumps(line)


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="LOG_FORMAT must be plain or json"):
        logging_config("xml")


@pytest.mark.django_db
def test_the_app_tells_the_access_line_who_asked():
    member = MembershipFactory()
    MembershipFactory(user=member.user, tenant=TenantFactory())  # a second tenant
    secret = tokens.issue_token(user=member.user, scopes=["read"], tenant=member.tenant).secret
    api = APIClient(REMOTE_ADDR="10.0.0.9")
    response = api.get("/api/v1/leases/", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200
    fields = response.wsgi_request.META[ACCESS_ENVIRON_KEY]
    assert fields == {
        "route": "api:lease-list",
        "request_id": response["X-Request-ID"],
        "client": "10.0.0.9",
        "user_id": member.user.pk,
        "tenant_ids": [member.tenant_id],  # a token acts for its one tenant
    }
    session = APIClient()
    session.force_login(member.user)
    fields = session.get("/api/v1/leases/").wsgi_request.META[ACCESS_ENVIRON_KEY]
    assert fields["tenant_ids"] == sorted(
        member.user.memberships.values_list("tenant_id", flat=True)
    )
    assert len(fields["tenant_ids"]) == 2

    anonymous = APIClient().get("/no-such-page/")
    fields = anonymous.wsgi_request.META[ACCESS_ENVIRON_KEY]
    assert (fields["route"], fields["user_id"], fields["tenant_ids"]) == ("unmatched", None, [])
    assert fields["request_id"] == anonymous["X-Request-ID"]
    staff = APIClient()
    staff.force_login(StaffFactory())
    answer = staff.get("/api/v1/leases/")
    fields = answer.wsgi_request.META[ACCESS_ENVIRON_KEY]
    assert (fields["route"], fields["tenant_ids"]) == ("api:lease-list", [])
    assert fields["user_id"] is not None


def test_the_client_is_the_address_the_declared_proxy_saw():
    request = RequestFactory().get(
        "/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7, 198.51.100.2"
    )
    assert client_address(request) == "10.0.0.1"  # no proxy declared: a client's claim
    with override_settings(TRUSTED_PROXY_COUNT=1):
        assert client_address(request) == "198.51.100.2"  # what Caddy appended
    # Login lockouts count the same address (django-axes).
    from axes.helpers import get_client_ip_address

    assert get_client_ip_address(request) == "10.0.0.1"
