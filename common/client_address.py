"""The address a request came from: REMOTE_ADDR, unless API_NUM_PROXIES says how many
proxies in front of gunicorn append to X-Forwarded-For (the compose stack's Caddy: one);
then the address the outermost of them saw. A client-written X-Forwarded-For is never
believed. One rule for the API's budgets (DRF's NUM_PROXIES, whose reading this is), login
lockouts (AXES_CLIENT_IP_CALLABLE) and the access log's ``client``."""

from django.http import HttpRequest
from rest_framework.throttling import BaseThrottle


def client_address(request: HttpRequest) -> str:
    return BaseThrottle().get_ident(request)  # type: ignore[arg-type]
