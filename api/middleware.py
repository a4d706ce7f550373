"""Oversized request bodies to /api/ answer 413 in the API's error format before any view
reads them. The limit is Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB by default)."""

import json
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from api.exceptions import error_body


class ApiBodySizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > limit:
                body = error_body(
                    "payload_too_large",
                    f"The request body has {length} bytes; the limit is {limit} bytes.",
                )
                return HttpResponse(json.dumps(body), status=413, content_type="application/json")
        return self.get_response(request)
