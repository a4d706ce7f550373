"""The month header in a real browser, on the demo's breached lease (LX-2026-001, per GB,
a pair below its threshold for the last eight hours), on the lease page and on its SLA
history page, in both languages, on a desktop (1440 x 900) and a phone (390 x 900): the
header is on the first screen, says breached, and its figures are the draft invoice's for
that lease. The portal's clock is pinned to
the instant the demo was loaded at. Screenshots go to var/screenshots/."""

from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from accounts.choices import Role
from billing import invoicing
from billing.choices import LineKind
from billing.invoicing import USAGE_KINDS, LeaseFacts
from demo.history import load_history
from gpulease_verify.periods import Period
from leases.demo import load_demo
from leases.models import Lease, Tenant
from tests.factories import MembershipFactory

SIZES = {"desktop": 1440, "phone": 390}
HEIGHT = 900


def amount(text: str) -> Decimal:
    """ "¥-2,041.67" -> Decimal("-2041.67")."""
    return Decimal(text.strip().replace("¥", "").replace(",", ""))


def total(lines, *kinds: str) -> Decimal:  # type: ignore[no-untyped-def]
    return sum((line.amount for line in lines if line.kind in kinds), Decimal("0.00"))


PAGES = {"lease": "", "sla": "sla/"}  # the lease page, its SLA history


def test_the_demo_breached_lease_shows_the_draft_invoices_figures_on_the_first_screen(
    page, live_server, log_in, screenshot, monkeypatch, tmp_path
):
    with monkeypatch.context() as patch:
        patch.setattr(settings, "VAR_DIR", tmp_path)  # the demo's logins file
        load_demo()
        load_history(days=2)
    instant = timezone.now().replace(microsecond=0)
    monkeypatch.setattr("portal.selectors.now", lambda: instant)
    lease = Lease.objects.select_related("tenant").get(reference="LX-2026-001")
    period = str(Period.containing(instant, lease.tenant.time_zone))

    # The draft invoice, computed as `bill --dry-run` does, and the lease's lines on it.
    draft = invoicing.compute_invoice(tenant=lease.tenant, period=period)
    lines = [line for line in draft.lines if line.lease.pk == lease.pk]
    assert {line.kind for line in lines} >= {LineKind.NODE_RENT, LineKind.USAGE_GB}
    # The month so far: the rent (and any fee) of the window cut at the instant, by the
    # invoice's rules, and the traffic the draft bills (the samples so far).
    so_far, _credit = invoicing.month_lines(
        lease=lease, period=period, facts=LeaseFacts.of(lease), until=instant
    )
    fixed_so_far = total(so_far, LineKind.NODE_RENT, LineKind.NETWORK_FEE)
    usage = total(lines, *USAGE_KINDS)
    credit = total(lines, LineKind.SLA_CREDIT)

    member = MembershipFactory(role=Role.VIEWER, tenant=Tenant.objects.get(pk=lease.tenant_id))
    log_in(member.user)
    problems: list[str] = []
    for language in ("en", "zh-hans"):
        page.context.add_cookies(
            [{"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": live_server.url}]
        )
        for device, width in SIZES.items():
            page.set_viewport_size({"width": width, "height": HEIGHT})
            # The usage projection the lease page prints below its header, at the rate so far.
            page.goto(f"/leases/{lease.pk}/")
            projection = amount(page.locator("#usage-projection strong").inner_text())
            expected = {
                "to-date": fixed_so_far + usage,
                "projected": total(lines, LineKind.NODE_RENT, LineKind.NETWORK_FEE)
                + projection
                + credit,
                "credit": credit,
            }
            for name, path in PAGES.items():
                where = f"{name} {language} {device}"
                page.goto(f"/leases/{lease.pk}/{path}")
                screenshot(f"month-header-{name}-{device}-{language}")
                header = page.locator("#month-header")
                assert header.get_attribute("data-status") == "breached", where

                def field(name: str) -> str:
                    return header.locator(f'[data-field="{name}"]').inner_text()  # noqa: B023

                shown = {key: amount(field(key)) for key in ("to-date", "projected", "credit")}
                if shown != expected:
                    problems.append(f"{where}: {shown} != {expected}")
                reason = field("reason")
                if "SLA" not in reason:
                    problems.append(f"{where}: reason {reason!r}")
                box = header.bounding_box()
                assert box is not None
                if box["y"] + box["height"] > HEIGHT:
                    problems.append(
                        f"{where}: the header ends at {box['y'] + box['height']:.0f} px,"
                        f" below the first screen ({HEIGHT} px)"
                    )
                overflow = page.evaluate("document.documentElement.scrollWidth") - width
                if overflow > 0:
                    problems.append(f"{where}: the page scrolls sideways by {overflow} px")
    assert problems == []
