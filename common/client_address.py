"""The address a request came from, by one rule for the API's budgets (api.throttling, and
DRF's NUM_PROXIES for any throttle of its own), login lockouts (AXES_CLIENT_IP_CALLABLE)
and the access log's ``client``.

TRUSTED_PROXY_COUNT says how many proxies in front of gunicorn append to X-Forwarded-For
(the compose stack's Caddy: one). With 0, REMOTE_ADDR and nothing else: a client-written
X-Forwarded-For is never believed. With N, the address the outermost of those N proxies
saw: the N-th entry from the right, which a client cannot write. An entry that is no
address (a proxy misconfigured, or N larger than the real chain) falls back to
REMOTE_ADDR rather than becoming a lockout key nobody can clear."""

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.TRUSTED_PROXY_COUNT
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",")]
    try:
        return str(ipaddress.ip_address(hops[-min(proxies, len(hops))]))
    except ValueError:
        return remote
