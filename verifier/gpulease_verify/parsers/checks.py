"""The checks every parser in this package makes on what it reads (text a tool could
print) and on what it returns (names as tools print them, figures a row can store)."""

from __future__ import annotations

from .base import ParseError


def readable(text: str, tool: str) -> str:
    """`text` unchanged, or ParseError when it holds a NUL byte (PostgreSQL cannot keep
    one, and no tool prints one) or a lone surrogate (not encodable as UTF-8)."""
    if "\x00" in text:
        raise ParseError(f"the {tool} output contains NUL bytes: it is not text the tool prints")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParseError(f"the {tool} output is not valid UTF-8 text") from None
    return text


def name(value: str, what: str) -> str:
    """A device or interface name as a tool prints it: no blanks or control characters,
    at most 64 characters (JSON may carry any of them escaped)."""
    if not value or len(value) > 64 or not value.isprintable() or any(c.isspace() for c in value):
        raise ParseError(f"{what} {value[:64]!r} is not a device or interface name")
    return value
