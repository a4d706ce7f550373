# ruff: noqa: F811 (pytest fixtures imported from tests/billing/test_notifications.py)
"""Webhooks signed the Standard Webhooks way: deliveries through the real path to a real
HTTP server on 127.0.0.1, verified with the reference `standardwebhooks` library and with
gpulease_verify.webhooks (the receiver's helper); a delivery replayed after the tolerance
is refused by both, and so is one whose timestamp an attacker refreshed."""

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from gpulease_verify import webhooks
from gpulease_verify.webhooks import WebhookRefused
from incidents import notifications
from leases.models import Tenant
from tests.billing.test_notifications import (  # noqa: F401 (fixtures)
    LEGACY_TEXT,
    SECRET,
    _receiver_on_loopback_allowed,
    endpoint,
    make_incident,
)

SENT = datetime(2026, 11, 29, 2, 10, tzinfo=UTC)
SENT_UNIX = 1_795_918_200  # 2026-11-29T02:10:00Z


def deliver(incident, *, at=SENT):  # type: ignore[no-untyped-def]
    with time_machine.travel(at, tick=False):
        notifications.send_webhook(incident=incident, event="opened")


def test_the_signature_matches_the_specs_own_example():
    """The test vector of the Standard Webhooks reference libraries."""
    assert (
        webhooks.signature(
            secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            msg_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
            timestamp=1614265330,
            body=b'{"test": 2432232314}',
        )
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


@pytest.mark.django_db
def test_a_delivery_verifies_with_the_standard_library_and_ours(endpoint):
    incident = make_incident(webhook_url=endpoint.url)
    deliver(incident)

    [request] = endpoint.requests
    headers = request.headers
    assert headers["webhook-id"] == notifications.delivery_id(incident=incident, event="opened")
    assert headers["webhook-timestamp"] == str(SENT_UNIX)
    signed = f"{headers['webhook-id']}.{SENT_UNIX}.".encode() + request.body
    digest = hmac.new(LEGACY_TEXT.encode(), signed, hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(digest).decode()
    with time_machine.travel(SENT + timedelta(seconds=3), tick=False):
        document = Webhook(SECRET).verify(request.body, headers)
        assert document["incident"]["id"] == incident.pk
        assert document == json.loads(request.body)
        now = (SENT + timedelta(seconds=3)).timestamp()
        assert (
            webhooks.verify(secret=SECRET, body=request.body, headers=headers, now=now)
            == (headers["webhook-id"])
        )


@pytest.mark.django_db
def test_a_replayed_delivery_is_refused_after_the_tolerance(endpoint):
    incident = make_incident(webhook_url=endpoint.url)
    deliver(incident)
    [captured] = endpoint.requests

    def standard_at(seconds_later: int):  # type: ignore[no-untyped-def]
        with time_machine.travel(SENT + timedelta(seconds=seconds_later), tick=False):
            return Webhook(SECRET).verify(captured.body, captured.headers)

    def ours_at(seconds_later: int) -> str:
        now = SENT_UNIX + seconds_later
        return webhooks.verify(secret=SECRET, body=captured.body, headers=captured.headers, now=now)

    # The last instant of the window still takes it (the receiver drops the repeated id);
    # one second later both refuse it.
    assert standard_at(300)["incident"]["id"] == incident.pk
    assert ours_at(300) == captured.headers["webhook-id"]
    with pytest.raises(WebhookVerificationError, match="too old"):
        standard_at(301)
    with pytest.raises(WebhookRefused, match="more than 300 s old"):
        ours_at(301)
    # A delivery stamped from the future is refused the same way.
    with pytest.raises(WebhookVerificationError, match="too new"):
        standard_at(-301)
    with pytest.raises(WebhookRefused, match="ahead"):
        ours_at(-301)


@pytest.mark.django_db
def test_refreshing_the_timestamp_of_a_captured_delivery_breaks_its_signature(endpoint):
    """The old X-Gpulease-Signature covered the body alone, so a captured delivery could be
    sent again at any time; the timestamp is signed now."""
    incident = make_incident(webhook_url=endpoint.url)
    deliver(incident)
    [captured] = endpoint.requests
    later = SENT + timedelta(days=1)
    forged = {**captured.headers, "webhook-timestamp": str(int(later.timestamp()))}
    with time_machine.travel(later, tick=False):
        with pytest.raises(WebhookVerificationError, match="No matching signature"):
            Webhook(SECRET).verify(captured.body, forged)
        with pytest.raises(WebhookRefused, match="no signature matches"):
            webhooks.verify(
                secret=SECRET, body=captured.body, headers=forged, now=later.timestamp()
            )
    # The legacy header alone would have taken it: why it is going away.
    assert (
        notifications.legacy_signature(body=captured.body, secret=SECRET)
        == (captured.headers["X-Gpulease-Signature"])
    )


@pytest.mark.django_db
def test_a_retry_keeps_the_id_and_is_signed_at_its_own_time(endpoint):
    incident = make_incident(webhook_url=endpoint.url)
    endpoint.statuses = [503]
    with pytest.raises(notifications.WebhookFailed):
        deliver(incident)
    deliver(incident, at=SENT + timedelta(minutes=10))
    first, second = endpoint.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert int(second.headers["webhook-timestamp"]) - int(first.headers["webhook-timestamp"]) == 600
    with time_machine.travel(SENT + timedelta(minutes=10), tick=False):
        Webhook(SECRET).verify(second.body, second.headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(SECRET).verify(first.body, first.headers)


@pytest.mark.django_db
def test_a_new_tenant_gets_a_standard_secret_and_legacy_headers_can_be_turned_off(
    endpoint, settings
):
    settings.WEBHOOK_LEGACY_HEADERS = False
    incident = make_incident(webhook_url=endpoint.url)
    tenant = incident.lease.tenant
    Tenant.objects.filter(pk=tenant.pk).update(webhook_secret=Tenant().webhook_secret)
    tenant.refresh_from_db()
    assert tenant.webhook_secret.startswith("whsec_")
    assert len(webhooks.secret_key(tenant.webhook_secret)) == 32
    incident.lease.tenant = tenant
    deliver(incident)
    [request] = endpoint.requests
    assert "X-Gpulease-Signature" not in request.headers
    assert "X-Gpulease-Delivery" not in request.headers
    with time_machine.travel(SENT, tick=False):
        Webhook(tenant.webhook_secret).verify(request.body, request.headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(SECRET).verify(request.body, request.headers)


@pytest.mark.django_db
def test_the_migration_keeps_an_old_secret_s_key(endpoint):
    """leases 0015: the old text becomes whsec_<base64 of its bytes>, so receivers keep
    their key; a secret already in whsec_ form is left as it is."""
    from importlib import import_module

    from django.apps import apps

    migration = import_module("leases.migrations.0015_webhook_secret_standard")
    incident = make_incident(webhook_url=endpoint.url)
    Tenant.objects.filter(pk=incident.lease.tenant_id).update(webhook_secret=LEGACY_TEXT)
    other = Tenant.objects.create(name="Other", slug="other")
    kept = other.webhook_secret

    migration.to_standard(apps, None)

    assert Tenant.objects.get(pk=incident.lease.tenant_id).webhook_secret == (
        "whsec_" + "M2YzZjNm" * 10 + "M2YzZg=="
    )
    assert Tenant.objects.get(pk=incident.lease.tenant_id).webhook_secret == SECRET
    assert Tenant.objects.get(pk=other.pk).webhook_secret == kept
    migration.to_text(apps, None)
    assert Tenant.objects.get(pk=incident.lease.tenant_id).webhook_secret == LEGACY_TEXT


def test_a_secret_that_is_not_whsec_base64_is_refused():
    from django.core.exceptions import ValidationError

    from leases.models.tenants import validate_webhook_secret

    validate_webhook_secret(webhooks.new_secret())
    for bad in (LEGACY_TEXT, "whsec_", "whsec_not base64!"):
        with pytest.raises(ValidationError, match="whsec_"):
            validate_webhook_secret(bad)
