"""A request id on every log line of a request, and on its response (``X-Request-ID``).

The id is generated per request. A proxy's own id is taken instead only when
``REQUEST_ID_HEADER`` names the header it sets (e.g. ``X-Request-ID``) and the value is a
short token; otherwise a client could write what it likes into the provider's logs."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse

_current: ContextVar[str] = ContextVar("request_id", default="-")
TOKEN = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def current() -> str:
    return _current.get()


def _incoming(request: HttpRequest) -> str | None:
    header = settings.REQUEST_ID_HEADER
    if not header:
        return None
    value = request.headers.get(header, "")
    return value if TOKEN.fullmatch(value) else None


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = _incoming(request) or uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = _current.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            _current.reset(token)
        response["X-Request-ID"] = request_id
        return response


class RequestIdFilter(logging.Filter):
    """Puts ``request_id`` on every record ("-" outside a request: workers, commands).
    Django logs a 4xx or 5xx after the middleware has returned, with the request attached."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            request = getattr(record, "request", None)
            record.request_id = getattr(request, "request_id", None) or _current.get()
        return True
