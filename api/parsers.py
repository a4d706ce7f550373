"""JSON bodies only, read with a cap: a body longer than DATA_UPLOAD_MAX_MEMORY_SIZE (sent
without a Content-Length, for instance) is refused with 413 instead of being read whole.

What Python's json module would take but nothing behind it should see is refused here,
once for every route: NaN, Infinity and numbers that overflow to it (9e999), nesting
deeper than MAX_DEPTH (json.loads raises RecursionError at about 1,000 levels), NUL
characters, which PostgreSQL's text and jsonb columns cannot hold (SQLite can, so without
this rule the same request would be stored on one database and fail on the other), and
lone surrogates ("\ud800" without its pair), which json.loads takes but no UTF-8 text can
hold: not the database, and not the error that would name them."""

import json
import math
import re
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from api.exceptions import PayloadTooLarge

# The deepest body the API takes is 4 levels (a lease's terms' windows); 32 leaves room.
MAX_DEPTH = 32


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1 if limit is not None else -1) if stream else b""
        if limit is not None and len(raw) > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        encoding = (parser_context or {}).get("encoding") or "utf-8"
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(
                _("The body is not valid %(encoding)s: %(reason)s at offset %(at)s.")
                % {"encoding": encoding.upper(), "reason": exc.reason, "at": exc.start}
            ) from None
        try:
            data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
        except RecursionError:
            raise _too_deep() from None
        except ValueError as exc:
            raise ParseError(f"The body is not valid JSON: {exc}") from None
        if _depth(data) > MAX_DEPTH:
            raise _too_deep()
        _refuse_unstorable(data)
        return data


def _too_deep() -> ParseError:
    return ParseError(
        _("The JSON is nested more than %(depth)s levels deep.") % {"depth": MAX_DEPTH}
    )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    """A JSON number as a float, unless it overflows one (9e999 would be infinity)."""
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text} is too large a number")
    return number


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    if isinstance(value, list):
        return value
    return []


def _depth(data: Any) -> int:
    """How many arrays and objects deep ``data`` is, counted without recursion."""
    depth, level = 0, [data]
    while True:
        containers = [value for value in level if isinstance(value, dict | list)]
        if not containers:
            return depth
        depth += 1
        level = [child for value in containers for child in _children(value)]


# Text no column can store: NUL, and a UTF-16 surrogate that json.loads did not pair.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _unstorable(data: Any) -> str | None:
    """The first character in ``data``'s text (keys and values) that cannot be stored."""
    pending = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            found = _UNSTORABLE.search(value)
            if found:
                return found.group()
        pending.extend(_children(value))
    return None


def _refusal(character: str) -> str:
    if character == "\x00":
        return _("Text may not contain the NUL character (U+0000).")
    return _(
        "Text may not contain a lone surrogate (U+%(code)04X): half of a UTF-16 pair, "
        "not a character."
    ) % {"code": ord(character)}


def _printable(key: str) -> str:
    """A key as the error can name it: a surrogate as its escape (UTF-8 cannot carry it)."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _refuse_unstorable(data: Any) -> None:
    """A 400 naming the top-level field whose text (a key or a value) holds U+0000 or a
    lone surrogate."""
    if not isinstance(data, dict):
        found = _unstorable(data)
        if found:
            raise ValidationError(_refusal(found))
        return
    for key, value in data.items():
        found = _unstorable(key) or _unstorable(value)
        if found:
            raise ValidationError({_printable(key): [_refusal(found)]})
