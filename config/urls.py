from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from api import urls as api_urls
from common.health import healthz, readyz
from monitoring.views import AlertmanagerWebhookViewSet, metrics_view

admin.site.site_header = _("gpulease provider portal")
admin.site.site_title = "gpulease"
admin.site.index_title = _("gpulease provider portal")


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page says; send them to the real one."""
    return redirect(static("portal/favicon.svg"), permanent=True)


# The api namespace: the API's own routes, and the provider's Alertmanager webhook
# (monitoring.alertmanager; ALERTMANAGER_TOKEN only), which monitoring serves on the API's
# prefix without the API knowing it (apps import one way: docs/architecture-layers.md).
api_routes = [
    *api_urls.urlpatterns,
    path(
        "v1/alertmanager/alerts/",
        AlertmanagerWebhookViewSet.as_view({"post": "create"}),
        name="alertmanager-alerts",
    ),
]

urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("healthz", healthz, name="health"),
    path("readyz", readyz, name="ready"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/", include((api_routes, api_urls.app_name))),
    path("", include("portal.urls")),
]

handler403 = "portal.errors.forbidden"
handler404 = "portal.errors.not_found"
handler500 = "portal.errors.server_error"
