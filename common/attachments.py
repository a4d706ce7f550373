"""Responses a browser saves as a file. The file name is put in Content-Disposition by
Django's helper (RFC 6266): quotes and backslashes escaped, and a name that is not plain
printable ASCII (Chinese, a CR or LF from a lease reference stored before references were
checked) sent percent-encoded as ``filename*``, so no name can break the header."""

from django.http import HttpResponse
from django.utils.http import content_disposition_header


def attachment(body: bytes | str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response
