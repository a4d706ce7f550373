"""The site's own error pages: branded, in the visitor's language, never a database read
(a 500 may be the database's). Under /api/ the same errors answer in the API's own JSON
error body (``api.exceptions.error_body``), so a script never parses an HTML page: an
unknown API route or a server error reads like any other API error."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.utils.translation import gettext as _

from api.exceptions import error_body


def _api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _api(request):
        return JsonResponse(error_body("not_found", _("Not found.")), status=404)
    return render(request, "404.html", status=404)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _api(request):
        message = _("You do not have permission to perform this action.")
        return JsonResponse(error_body("permission_denied", message), status=403)
    return render(request, "403.html", status=403)


def server_error(request: HttpRequest) -> HttpResponse:
    if _api(request):
        return JsonResponse(error_body("server_error", _("A server error occurred.")), status=500)
    # No context processors: the page must render when the database does not answer.
    return HttpResponse(loader.get_template("500.html").render(), status=500)
