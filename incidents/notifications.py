"""Telling a tenant that an incident opened or closed: a signed webhook and an email.

Delivery is at least once. The email goes first, so that a tenant whose webhook endpoint
is broken still hears about the incident. An incident's notified_open_at or
notified_close_at is set once every channel has delivered; after that, notify sends
nothing for that event again. When the email went out and the webhook then failed, notify
raises PartlyDelivered naming the channels still pending, and the Celery task retries
only those (see incidents.tasks).

Webhooks are signed the Standard Webhooks way (gpulease_verify.webhooks): ``webhook-id``
is the same on every retry of one event, so the receiver can drop a repeat;
``webhook-timestamp`` is the attempt's time and ``webhook-signature`` covers
id.timestamp.body, so a captured delivery replayed later is refused. While
WEBHOOK_LEGACY_HEADERS is on, the old ``X-Gpulease-Signature`` (HMAC of the body alone,
same key) and ``X-Gpulease-Delivery`` (= webhook-id) come along for receivers not yet moved.

A new chain checkpoint goes to the same webhook through ``deliver`` (billing.notifications,
event ``chain.checkpoint``). A tenant admin may send a test delivery (event
``webhook.test``) from the portal's settings page, signed the same way.

A webhook goes only to a public address (common.egress), checked when the URL is saved and
again before each delivery, and the request connects to the address that was checked.
A redirect is a failed delivery, never followed.
"""

import hashlib
import hmac
import http.client
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext as _

from common import egress, pinned_http
from gpulease_verify import webhooks
from gpulease_verify.units import format_bps, one_decimal, plain
from incidents.models import Incident
from leases.models import Tenant

# Enough for an error page's first lines; the receiver's answer is otherwise unused.
MAX_ANSWER_BYTES = 4096
EVENTS = ("opened", "closed")
_NOTIFIED_FIELD = {"opened": "notified_open_at", "closed": "notified_close_at"}
DELIVERY_NAMESPACE = uuid.UUID("5f6c7a0e-2b1d-4c47-9a0e-6b7f3d2c9e41")


class Channel(StrEnum):
    EMAIL = "email"
    WEBHOOK = "webhook"


class WebhookFailed(Exception):
    """The tenant's endpoint did not take the delivery: a network error or a non-2xx answer."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PartlyDelivered(Exception):
    """Some channels delivered and one failed: only `pending` still has to be sent."""

    def __init__(self, *, pending: list[str], failure: Exception) -> None:
        super().__init__(f"still pending: {', '.join(pending)} ({failure})")
        self.pending = pending
        self.failure = failure


def incident_payload(*, incident: Incident, event: str) -> dict[str, Any]:
    _check_event(event)
    return {
        "event": f"incident.{event}",
        "incident": {
            "id": incident.pk,
            "lease": incident.lease.reference,
            "tenant": incident.lease.tenant.slug,
            "kind": incident.kind,
            "target": incident.target,
            "pattern": incident.pattern,
            "state": incident.state,
            "opened_at": utc_iso(incident.opened_at),
            "closed_at": utc_iso(incident.closed_at),
            "violations": incident.violations,
            "worst_bps": incident.worst_bps,
            "worst_latency_us": incident.worst_latency_us,
            "rule": incident.rule,
            "terms_version": incident.terms.version,
            "evidence_run_ids": sorted(incident.runs.values_list("pk", flat=True)),
        },
        "sent_at": utc_iso(timezone.now()),
    }


def encode_payload(payload: dict[str, Any]) -> bytes:
    """The exact bytes that are sent and signed: UTF-8, sorted keys, no spaces."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def legacy_signature(*, body: bytes, secret: str) -> str:
    """The old X-Gpulease-Signature value: HMAC-SHA256 of the body alone, with the same key
    as webhook-signature (for a secret from before whsec_, its old text's bytes)."""
    digest = hmac.new(webhooks.secret_key(secret), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signed_headers(
    *, event: str, msg_id: str, body: bytes, secret: str, also: Sequence[str] = ()
) -> dict[str, str]:
    """Every header of one delivery attempt, signed now (``also``: a replaced secret during
    its overlap signs too; the legacy header carries the current one's only)."""
    timestamp = int(timezone.now().timestamp())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "gpulease-webhook",
        "Connection": "close",
        "X-Gpulease-Event": event,
        **webhooks.headers(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body, also=also),
    }
    if settings.WEBHOOK_LEGACY_HEADERS:
        headers["X-Gpulease-Delivery"] = msg_id
        headers["X-Gpulease-Signature"] = legacy_signature(body=body, secret=secret)
    return headers


def delivery_id(*, incident: Incident, event: str) -> str:
    """The same for every attempt at one incident's event, different for anything else."""
    name = f"incident/{incident.pk}/{utc_iso(incident.opened_at)}/{event}"
    return str(uuid.uuid5(DELIVERY_NAMESPACE, name))


def send_webhook(*, incident: Incident, event: str) -> None:
    deliver(
        incident.lease.tenant,
        event=f"incident.{event}",
        msg_id=delivery_id(incident=incident, event=event),
        payload=incident_payload(incident=incident, event=event),
    )


TEST_EVENT = "webhook.test"


def send_test(*, tenant: Tenant) -> None:
    """One signed delivery of event ``webhook.test`` to the tenant's webhook now, so that
    its admin sees the receiver take (and verify) one; WebhookFailed says why not. Each
    test is its own message (a fresh webhook-id), never retried."""
    if not tenant.webhook_url:
        raise WebhookFailed("the tenant has no webhook URL")
    payload = {"event": TEST_EVENT, "tenant": tenant.slug, "sent_at": utc_iso(timezone.now())}
    deliver(tenant, event=TEST_EVENT, msg_id=str(uuid.uuid4()), payload=payload)


def deliver(tenant: Tenant, *, event: str, msg_id: str, payload: dict[str, Any]) -> None:
    """POST ``payload`` to the tenant's webhook, signed with its secrets as they are now; the
    URL is checked against the egress policy first and connected to as checked."""
    shown = _without_credentials(tenant.webhook_url)
    try:
        destination = egress.check_url_for_webhooks(tenant.webhook_url)
    except egress.EgressRefused as refused:
        raise WebhookFailed(f"{shown} is not a permitted destination: {refused.reason}") from None
    body = encode_payload(payload)
    current, *previous = tenant.signing_secrets(timezone.now())
    headers = signed_headers(event=event, msg_id=msg_id, body=body, secret=current, also=previous)
    _post(shown, destination, body=body, headers=headers)


def send_email(*, incident: Incident, event: str) -> None:
    _check_event(event)
    context = _email_context(incident, event)
    send_mail(
        subject=_email_subject(incident, event),
        message=render_to_string("incidents/incident_email.txt", context).strip() + "\n",
        from_email=None,
        recipient_list=[incident.lease.tenant.contact_email],
        html_message=render_to_string("incidents/incident_email.html", context),
    )


def notify(*, incident_id: int, event: str, channels: list[str] | None = None) -> list[str]:
    """Send the event on every channel the tenant has. A retry passes `channels`, the ones
    still pending: the others have delivered, so once these do (or the tenant has dropped
    them) the incident is marked notified. Returns the channels that delivered now."""
    _check_event(event)
    incident = _incident_for_provider(incident_id)
    if getattr(incident, _NOTIFIED_FIELD[event]) is not None:
        return []
    pending = [c for c in _channels_of(incident) if channels is None or c in channels]
    delivered: list[str] = []
    for channel in pending:
        try:
            _SENDERS[channel](incident=incident, event=event)
        except Exception as failure:
            if not delivered:
                raise
            still = [str(channel) for channel in pending[len(delivered) :]]
            raise PartlyDelivered(pending=still, failure=failure) from failure
        delivered.append(str(channel))
    if delivered or channels is not None:
        _mark_notified(incident_id=incident.pk, event=event)
    return delivered


_SENDERS = {Channel.EMAIL: send_email, Channel.WEBHOOK: send_webhook}


def _incident_for_provider(incident_id: int) -> Incident:
    return Incident.objects.select_related("lease__tenant", "terms").get(pk=incident_id)


def _channels_of(incident: Incident) -> list[Channel]:
    tenant = incident.lease.tenant
    wanted = {Channel.EMAIL: tenant.contact_email, Channel.WEBHOOK: tenant.webhook_url}
    return [channel for channel, address in wanted.items() if address]


def _mark_notified(*, incident_id: int, event: str) -> None:
    field = _NOTIFIED_FIELD[event]
    Incident.objects.filter(pk=incident_id, **{f"{field}__isnull": True}).update(
        **{field: timezone.now()}
    )


def _post(
    shown: str, destination: egress.Destination, *, body: bytes, headers: dict[str, str]
) -> None:
    try:
        answer = pinned_http.post(
            destination,
            body=body,
            headers=headers,
            connect_timeout=settings.WEBHOOK_CONNECT_TIMEOUT_S,
            read_timeout=settings.WEBHOOK_READ_TIMEOUT_S,
            max_answer_bytes=MAX_ANSWER_BYTES,
        )
    except (OSError, http.client.HTTPException) as error:
        raise WebhookFailed(f"{shown} could not be reached: {error}") from error
    if 300 <= answer.status < 400:
        raise WebhookFailed(f"{shown} answered HTTP {answer.status}; redirects are not followed")
    if not 200 <= answer.status < 300:
        raise WebhookFailed(f"{shown} answered HTTP {answer.status}")


def _without_credentials(url: str) -> str:
    """The URL for messages and logs: a password in it must not end up there."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL, which egress refuses: show no part that may be a password
        return "(not a valid URL)" if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _email_subject(incident: Incident, event: str) -> str:
    values = {
        "lease": incident.lease.reference,
        "kind": incident.kind,
        "target": incident.target,
    }
    if event == "opened":
        return _("[gpulease] Incident opened: %(lease)s %(kind)s %(target)s") % values
    return _("[gpulease] Incident closed: %(lease)s %(kind)s %(target)s") % values


def _email_context(incident: Incident, event: str) -> dict[str, Any]:
    zone = incident.lease.tenant.time_zone
    return {
        "event": event,
        "incident": incident,
        "lease": incident.lease.reference,
        "tenant": incident.lease.tenant.name,
        "kind": incident.get_kind_display(),
        "worst_bandwidth": None if incident.worst_bps is None else format_bps(incident.worst_bps),
        "worst_latency": _format_us(incident.worst_latency_us),
        "opened_at": in_zone(incident.opened_at, zone),
        "closed_at": in_zone(incident.closed_at, zone),
        "terms_version": incident.terms.version,
        "evidence_run_ids": ", ".join(map(str, sorted(incident.runs.values_list("pk", flat=True)))),
    }


def in_zone(instant: datetime | None, zone: str) -> str | None:
    if instant is None:
        return None
    return f"{instant.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} ({zone})"


def _format_us(value: float | None) -> str | None:
    if value is None:
        return None
    return f"{plain(one_decimal(Decimal(str(value))))} µs"


def utc_iso(instant: datetime | None) -> str | None:
    if instant is None:
        return None
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _check_event(event: str) -> None:
    if event not in EVENTS:
        raise ValueError(f"unknown incident event {event!r}; expected one of {EVENTS}")
