from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy as _

from config.health import healthz, readyz
from monitoring.views import metrics_view

admin.site.site_header = _("gpulease provider portal")
admin.site.site_title = "gpulease"
admin.site.index_title = _("gpulease provider portal")

urlpatterns = [
    path("i18n/", include("django.conf.urls.i18n")),
    path("healthz", healthz, name="health"),
    path("readyz", readyz, name="ready"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/", include("api.urls")),
    path("", include("portal.urls")),
]
