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


# JSON numbers beyond this lose precision in JavaScript and many other readers.
MAX_SAFE_INTEGER = 2**53


class StrictJSONError(ValueError):
    """A file that is not strict JSON for gpulease: the message is one sentence."""


def _no_constants(name: str) -> Any:
    raise StrictJSONError(f"the file holds {name}, which JSON does not allow")


def _no_floats(text: str) -> Any:
    raise StrictJSONError(
        f"the file holds the number {text}; signed documents write fractions as text, so a "
        "fractional number means the file was not written canonically"
    )


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise StrictJSONError(f'the file repeats the key "{key}" in one object')
        seen[key] = value
    return seen


def _check_values(value: Any) -> None:
    """Integers within ±2^53 and strings without lone surrogates, everywhere."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int):
            if abs(item) > MAX_SAFE_INTEGER:
                raise StrictJSONError(
                    f"the file holds the integer {item}, beyond ±2^53 where JSON readers disagree"
                )
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise StrictJSONError(
                    f"the file holds a lone UTF-16 surrogate in the text {item[:40]!r}"
                ) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def strict_loads(text: str, name: str = "the file") -> Any:
    """JSON as gpulease signs it, read strictly: refuses a key repeated in one object (a
    reader may keep either value), NaN and infinities, any fractional number (canonical
    documents write fractions as text), integers beyond ±2^53 and lone surrogates. Raises
    ``StrictJSONError`` with a sentence naming the problem, the input called ``name``."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique,
            parse_constant=_no_constants,
            parse_float=_no_floats,
        )
        _check_values(value)
    except StrictJSONError as error:
        raise StrictJSONError(name + str(error).removeprefix("the file")) from None
    except json.JSONDecodeError as error:
        raise StrictJSONError(
            f"{name} is not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    return value


def parse_instant(text: str) -> datetime:
    """An instant as ``iso_utc`` writes it (or any ISO 8601 text with an offset), in UTC."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
