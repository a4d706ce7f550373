"""Content-Security-Policy and Permissions-Policy on what the portal, the API and the admin
answer; our templates hold nothing the policy would refuse (tests/browser/test_csp.py runs
the pages in chromium)."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from tests.factories import MembershipFactory, StaffFactory

POLICY = {
    "default-src": {"'self'"},
    "script-src": {"'self'"},
    "style-src": {"'self'"},
    "img-src": {"'self'", "data:"},
    "object-src": {"'none'"},
    "base-uri": {"'self'"},
    "frame-ancestors": {"'none'"},
    "form-action": {"'self'"},
}
DENIED = ("camera", "microphone", "geolocation", "payment", "usb", "serial", "display-capture")


def directives(header: str) -> dict[str, set[str]]:
    parts = (part.split() for part in header.split(";") if part.strip())
    return {name: set(sources) for name, *sources in parts}


def assert_hardened(response) -> None:  # type: ignore[no-untyped-def]
    assert directives(response["Content-Security-Policy"]) == POLICY
    features = dict(
        item.strip().split("=", 1) for item in response["Permissions-Policy"].split(",")
    )
    for feature in DENIED:
        assert features[feature] == "()", feature
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


@pytest.mark.django_db
def test_portal_api_and_admin_answers_carry_both_policies(client):
    assert_hardened(client.get("/accounts/login/"))
    assert_hardened(client.get("/api/v1/leases/"))  # a 401 too
    member = MembershipFactory()
    client.force_login(member.user)
    assert_hardened(client.get("/"))
    api = client.get("/api/v1/leases/", HTTP_ACCEPT="application/json")
    assert api.status_code == 200
    assert_hardened(api)
    client.force_login(StaffFactory())
    admin = client.get("/admin/leases/lease/")
    assert admin.status_code == 200
    assert_hardened(admin)
    docs = client.get("/api/docs/")
    assert_hardened(docs)
    assert '<script src="/api/docs/?script="></script>' in docs.content.decode()
    assert client.get("/api/docs/?script=")["Content-Type"] == "application/javascript"


@pytest.mark.django_db
def test_only_redoc_may_style_inline_and_start_a_blob_worker(client):
    redoc = directives(client.get("/api/redoc/")["Content-Security-Policy"])
    assert redoc == {
        **POLICY,
        "style-src": {"'self'", "'unsafe-inline'"},
        "worker-src": {"'self'", "blob:"},
    }


INLINE = re.compile(
    r"""style\s*=|<style|<script(?![^>]*\b(src|type="application/json")\b)|\son[a-z]+\s*=|javascript:""",
    re.IGNORECASE,
)


def test_our_templates_hold_no_inline_script_or_style():
    base = Path(settings.BASE_DIR)
    templates = list(base.glob("*/templates/**/*.html"))
    assert len(templates) > 20
    found = [
        f"{path.relative_to(base)}:{number}: {line.strip()}"
        for path in templates
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if INLINE.search(line)
    ]
    assert found == []
