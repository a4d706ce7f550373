"""``GET /metrics``: Prometheus exposition format, for the provider's NOC.

Who may scrape: a request carrying ``Authorization: Bearer <METRICS_TOKEN>`` (Prometheus's
``authorization`` or ``bearer_token_file``), or one from an address in
``METRICS_ALLOWED_NETWORKS``. With both set, either suffices. With neither set, only
loopback may scrape, and only when DEBUG is on: production refuses (403) until one is
configured. The address is REMOTE_ADDR (a proxy in front must not be trusted for it)."""

import hmac
import ipaddress
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ViewSet

from api.base import KnownQueryParametersMixin
from api.throttling import AddressGuard
from monitoring import alertmanager, metrics
from monitoring.serializers import WebhookSerializer

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def _address(request: HttpRequest) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def bearer_matches(request: HttpRequest, expected: str) -> bool:
    """A constant-time comparison of ``Authorization: Bearer X`` with the expected token."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given or not expected:
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def scrape_allowed(request: HttpRequest) -> bool:
    token: str = settings.METRICS_TOKEN
    networks = settings.METRICS_ALLOWED_NETWORKS
    address = _address(request)
    if token and bearer_matches(request, token):
        return True
    if networks and address is not None and any(address in net for net in networks):
        return True
    if not token and not networks:
        return settings.DEBUG and address is not None and any(address in n for n in LOOPBACK)
    return False


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not scrape_allowed(request):
        return HttpResponse(
            "Forbidden: /metrics needs METRICS_TOKEN (Authorization: Bearer) or an address "
            "in METRICS_ALLOWED_NETWORKS.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)


# --------------------------------------------------------------------------------------
# Alertmanager's webhook: POST /api/v1/alertmanager/alerts/
# --------------------------------------------------------------------------------------


class AlertmanagerClient:
    """Who a request carrying ALERTMANAGER_TOKEN is: no user, no tenant, no staff."""

    is_authenticated = True
    is_active = True
    is_staff = False
    pk = None
    username = "alertmanager"


class AlertmanagerAuthentication(BaseAuthentication):
    """``Authorization: Bearer <ALERTMANAGER_TOKEN>`` (Alertmanager's webhook_config
    http_config.authorization). A wrong token is a 401 that spends the address's budget;
    with no token configured the intake is closed."""

    def authenticate(self, request: Request) -> tuple[AlertmanagerClient, None] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        if not settings.ALERTMANAGER_TOKEN:
            raise exceptions.AuthenticationFailed(
                "The Alertmanager intake is closed: ALERTMANAGER_TOKEN is not set."
            )
        if not bearer_matches(request, settings.ALERTMANAGER_TOKEN):
            raise exceptions.AuthenticationFailed("Unknown Alertmanager token.")
        return AlertmanagerClient(), None

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="gpulease-alertmanager"'


class IsAlertmanager(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.user, AlertmanagerClient):
            raise exceptions.NotAuthenticated(
                "Send Authorization: Bearer <ALERTMANAGER_TOKEN> (webhook_config http_config)."
            )
        return True


@extend_schema(exclude=True)  # machine-to-machine intake of the provider's Alertmanager
class AlertmanagerWebhookViewSet(KnownQueryParametersMixin, ViewSet):
    """POST only (``as_view({"post": "create"})``); unknown query parameters are refused."""

    authentication_classes = [AddressGuard, AlertmanagerAuthentication]
    permission_classes = [IsAlertmanager]
    throttle_classes: list[Any] = []  # Alertmanager retries; guessing is held by AddressGuard

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not isinstance(request.data, dict):
            raise exceptions.ValidationError(_("The body must be a JSON object."))

    def create(self, request: Request) -> Response:
        serializer = WebhookSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = alertmanager.take_in(serializer.validated_data)
        return Response(result.as_dict(), status=200)
