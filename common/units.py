from decimal import Decimal


def plain(value: Decimal) -> str:
    """A Decimal without trailing zeros or exponent: 10.00 -> "10", 97.50 -> "97.5"."""
    return f"{value.normalize():f}"
