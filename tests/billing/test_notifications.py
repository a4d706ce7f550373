"""Incident notifications: a signed webhook to a real HTTP server on 127.0.0.1, and email
through Django's locmem backend. The address policy itself is proven in
test_webhook_egress.py."""

import hashlib
import hmac
import json
import smtplib
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_network

import pytest
from django.core.mail.backends.locmem import EmailBackend

from gpulease_verify import webhooks
from incidents import notifications
from incidents.models import Incident
from incidents.notifications import PartlyDelivered, WebhookFailed
from incidents.tasks import notify_incident
from tests.factories import TenantFactory, at, make_lease, make_run

# A secret from before Standard Webhooks (64 hex characters used as text), as migration
# leases 0015 converted it: the same key in whsec_ form.
LEGACY_TEXT = "3f" * 32
SECRET = webhooks.secret_from_key(LEGACY_TEXT.encode())


@pytest.fixture(autouse=True)
def _receiver_on_loopback_allowed(settings):
    """These receivers listen on 127.0.0.1, which webhooks may reach only when the provider
    allows it (WEBHOOK_ALLOWED_NETWORKS)."""
    settings.WEBHOOK_ALLOWED_NETWORKS = [ip_network("127.0.0.0/8")]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Endpoint:
    """A webhook receiver: answers with the planned statuses in turn, then 200."""

    url: str
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    received = Endpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.requests.append(Received(self.path, dict(self.headers.items()), body))
            status = received.statuses.pop(0) if received.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/gpulease"
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def make_incident(*, email: str = "noc@zhiyuan.example.cn", webhook_url: str = "", **fields):  # type: ignore[no-untyped-def]
    tenant = TenantFactory(
        slug="zhiyuan",
        contact_email=email,
        webhook_url=webhook_url,
        webhook_secret=SECRET,
        time_zone="Asia/Shanghai",
    )
    lease = make_lease(tenant=tenant, reference="LAB-1", contracted_bandwidth_gbps=1)
    values = {
        "lease": lease,
        "kind": "throughput",
        "target": "lab-h1>lab-h3",
        "pattern": "ring",
        "opened_at": datetime(2026, 11, 29, 2, 5, tzinfo=UTC),
        "violations": 3,
        "worst_bps": 412_300_000,
        "rule": "throughput >= 95% of 1 Gbps contracted (terms v1)",
        "terms": lease.terms.first(),
    }
    values.update(fields)
    return Incident.objects.create(**values)


def verifies(body: bytes, signature: str, secret_text: str) -> bool:
    """The old X-Gpulease-Signature check, as a receiver not yet moved runs it: keyed by
    the secret's old text."""
    expected = "sha256=" + hmac.new(secret_text.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def refused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.django_db
def test_payload_is_a_stable_document_with_utc_times_and_the_evidence():
    incident = make_incident(
        state="closed", closed_at=datetime(2026, 11, 29, 3, 40, 12, 345678, tzinfo=UTC)
    )
    runs = [
        make_run(incident.lease, target="lab-h1>lab-h3", slot=at(f"2026-11-29 {hour}:00"))
        for hour in (10, 11)
    ]
    incident.runs.set(runs)

    payload = notifications.incident_payload(incident=incident, event="closed")

    assert payload["event"] == "incident.closed"
    assert payload["sent_at"].endswith("Z")
    assert payload["incident"] == {
        "id": incident.pk,
        "lease": "LAB-1",
        "tenant": "zhiyuan",
        "kind": "throughput",
        "target": "lab-h1>lab-h3",
        "pattern": "ring",
        "state": "closed",
        "opened_at": "2026-11-29T02:05:00Z",
        "closed_at": "2026-11-29T03:40:12Z",
        "violations": 3,
        "worst_bps": 412_300_000,
        "worst_latency_us": None,
        "rule": "throughput >= 95% of 1 Gbps contracted (terms v1)",
        "terms_version": 1,
        "evidence_run_ids": sorted(run.pk for run in runs),
    }


@pytest.mark.django_db
def test_webhook_is_signed_with_the_tenants_secret_and_a_tampered_body_fails(endpoint):
    incident = make_incident(webhook_url=endpoint.url)

    notifications.send_webhook(incident=incident, event="opened")

    [request] = endpoint.requests
    assert request.path == "/hooks/gpulease"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Gpulease-Event"] == "incident.opened"
    assert uuid.UUID(request.headers["X-Gpulease-Delivery"])
    assert request.headers["webhook-id"] == request.headers["X-Gpulease-Delivery"]
    signature = request.headers["X-Gpulease-Signature"]
    assert verifies(request.body, signature, LEGACY_TEXT)  # the old receiver still verifies
    tampered = request.body.replace(b'"violations":3', b'"violations":0')
    assert tampered != request.body
    assert not verifies(tampered, signature, LEGACY_TEXT)
    assert not verifies(request.body, signature, "00" * 32)
    document = json.loads(request.body.decode("utf-8"))
    assert document["incident"]["id"] == incident.pk
    assert request.body == notifications.encode_payload(document)


def test_the_legacy_signature_is_hmac_sha256_hex_of_the_exact_bytes():
    secret = webhooks.secret_from_key(b"key")
    expected = "sha256=" + hmac.new(b"key", b"{}", hashlib.sha256).hexdigest()
    assert notifications.legacy_signature(body=b"{}", secret=secret) == expected
    assert notifications.legacy_signature(body=b"{} ", secret=secret) != expected


@pytest.mark.django_db
def test_a_500_raises_webhook_failed_and_nothing_is_marked_notified(endpoint):
    incident = make_incident(email="", webhook_url=endpoint.url)
    endpoint.statuses = [500]

    with pytest.raises(WebhookFailed, match="HTTP 500"):
        notifications.notify(incident_id=incident.pk, event="opened")

    assert len(endpoint.requests) == 1
    incident.refresh_from_db()
    assert incident.notified_open_at is None


@pytest.mark.django_db
@pytest.mark.parametrize("status", [301, 404])
def test_a_redirect_or_client_error_is_a_failed_delivery(endpoint, status):
    incident = make_incident(webhook_url=endpoint.url)
    endpoint.statuses = [status]

    with pytest.raises(WebhookFailed, match=f"HTTP {status}"):
        notifications.send_webhook(incident=incident, event="opened")


@pytest.mark.django_db
def test_an_unreachable_endpoint_raises_webhook_failed():
    incident = make_incident(webhook_url=f"http://127.0.0.1:{refused_port()}/hook")

    with pytest.raises(WebhookFailed, match="could not be reached"):
        notifications.send_webhook(incident=incident, event="opened")


@pytest.mark.django_db
def test_a_successful_delivery_is_not_repeated(endpoint, mailoutbox):
    incident = make_incident(webhook_url=endpoint.url)

    assert notifications.notify(incident_id=incident.pk, event="opened") == ["email", "webhook"]
    assert notifications.notify(incident_id=incident.pk, event="opened") == []

    assert len(endpoint.requests) == 1
    assert len(mailoutbox) == 1
    incident.refresh_from_db()
    assert incident.notified_open_at is not None
    assert incident.notified_close_at is None


@pytest.mark.django_db
def test_a_tenant_without_a_webhook_gets_only_the_email(endpoint, mailoutbox):
    incident = make_incident(webhook_url="")

    assert notifications.notify(incident_id=incident.pk, event="opened") == ["email"]

    assert endpoint.requests == []
    [mail] = mailoutbox
    assert mail.to == ["noc@zhiyuan.example.cn"]
    incident.refresh_from_db()
    assert incident.notified_open_at is not None


@pytest.mark.django_db
def test_a_tenant_with_neither_channel_is_not_marked_notified(mailoutbox):
    incident = make_incident(email="", webhook_url="")

    assert notifications.notify(incident_id=incident.pk, event="opened") == []

    assert mailoutbox == []
    incident.refresh_from_db()
    assert incident.notified_open_at is None


@pytest.mark.django_db
def test_email_shows_times_in_the_tenants_zone_and_the_worst_figure(mailoutbox):
    incident = make_incident(
        state="closed", closed_at=datetime(2026, 11, 29, 3, 40, tzinfo=UTC), worst_bps=412_300_000
    )

    notifications.send_email(incident=incident, event="closed")

    [mail] = mailoutbox
    assert mail.subject == "[gpulease] Incident closed: LAB-1 throughput lab-h1>lab-h3"
    assert "2026-11-29 10:05 (Asia/Shanghai)" in mail.body
    assert "2026-11-29 11:40 (Asia/Shanghai)" in mail.body
    assert "412.3 Mbit/s" in mail.body
    assert "throughput >= 95% of 1 Gbps contracted (terms v1)" in mail.body
    html, mimetype = mail.alternatives[0]
    assert mimetype == "text/html"
    assert "throughput &gt;= 95% of 1 Gbps" in html


@pytest.mark.django_db
def test_opening_email_names_the_incident_and_says_it_is_still_open(mailoutbox):
    incident = make_incident(worst_bps=2_400_000_000, worst_latency_us=812.46)

    notifications.send_email(incident=incident, event="opened")

    [mail] = mailoutbox
    assert mail.subject == "[gpulease] Incident opened: LAB-1 throughput lab-h1>lab-h3"
    assert "2.4 Gbit/s" in mail.body
    assert "812.5 µs" in mail.body
    assert "still open" in mail.body


@pytest.mark.django_db
def test_after_the_email_went_out_a_failed_webhook_is_retried_alone(endpoint, mailoutbox):
    incident = make_incident(webhook_url=endpoint.url)
    endpoint.statuses = [503]

    with pytest.raises(PartlyDelivered) as partly:
        notifications.notify(incident_id=incident.pk, event="opened")
    assert partly.value.pending == ["webhook"]
    assert isinstance(partly.value.failure, WebhookFailed)
    incident.refresh_from_db()
    assert incident.notified_open_at is None

    notifications.notify(incident_id=incident.pk, event="opened", channels=["webhook"])

    assert len(mailoutbox) == 1
    first, second = endpoint.requests
    assert first.headers["X-Gpulease-Delivery"] == second.headers["X-Gpulease-Delivery"]
    incident.refresh_from_db()
    assert incident.notified_open_at is not None


@pytest.mark.django_db
def test_a_retry_whose_pending_channel_was_dropped_marks_the_incident_notified(mailoutbox):
    incident = make_incident(webhook_url="")

    assert notifications.notify(incident_id=incident.pk, event="opened", channels=["webhook"]) == []

    assert mailoutbox == []
    incident.refresh_from_db()
    assert incident.notified_open_at is not None


@pytest.mark.django_db
def test_the_task_retries_a_failed_webhook_without_resending_the_email(endpoint, mailoutbox):
    incident = make_incident(webhook_url=endpoint.url)
    endpoint.statuses = [500, 502]

    result = notify_incident.apply(args=[incident.pk, "opened"])

    assert result.successful(), result.traceback
    assert len(endpoint.requests) == 3
    assert len(mailoutbox) == 1
    incident.refresh_from_db()
    assert incident.notified_open_at is not None


class FlakySMTPBackend(EmailBackend):
    failures = 0

    def send_messages(self, messages):  # type: ignore[no-untyped-def]
        if FlakySMTPBackend.failures:
            FlakySMTPBackend.failures -= 1
            raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")
        return super().send_messages(messages)


@pytest.mark.django_db
def test_the_task_retries_an_smtp_failure_and_sends_the_webhook_once(
    endpoint, mailoutbox, settings
):
    settings.EMAIL_BACKEND = f"{__name__}.FlakySMTPBackend"
    FlakySMTPBackend.failures = 1
    incident = make_incident(webhook_url=endpoint.url)

    result = notify_incident.apply(args=[incident.pk, "closed"])

    assert result.successful(), result.traceback
    assert len(mailoutbox) == 1
    assert len(endpoint.requests) == 1
    incident.refresh_from_db()
    assert incident.notified_close_at is not None


def test_the_task_retries_transient_failures_with_capped_exponential_backoff():
    assert notify_incident.name == "billing.notify_incident"
    assert WebhookFailed in notify_incident.autoretry_for
    assert smtplib.SMTPException in notify_incident.autoretry_for
    assert PartlyDelivered not in notify_incident.autoretry_for
    assert notify_incident.retry_backoff is True
    assert notify_incident.retry_backoff_max == 3600
    assert notify_incident.retry_jitter is True
    assert notify_incident.max_retries == 10
    assert notify_incident.acks_late is True


@pytest.mark.django_db
def test_an_unknown_event_is_refused():
    incident = make_incident()

    with pytest.raises(ValueError, match="unknown incident event"):
        notifications.notify(incident_id=incident.pk, event="reopened")
