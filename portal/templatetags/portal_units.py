"""Units on every number: bandwidth in Gbit/s, money in ¥, shares in %."""

from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils.translation import gettext as _

from billing.documents import labels
from gpulease_verify.money import format_cny
from gpulease_verify.units import format_bps, plain

register = template.Library()


@register.filter
def bps(value: int | Decimal | str | None) -> str:
    return format_bps(Decimal(value)) if value not in (None, "") else _("no measurement")


@register.filter
def gbps(value: Decimal | str | None) -> str:
    return f"{plain(Decimal(value))} Gbit/s" if value not in (None, "") else "-"


@register.filter
def cny(value: Decimal | str | None) -> str:
    return format_cny(Decimal(value)) if value not in (None, "") else "-"


@register.filter
def percent(value: Decimal | str | None) -> str:
    return f"{Decimal(value)} %" if value not in (None, "") else _("no data")


@register.filter
def share_percent(value: Decimal | str | None) -> str:
    """A share of 1 as a percent to 0.01: 0.650000 -> "65.00 %"."""
    if value in (None, ""):
        return "-"
    return f"{(Decimal(value) * 100).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)} %"


@register.filter
def hours(value: Decimal | str | None) -> str:
    if value in (None, ""):
        return "-"
    return _("%(hours)s GPU-hours") % {"hours": plain(Decimal(value).quantize(Decimal("0.1")))}


@register.filter
def minutes(value: int | None) -> str:
    return _("%(minutes)s min") % {"minutes": value or 0}


@register.filter
def line_text(line) -> str:  # type: ignore[no-untyped-def]
    """An invoice or credit note line's description in the active language."""
    return labels.line_text(line)


@register.filter
def unit_text(unit: str) -> str:
    return labels.unit_text(unit)


@register.filter
def share(value: Decimal | str | None) -> str:
    """A fraction (0.2857) as a percentage with two decimals (28.57 %)."""
    if value in (None, ""):
        return "-"
    return f"{(Decimal(value) * 100).quantize(Decimal('0.01'))} %"
