"""Every 4xx of the API has one shape:

    {"error": {"code": "invalid", "message": "One sentence.", "fields": {"name": ["..."]}}}

``fields`` is present (possibly empty) on every error; it names the offending inputs of a
validation error. Django ValidationErrors raised by services become 400 with their
sentences."""

from typing import Any

from django.core import exceptions as django_exceptions
from django.core.exceptions import RequestDataTooBig
from django.db import DataError
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "The request conflicts with the current state of the resource."


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail: Any) -> Any:
    """ErrorDetail trees as plain strings (lists of sentences per field)."""
    if isinstance(detail, dict):
        return {str(key): _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_flatten(item) for item in detail]
    return str(detail)


def _first_sentence(detail: Any) -> str | None:
    if isinstance(detail, dict):
        for value in detail.values():
            found = _first_sentence(value)
            if found:
                return found
        return None
    if isinstance(detail, list):
        for item in detail:
            found = _first_sentence(item)
            if found:
                return found
        return None
    return str(detail)


def _validation_message(fields: dict[str, Any]) -> str:
    general = fields.get("non_field_errors")
    if general:
        return _first_sentence(general) or _("The request is not valid.")
    for name, errors in fields.items():
        sentence = _first_sentence(errors)
        if sentence:
            return f"{name}: {sentence}"
    return _("The request is not valid.")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # Imported here: rest_framework.views reads the API settings, which import this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, django_exceptions.ValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(str(exc) or _("The request body is too large."))
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(_("Not found."))
    elif isinstance(exc, DataError):
        # A value the filters accepted but the database cannot hold (a date in year 1530
        # with a -19:16 offset, a number past bigint): the request's fault, not ours.
        exc = exceptions.ValidationError(
            _("A value in the request is out of range: %(reason)s")
            % {"reason": str(exc).splitlines()[0]}
        )
    elif isinstance(exc, django_exceptions.PermissionDenied):
        # A service's refusal keeps its sentence; a bare PermissionDenied gets DRF's.
        exc = exceptions.PermissionDenied(str(exc) or None)
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        from api.throttling import note_failed_authentication

        note_failed_authentication(context.get("request"))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a server error: Django's 500 handling and logging apply
    assert isinstance(exc, exceptions.APIException)
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        if not isinstance(detail, dict):
            detail = {"non_field_errors": detail if isinstance(detail, list) else [detail]}
        fields = _flatten(detail)
        if "__all__" in fields:  # Django's name for errors of the whole object
            fields["non_field_errors"] = fields.pop("__all__")
        body = error_body("invalid", _validation_message(fields), fields)
    else:
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        body = error_body(str(code), _first_sentence(exc.detail) or str(exc.default_detail))
    response.data = body
    return response
