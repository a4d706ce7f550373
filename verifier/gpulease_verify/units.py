from decimal import ROUND_HALF_UP, Decimal


def plain(value: Decimal) -> str:
    """A Decimal without trailing zeros or exponent: 10.00 -> "10", 97.50 -> "97.5"."""
    return f"{value.normalize():f}"


def format_bps(bps: float | int | Decimal) -> str:
    """Bits per second for people: 982300000 -> "982.3 Mbit/s", 1e11 -> "100 Gbit/s"."""
    value = Decimal(str(bps))
    for factor, unit in ((10**9, "Gbit/s"), (10**6, "Mbit/s"), (10**3, "kbit/s")):
        if abs(value) >= factor:
            return f"{plain(one_decimal(value / factor))} {unit}"
    return f"{plain(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))} bit/s"


def one_decimal(value: Decimal) -> Decimal:
    """Half-up to one decimal, as people round a figure they read."""
    return value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
