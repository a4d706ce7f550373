"""Request budgets of the portal's pages (api.throttling holds every budget): each
signed-in user has PORTAL_RATE_LIMIT over every portal route (an anonymous visitor: their
address), and the signed audit bundle, built on demand, AUDIT_BUNDLE_RATE_LIMIT on top,
shared with the API's bundle route. Past one: 429 with Retry-After and a page that says
when to come back, in the visitor's language."""

import math
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from api.throttling import AuditBundleRateThrottle, PortalRateThrottle, UserRateThrottle

BUNDLE_ROUTE = "lease-audit"


class PortalRateLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable, view_args: tuple, view_kwargs: dict
    ) -> HttpResponse | None:
        match = request.resolver_match
        if match is None or match.namespace != "portal":
            return None
        budgets: list[UserRateThrottle] = [PortalRateThrottle()]
        if match.url_name == BUNDLE_ROUTE:
            budgets.insert(0, AuditBundleRateThrottle())
        for budget in budgets:
            if not budget.allow_request(request, None):  # type: ignore[arg-type]
                return _too_many(request, budget)
        return None


def _too_many(request: HttpRequest, budget: UserRateThrottle) -> HttpResponse:
    seconds = max(1, math.ceil(budget.wait() or 1))
    response = render(
        request,
        "portal/rate_limited.html",
        {"seconds": seconds, "bundle": isinstance(budget, AuditBundleRateThrottle)},
        status=429,
    )
    response["Retry-After"] = str(seconds)
    return response
