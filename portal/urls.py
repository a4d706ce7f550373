from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from portal import (
    audit_views,
    customer_views,
    incident_views,
    provider_views,
    settings_views,
    signing_views,
    views,
)

app_name = "portal"

urlpatterns = [
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(
            template_name="portal/login.html", next_page=reverse_lazy("portal:overview")
        ),
        name="login",
    ),
    path(
        "accounts/logout/",
        auth_views.LogoutView.as_view(next_page=reverse_lazy("portal:login")),
        name="logout",
    ),
    path("", views.overview, name="overview"),
    path("leases/<int:pk>/", views.lease_detail, name="lease"),
    path("leases/<int:pk>/sla/", audit_views.lease_sla, name="lease-sla"),
    path(
        "leases/<int:pk>/incidents/<int:incident_pk>/",
        incident_views.incident_detail,
        name="incident",
    ),
    path("leases/<int:pk>/charts/<slug:chart>.csv", views.chart_csv, name="chart-csv"),
    path("leases/<int:pk>/audit/<str:period>.json", audit_views.audit_bundle, name="lease-audit"),
    path("leases/<int:pk>/checkpoint.json", audit_views.checkpoint, name="lease-checkpoint"),
    path(
        "leases/<int:pk>/evidence/new/",
        customer_views.evidence_upload,
        name="evidence-upload",
    ),
    path(
        "leases/<int:pk>/evidence/<int:evidence_pk>/",
        customer_views.evidence_detail,
        name="evidence",
    ),
    path("tokens/", customer_views.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", customer_views.token_revoke, name="token-revoke"),
    path("signing-keys/", signing_views.signing_keys, name="signing-keys"),
    path(
        "signing-keys/<int:pk>/revoke/",
        signing_views.signing_key_revoke,
        name="signing-key-revoke",
    ),
    path("settings/", settings_views.tenant_settings_page, name="tenant-settings"),
    path("amendments/<int:pk>/", signing_views.amendment_detail, name="amendment"),
    path("invoices/", views.invoice_list, name="invoices"),
    path("vouchers/", views.voucher_list, name="vouchers"),
    path("vouchers/<int:pk>/", views.voucher_detail, name="voucher"),
    path("invoices/<int:pk>.csv", views.invoice_csv, name="invoice-csv"),
    path("invoices/<int:pk>.pdf", views.invoice_pdf, name="invoice-pdf"),
    path("invoices/<int:pk>.xlsx", views.invoice_xlsx, name="invoice-xlsx"),
    path("invoices/<int:pk>.einvoice.json", views.invoice_einvoice, name="invoice-einvoice"),
    path("invoices/<int:pk>/", views.invoice_detail, name="invoice"),
    path("credit-notes/<int:pk>.pdf", views.credit_note_pdf, name="credit-note-pdf"),
    path(
        "credit-notes/<int:pk>.einvoice.json",
        views.credit_note_einvoice,
        name="credit-note-einvoice",
    ),
    path("provider/", provider_views.fleet, name="fleet"),
    path("provider/fabrics/", provider_views.fabrics, name="fabrics"),
    path("provider/cost-share/", provider_views.cost_share, name="cost-share"),
    path("provider/incidents/", provider_views.incidents, name="incidents"),
]
