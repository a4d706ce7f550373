"""Money is Decimal CNY, rounded half-up to the fen (0.01)."""

from decimal import ROUND_HALF_UP, Decimal

CURRENCY = "CNY"
FEN = Decimal("0.01")
ROUNDING = ROUND_HALF_UP


def to_fen(amount: Decimal | int | str) -> Decimal:
    """Round an amount half-up to 0.01 CNY."""
    return Decimal(amount).quantize(FEN, rounding=ROUNDING)


def format_cny(amount: Decimal) -> str:
    return f"¥{to_fen(amount):,}"
