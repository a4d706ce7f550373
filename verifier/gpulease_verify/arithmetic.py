"""The conventions of the pure billing arithmetic, and the checks every function of it
uses (``gpulease_verify.p95``, ``counters``, ``charges``, ``impact``; one import for them all:
``gpulease_verify.calculations``).

No ORM and no Django here. An auditor recomputes an invoice with this module, the
contract terms and the raw measurements alone, so every function states its rule and its
rounding in its docstring.

Conventions for the whole module:

- Money is ``Decimal`` CNY. The only roundings are the named ones, always ``ROUND_HALF_UP``
  (half away from zero, ``gpulease_verify.money.ROUNDING``), and each happens once, at the point the
  docstring names.
- Inputs are ``int`` or ``Decimal``; a ``float`` (or ``bool``) is refused with ``TypeError``
  because its binary value would leak into the money.
- Intermediate arithmetic runs in a fixed Decimal context of 50 significant digits
  (``ROUND_HALF_EVEN`` for those far digits only), independent of the caller's context.
  A quotient that does not terminate (45,000 x 1/3) is therefore carried to 50 digits
  before the one named rounding.
- Bandwidth is in bits per second, traffic in bytes, time in seconds (``Decimal``).
  Mbps = 10^6 bits/s, GB = 10^9 bytes, GB/s = 10^9 bytes/s (decimal units, as in the
  contracts and in nccl-tests).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal, DivisionByZero, InvalidOperation, Overflow

Number = int | Decimal

# Intermediate precision; see the module docstring.
_CONTEXT = Context(
    prec=50, rounding=ROUND_HALF_EVEN, traps=[InvalidOperation, DivisionByZero, Overflow]
)

HUNDRED = Decimal(100)
ZERO_CNY = Decimal("0.00")


def _dec(value: Number, name: str) -> Decimal:
    """An exact Decimal of an int or Decimal; floats and bools are refused."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise TypeError(f"{name} must be an int or a Decimal, not {type(value).__name__}.")
    result = Decimal(value)
    if not result.is_finite():
        raise ValueError(f"{name} must be a finite number, not {result}.")
    return result


def _non_negative(value: Number, name: str) -> Decimal:
    result = _dec(value, name)
    if result < 0:
        raise ValueError(f"{name} cannot be negative ({result}).")
    return result


def _positive(value: Number, name: str) -> Decimal:
    result = _dec(value, name)
    if result <= 0:
        raise ValueError(f"{name} must be greater than zero ({result}).")
    return result


def _whole(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}.")
    return value
