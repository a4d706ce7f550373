"""The site's URLs plus views that fail on purpose, for the error-page tests."""

from django.core.exceptions import PermissionDenied
from django.urls import path

from config.urls import handler403, handler404, handler500
from config.urls import urlpatterns as site_patterns


def _boom(request):  # type: ignore[no-untyped-def]
    raise RuntimeError("a bug")


def _refused(request):  # type: ignore[no-untyped-def]
    raise PermissionDenied


urlpatterns = [
    path("boom/", _boom),
    path("api/v1/boom/", _boom),
    path("refused/", _refused),
    path("api/v1/refused/", _refused),
    *site_patterns,
]
__all__ = ["handler403", "handler404", "handler500", "urlpatterns"]
