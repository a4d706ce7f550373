"""What an SLA credit is a percentage of: the credit base of a lease's month, from the
lines actually billed, as each terms version's ``credit_base`` says. Pure (no Django):
the invoice (``invoicing.lease_credit``), the audit bundle and its verifier all call it.

Each stretch of the billed window under one terms version (a ``Span``) adds one part:

- ``network_fee``: that version's network fee lines (包月/包年);
- ``usage``: that version's usage lines, per GB and 95th percentile (按量计费, 95计费);
- ``contracted_base``: the version's contracted monthly base fee (保底) x span seconds /
  month seconds, half-up to 0.01, like a network fee line.

The base is the sum of the parts. The tiers and the cap stay those of the version in
force at the window's end (``invoicing``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from gpulease_verify.charges import prorate
from gpulease_verify.money import to_fen

NETWORK_FEE = "network_fee"
USAGE = "usage"
CONTRACTED_BASE = "contracted_base"
MIXED = "mixed"
LINE_KINDS = {NETWORK_FEE: ("network_fee",), USAGE: ("usage_gb", "usage_p95")}
NAMES = {
    NETWORK_FEE: "network fee",
    USAGE: "usage charge",
    CONTRACTED_BASE: "contracted base fee",
    MIXED: "credit base",
}
ZERO = Decimal("0.00")


@dataclass(frozen=True)
class Span:
    """A stretch of the billed window under one terms version, with what its credits
    are on."""

    start: datetime
    end: datetime
    terms_version: int
    basis: str
    contracted_per_month: Decimal = ZERO

    @property
    def seconds(self) -> int:
        return int((self.end - self.start).total_seconds())


@dataclass(frozen=True)
class BilledLine:
    kind: str
    terms_version: int | None
    amount: Decimal


@dataclass(frozen=True)
class BasePart:
    span: Span
    amount: Decimal


@dataclass(frozen=True)
class CreditBase:
    parts: tuple[BasePart, ...]

    @property
    def amount(self) -> Decimal:
        return sum((part.amount for part in self.parts), ZERO)

    @property
    def basis(self) -> str:
        """The one basis of every part, or ``mixed`` after an amendment changed it."""
        bases = {part.span.basis for part in self.parts}
        return bases.pop() if len(bases) == 1 else MIXED

    def name(self) -> str:
        """'usage charge 500.00'; after a change of basis, each part in brackets."""
        text = f"{NAMES[self.basis]} {self.amount:.2f}"
        if self.basis != MIXED:
            return text
        parts = ", ".join(
            f"v{part.span.terms_version} {NAMES[part.span.basis]} {part.amount:.2f}"
            for part in self.parts
        )
        return f"{text} ({parts})"


def cut(
    *, start: datetime, end: datetime, versions: Iterable[tuple[datetime, int, str, Decimal]]
) -> list[Span]:
    """[start, end) cut wherever a version takes effect. ``versions``: (effective_from,
    version, credit_base, contracted_base_per_month) of each. For a recomputation from an
    audit bundle; the invoice has its own segments."""
    ordered = sorted(versions, key=lambda version: version[0])
    spans = []
    for index, (effective_from, number, basis, contracted) in enumerate(ordered):
        until = ordered[index + 1][0] if index + 1 < len(ordered) else end
        lo, hi = max(start, effective_from), min(end, until)
        if lo < hi:
            spans.append(Span(lo, hi, number, basis, contracted))
    return spans


def credit_base(
    *, spans: Iterable[Span], lines: Iterable[BilledLine], month_seconds: int
) -> CreditBase:
    """The parts of the base, one per span, in window order."""
    billed = list(lines)
    parts = []
    for span in spans:
        if span.basis == CONTRACTED_BASE:
            amount = to_fen(
                prorate(
                    monthly_amount=span.contracted_per_month,
                    covered_seconds=span.seconds,
                    period_seconds=month_seconds,
                )
            )
        elif span.basis in LINE_KINDS:
            kinds = LINE_KINDS[span.basis]
            amount = sum(
                (
                    line.amount
                    for line in billed
                    if line.kind in kinds and line.terms_version == span.terms_version
                ),
                ZERO,
            )
        else:
            raise ValueError(f"Unknown credit base {span.basis!r}.")
        parts.append(BasePart(span, amount))
    return CreditBase(tuple(parts))
