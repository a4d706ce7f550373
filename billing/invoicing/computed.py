"""What an invoice computation gives, before anything is saved: ``ComputedLine`` and
``ComputedInvoice``, the month being billed (``Month``), the order and English names of
line kinds, and the formatting every line's description and detail use."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from billing.choices import LineKind
from gpulease_verify.calculations import RateGroup, prorate
from gpulease_verify.money import ROUNDING
from gpulease_verify.periods import Period, PeriodError
from leases.choices import BillingMode
from leases.models import Lease, Tenant

QUANTITY = Decimal("0.000001")
ZERO = Decimal("0.00")
FIXED_FEE_MODES = (BillingMode.MONTHLY, BillingMode.YEARLY)
USAGE_KINDS = (LineKind.USAGE_GB, LineKind.USAGE_P95)
# Order of a lease's lines on the invoice, and of adjustment lines.
KIND_ORDER = [
    LineKind.NODE_RENT,
    LineKind.NETWORK_FEE,
    LineKind.USAGE_GB,
    LineKind.USAGE_P95,
    LineKind.SLA_CREDIT,
    LineKind.ADJUSTMENT,
]
# Stored descriptions are English (see the package docstring); the UI translates kinds.
KIND_NAMES = {
    LineKind.NODE_RENT: "Node rent",
    LineKind.NETWORK_FEE: "Network fee",
    LineKind.USAGE_GB: "Traffic",
    LineKind.USAGE_P95: "95th percentile bandwidth",
    LineKind.SLA_CREDIT: "SLA credit",
    LineKind.ADJUSTMENT: "Adjustment",
}


def iso(instant: datetime | None) -> str | None:
    """ISO 8601 in UTC with a Z: the form every detail uses."""
    if instant is None:
        return None
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def local(instant: datetime, zone: str) -> str:
    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M")


def fraction(covered_seconds: int, period_seconds: int) -> Decimal:
    """covered / period to 6 decimals, half-up: the printed quantity of a line."""
    return prorate(
        monthly_amount=1, covered_seconds=covered_seconds, period_seconds=period_seconds
    ).quantize(QUANTITY, rounding=ROUNDING)


def money(value: Decimal) -> str:
    return f"{value:.2f}"


def rate_text(rate: Decimal) -> str:
    """6.00 -> "6", 13.50 -> "13.5": a rate inside an English description."""
    return f"{rate.normalize():f}"


def previous_period(period: str) -> str:
    """'2026-11' -> '2026-10'; '2027-01' -> '2026-12'."""
    return str(Period.parse(period).previous)


def check_period(period: str) -> None:
    try:
        Period.parse(period)
    except PeriodError:
        raise ValidationError(
            _("The period must be written YYYY-MM, got %(period)r.") % {"period": period}
        ) from None


@dataclass(frozen=True)
class ComputedLine:
    lease: Lease | None
    kind: str
    description: str
    quantity: Decimal
    unit: str
    unit_price: Decimal
    amount: Decimal
    detail: dict[str, Any]
    # The VAT rate of the line's price component (package docstring, rule 7).
    tax_rate_percent: Decimal

    @property
    def key(self) -> tuple[int | None, str, Decimal]:
        """(lease, kind, rate): what an adjustment compares (rule 6)."""
        return (self.lease.pk if self.lease else None, self.kind, self.tax_rate_percent)


@dataclass
class ComputedInvoice:
    tenant: Tenant
    period: str
    period_start: datetime
    period_end: datetime
    lines: list[ComputedLine] = field(default_factory=list)
    # The rate every line carries when they share one, else None (rule 7).
    tax_rate_percent: Decimal | None = None
    tax_groups: tuple[RateGroup, ...] = ()
    subtotal: Decimal = ZERO
    tax: Decimal = ZERO
    total: Decimal = ZERO
    network_cost_share: Decimal | None = None
    # SLA credits the terms give as vouchers (billing.vouchers): the lines they would have
    # been, on no invoice; issuing the invoice issues them.
    voucher_credits: list[ComputedLine] = field(default_factory=list)
    # Late changes to the credits earlier months gave as vouchers (rule 6): issuing the
    # invoice supplements or reduces them (billing.vouchers.adjust).
    voucher_changes: list[VoucherChange] = field(default_factory=list)


@dataclass(frozen=True)
class VoucherChange:
    """A billed month whose credit, given as vouchers, is recomputed to another amount
    (rule 6): ``given`` the month's vouchers so far for the lease (issued, supplemented,
    reduced; net), ``recomputed`` the voucher the credit is worth now (0.00 for none)."""

    lease: Lease
    period: str
    adjusted_invoice: int
    adjusted_invoice_number: str | None
    given: Decimal
    recomputed: Decimal
    validity_months: int | None
    detail: dict[str, Any]

    @property
    def difference(self) -> Decimal:
        return self.recomputed - self.given

    @property
    def reason(self) -> str:
        return (
            f"SLA credit of {self.lease.reference} for {self.period} recomputed from late "
            f"results: voucher {money(self.given)} → {money(self.recomputed)}"
        )


@dataclass(frozen=True)
class Month:
    """The billed month in the tenant's zone: bounds and seconds, and how details say so."""

    period: str
    zone: str
    start: datetime
    end: datetime
    seconds: int

    @classmethod
    def of(cls, period: str, zone: str) -> Month:
        month = Period.parse(period)
        start, end = month.bounds(zone)
        return cls(period, zone, start, end, month.seconds(zone))

    def describe(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "time_zone": self.zone,
            "month_start": iso(self.start),
            "month_end": iso(self.end),
            "month_seconds": self.seconds,
        }
