"""Branded error pages in the visitor's language, JSON under /api/, a 500 page that renders
without the database, and the favicon."""

import json

import pytest
from django.test import Client, RequestFactory, override_settings

from accounts.choices import Role
from portal.errors import server_error
from tests.factories import MembershipFactory
from tests.portal.support import client_for

ERRORS = override_settings(ROOT_URLCONF="tests.portal.error_urls", DEBUG=False)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("language", "heading", "sentence"),
    [
        ("en", "Page not found", "belongs to a lease or tenant your account cannot see"),
        ("zh-hans", "页面不存在", "属于您的账户无权查看的租用或租户"),
    ],
)
def test_a_missing_page_or_anothers_lease_is_a_branded_404(language, heading, sentence):
    user = MembershipFactory(role=Role.ADMIN).user
    client = client_for(user, language)
    for path in ("/no-such-page/", "/leases/999999/", "/fleet/"):  # /fleet/: staff only
        response = client.get(path)
        page = response.content.decode()
        assert response.status_code == 404, path
        assert f"<h1>{heading}</h1>" in page and sentence in page
        assert 'class="error-code">404<' in page
        assert 'rel="icon"' in page


@pytest.mark.django_db
@ERRORS
def test_a_refusal_is_a_branded_403_and_json_under_the_api():
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    response = client.get("/refused/")
    assert response.status_code == 403
    assert "<h1>无权访问</h1>" in response.content.decode()
    response = client.get("/api/v1/refused/")
    assert response.status_code == 403 and response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "permission_denied"


@pytest.mark.django_db
def test_an_unknown_api_route_answers_in_the_apis_error_body():
    response = Client(HTTP_ACCEPT_LANGUAGE="en").get("/api/v1/no-such-route/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": {"code": "not_found", "message": "Not found.", "fields": {}}
    }


@pytest.mark.django_db
@ERRORS
def test_a_server_error_is_a_branded_500_and_json_under_the_api():
    client = Client(raise_request_exception=False, HTTP_ACCEPT_LANGUAGE="en")
    response = client.get("/boom/")
    page = response.content.decode()
    assert response.status_code == 500
    assert "<h1>Something went wrong on our side</h1>" in page
    assert "a bug" not in page  # nothing of the exception reaches the visitor
    response = client.get("/api/v1/boom/")
    assert response.status_code == 500
    assert json.loads(response.content)["error"]["code"] == "server_error"


def test_the_500_page_renders_without_the_database():
    # No django_db mark: any query here fails the test.
    response = server_error(RequestFactory().get("/leases/1/"))
    assert response.status_code == 500
    assert "Something went wrong on our side" in response.content.decode()


def test_the_favicon():
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith(".svg") and "portal/favicon" in response["Location"]
