from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from portal import views

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
    path("leases/<int:pk>/sla/", views.lease_sla, name="lease-sla"),
    path("invoices/", views.invoice_list, name="invoices"),
    path("invoices/<int:pk>.csv", views.invoice_csv, name="invoice-csv"),
    path("invoices/<int:pk>/", views.invoice_detail, name="invoice"),
]
