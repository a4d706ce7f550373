"""One log format for every process: web (Django and gunicorn's own lines, master and
workers), the Celery worker and beat. Built without Django's settings, so gunicorn's master
uses it before any app is loaded (monitoring/gunicorn.py) and Celery before Django is set
up (config/celery.py); settings.LOGGING is the same dictionary.

- ``LOG_FORMAT=json``: one JSON object a line: ``time`` (UTC, ISO 8601 with its offset),
  ``level``, ``logger``, ``message``, ``request_id`` ("-" outside a request), and what the
  record carries besides (an access line's fields, ``exc_info``).
- ``plain`` (the default): ``TIME LEVEL LOGGER MESSAGE`` with the same UTC time.

Both redact before a line is written (``redact``): the value of a query or form parameter
named like a secret, a URL's password, a bearer credential and the secret part of an API
token, wherever in the line they appear."""

from __future__ import annotations

import logging
import os
import re
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

FORMATS = ("plain", "json")
# Where Django's middleware leaves what only the app knows (route name, user, tenants,
# client address) for gunicorn's access line (monitoring.gunicorn.AccessLogger): a key of
# the WSGI environ, which Django's request.META is.
ACCESS_ENVIRON_KEY = "gpulease.access"
REDACTED = "***"

# A parameter whose name says it holds a secret: token, access_token, csrfmiddlewaretoken,
# api_key, key, secret, client_secret, password, passwd, signature, X-Amz-Signature, sig,
# session, sessionid, auth, authorization, credential.
_SECRET_PARAMETER = re.compile(
    r"(?i)(?<![\w.-])("
    r"[\w.-]*?(?:token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|signature|credential)"
    r"|key|sig|pwd|session(?:id)?|auth(?:orization)?"
    r")=[^&\s\"'#;,<>\\]+"
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@\"']*:)[^@/\s\"']+@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
# gpulease's API tokens, gpl_<prefix>_<secret> (accounts.models.new_token_parts): the prefix is
# not secret and tells tokens apart, so it stays.
_API_TOKEN = re.compile(r"\b(gpl_[0-9a-f]+_)[A-Za-z0-9_-]+")


def redact(text: str) -> str:
    text = _SECRET_PARAMETER.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    text = _URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", text)
    text = _BEARER.sub(rf"\g<1>{REDACTED}", text)
    return _API_TOKEN.sub(rf"\g<1>{REDACTED}", text)


def _redacted(value: Any) -> Any:
    """Every string inside a record's fields redacted; anything JSON cannot hold becomes its
    (redacted) text, so nothing is turned into text after redaction."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {str(key): _redacted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_redacted(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redact(str(value))


class _UtcIsoTime:
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(_UtcIsoTime, _JsonFormatter):
    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return _redacted(super().process_log_record(log_data))


class PlainFormatter(_UtcIsoTime, logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def log_format() -> str:
    """LOG_FORMAT, read here for gunicorn's master, Celery and the settings alike."""
    value = os.environ.get("LOG_FORMAT", "plain") or "plain"
    if value not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be plain or json, not {value!r}.")
    return value


def environment_config() -> dict[str, Any]:
    """logging_config for LOG_FORMAT and LOG_LEVEL: what gunicorn's master and Celery
    apply before Django's settings are loaded (settings.LOGGING is the same)."""
    return logging_config(log_format(), os.environ.get("LOG_LEVEL", "INFO") or "INFO")


def logging_config(log_format: str, level: str = "INFO") -> dict[str, Any]:
    """The dictConfig of every process. Gunicorn's loggers hand their lines to the root's
    handler (gunicorn.error) or to one of their own (gunicorn.access, whose plain form
    spells out the access fields)."""
    if log_format not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be plain or json, not {log_format!r}.")
    head = "%(asctime)s %(levelname)s %(name)s %(message)s"
    access_fields = (
        " request_id=%(request_id)s route=%(route)s status=%(status)s"
        " latency_ms=%(latency_ms)s user=%(user_id)s tenants=%(tenant_ids)s"
    )
    json_formatter = {
        "()": "common.logs.JsonFormatter",
        "fmt": head + " %(request_id)s",
        "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        # The request itself is not written (django.request attaches it to 4xx and 5xx
        # lines): its repr holds the query string, and the access line has what matters.
        "reserved_attrs": [*RESERVED_ATTRS, "request", "server_time", "taskName"],
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "common.request_id.RequestIdFilter"}},
        "formatters": {
            "plain": {"()": "common.logs.PlainFormatter", "fmt": head},
            "json": json_formatter,
            "access_plain": {"()": "common.logs.PlainFormatter", "fmt": head + access_fields},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["request_id"],
            },
            "access": {
                "class": "logging.StreamHandler",
                "formatter": "json" if log_format == "json" else "access_plain",
                "filters": ["request_id"],
            },
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # asyncssh logs every channel at INFO: one line per command of every probe.
            "asyncssh": {"level": "WARNING"},
            # gunicorn's levels stay its own (--log-level); only where the lines go is set.
            "gunicorn.error": {"handlers": [], "propagate": True},
            "gunicorn.access": {"handlers": ["access"], "propagate": False},
        },
    }
