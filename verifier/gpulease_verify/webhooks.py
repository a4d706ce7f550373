"""Signing and verifying gpulease's webhooks, the Standard Webhooks way
(https://www.standardwebhooks.com/, spec v1): the server signs with these functions, and a
receiver may verify with `verify` or with any Standard Webhooks library.

Each delivery carries three headers:

- ``webhook-id``: the message id, the same on every retry of one event (drop a repeat);
- ``webhook-timestamp``: the attempt's time, integer seconds since the Unix epoch;
- ``webhook-signature``: ``v1,<base64 of HMAC-SHA256 over "id.timestamp.body">``, keyed by
  the secret's bytes (possibly several signatures, space-separated).

The secret is ``whsec_`` followed by the base64 of its bytes. A receiver refuses a
timestamp more than TOLERANCE_S away from its clock, so a captured delivery cannot be
replayed later; within the window, it drops an id it has already taken."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"
TOLERANCE_S = 300
# The spec asks for 24 to 64 random bytes; new secrets have 32. Older secrets converted
# with secret_from_key keep whatever length they had.
SECRET_BYTES = 32


class WebhookRefused(Exception):
    """The delivery is not one to act on: a header missing, the signature wrong, or the
    timestamp outside the tolerance (a replay, or a clock far off)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_from_key(key: bytes) -> str:
    """The ``whsec_`` form of a key's bytes (gpulease's secrets before Standard Webhooks were
    64 hex characters used as text: their key is those 64 bytes)."""
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key a ``whsec_`` secret stands for; ValueError for anything else."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret starts with {SECRET_PREFIX}")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise ValueError("a webhook secret is whsec_ followed by base64") from None
    if not key:
        raise ValueError("a webhook secret may not be empty")
    return key


def signature(*, secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(
    *, secret: str, msg_id: str, timestamp: int, body: bytes, also: Sequence[str] = ()
) -> dict[str, str]:
    """The three headers; ``also``: more secrets that sign too, space-separated after the
    first (a rotated-out secret during its overlap, so receivers can switch at leisure)."""
    signed = [
        signature(secret=key, msg_id=msg_id, timestamp=timestamp, body=body)
        for key in (secret, *also)
    ]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signed),
    }


def verify(
    *,
    secret: str,
    body: bytes,
    headers: dict[str, str],
    now: float,
    tolerance_s: int = TOLERANCE_S,
) -> str:
    """Check a received delivery (``body`` exactly as received, ``now`` the receiver's
    Unix time); its id when it is genuine and fresh, else WebhookRefused. The caller
    still drops an id it has already taken within the tolerance."""
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id", "")
    stamp = lowered.get("webhook-timestamp", "")
    given = lowered.get("webhook-signature", "")
    if not (msg_id and stamp and given):
        raise WebhookRefused("webhook-id, webhook-timestamp and webhook-signature are required")
    if not stamp.isascii() or not stamp.isdigit():
        raise WebhookRefused("webhook-timestamp is not whole seconds")
    timestamp = int(stamp)
    if timestamp < now - tolerance_s:
        raise WebhookRefused(f"webhook-timestamp is more than {tolerance_s} s old: a replay?")
    if timestamp > now + tolerance_s:
        raise WebhookRefused(f"webhook-timestamp is more than {tolerance_s} s ahead")
    expected = signature(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in given.split(" ")):
        raise WebhookRefused("no signature matches the body")
    return msg_id
