from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import APIRootView, DefaultRouter

from api import views, views_cosign, views_thresholds
from api.base import KnownQueryParametersMixin
from api.docs import RedocView, SwaggerView

app_name = "api"


class RootView(KnownQueryParametersMixin, APIRootView):
    """The index of the collections; it takes no query parameters."""


router = DefaultRouter()
router.include_format_suffixes = False
router.APIRootView = RootView
router.register("tenants", views.TenantViewSet, basename="tenant")
router.register("sites", views.SiteViewSet, basename="site")
router.register("fabrics", views.FabricViewSet, basename="fabric")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("leases", views.LeaseViewSet, basename="lease")
router.register("terms-amendments", views.TermsAmendmentViewSet, basename="termsamendment")
router.register("probe-runs", views.ProbeRunViewSet, basename="proberun")
router.register("incidents", views.IncidentViewSet, basename="incident")
router.register("invoices", views.InvoiceViewSet, basename="invoice")
router.register("credit-notes", views.CreditNoteViewSet, basename="creditnote")
router.register("vouchers", views.VoucherViewSet, basename="voucher")
router.register("api-tokens", views.ApiTokenViewSet, basename="apitoken")
router.register("tenant-keys", views_cosign.TenantKeyViewSet, basename="tenantkey")
router.register("thresholds", views_thresholds.ThresholdViewSet, basename="threshold")

urlpatterns = [
    path("v1/", include(router.urls)),
    path("v1/", include("api.audit_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("redoc/", RedocView.as_view(url_name="api:schema"), name="redoc"),
]
