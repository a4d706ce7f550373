"""Audit bundle, evidence and dispute routes (see api/views_audit.py), under /api/v1/."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from api import views_audit as views

router = SimpleRouter()
router.include_format_suffixes = False
router.register("disputes", views.DisputeViewSet, basename="dispute")
router.register("evidence", views.EvidenceViewSet, basename="evidence")

urlpatterns = [
    path("audit/public-key/", views.PublicKeyView.as_view(), name="audit-public-key"),
    path(
        "leases/<int:pk>/audit/",
        views.LeaseAuditViewSet.as_view({"get": "bundle"}, detail=True),
        name="lease-audit",
    ),
    path(
        "leases/<int:pk>/checkpoints/",
        views.LeaseCheckpointViewSet.as_view({"get": "list_checkpoints"}, detail=True),
        name="lease-checkpoints",
    ),
    path(
        "leases/<int:pk>/evidence/",
        views.LeaseEvidenceViewSet.as_view({"get": "list_evidence", "post": "submit"}, detail=True),
        name="lease-evidence",
    ),
    *router.urls,
]
