"""Provider pages: the whole fleet, fabric health, network cost share and open incidents,
across every tenant. Provider staff only (``common.querysets.is_provider_staff``); to
anybody else these pages do not exist (404), so their addresses reveal nothing."""

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _

from common.querysets import is_provider_staff
from portal import month_header, provider_selectors, selectors


def provider_staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous: off to log in, as every portal page. Signed in but not provider staff:
    404, the same answer as for a page that does not exist."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:  # type: ignore[no-untyped-def]
        if not is_provider_staff(request.user):
            raise Http404(_("No such page."))
        return view(request, *args, **kwargs)

    return wrapped


@provider_staff_required
def fleet(request: HttpRequest) -> HttpResponse:
    instant = selectors.now()
    rows = provider_selectors.fleet_overview(user=request.user, instant=instant)
    header = month_header.for_rows(rows, incidents_url=reverse("portal:incidents"))
    return render(request, "portal/provider_fleet.html", {"rows": rows, "header": header})


@provider_staff_required
def fabrics(request: HttpRequest) -> HttpResponse:
    health = provider_selectors.fabric_health(user=request.user, instant=selectors.now())
    return render(
        request,
        "portal/provider_fabrics.html",
        {
            "fabrics": health,
            "days": provider_selectors.FABRIC_DAYS,
            "flag_percent": provider_selectors.FAILURE_FLAG_PERCENT,
        },
    )


@provider_staff_required
def cost_share(request: HttpRequest) -> HttpResponse:
    period = request.GET.get("period", "") or provider_selectors.default_period(selectors.now())
    if not provider_selectors.valid_period(period):
        error = _(
            "The period must be a month written YYYY-MM, for example 2026-11; got %(period)s."
        ) % {"period": period[:20]}
        return render(
            request,
            "portal/provider_cost_share.html",
            {"period": period[:20], "error": error, "share": None},
            status=400,
        )
    share = provider_selectors.cost_share(user=request.user, period=period)
    return render(
        request,
        "portal/provider_cost_share.html",
        {"period": period, "error": None, "share": share},
    )


@provider_staff_required
def incidents(request: HttpRequest) -> HttpResponse:
    rows = provider_selectors.open_incidents(user=request.user)
    return render(request, "portal/provider_incidents.html", {"incidents": rows})
