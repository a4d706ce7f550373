"""Canonical JSON, the only encoding gpulease hashes and signs.

``canonical_json`` is JSON with the keys sorted, no whitespace (``","`` and ``":"``),
non-ASCII characters written as themselves, the whole text encoded as UTF-8, and no NaN or
infinity. Numbers in hashed or signed documents are integers; anything fractional (money,
percentages, floats) is written as text, so any JSON library reproduces the bytes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

CANONICAL = "JSON, sorted keys, no spaces, UTF-8"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace; NaN and infinities are refused."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def iso_utc(instant: datetime | None) -> str | None:
    """An aware instant as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (always six fraction digits)."""
    if instant is None:
        return None
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def number_text(value: float | None) -> str | None:
    """A float as the shortest text that reads back to the same double (Python's repr), so
    that the hashed content holds no JSON float whose printing differs between languages."""
    return None if value is None else repr(float(value))
