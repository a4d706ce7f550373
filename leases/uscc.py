"""The 统一社会信用代码 (unified social credit code, USCC) of GB 32100-2015: 18 characters
from ``CHARSET`` (digits and capital letters without I, O, S, V, Z), the last a check
character over the first 17.

Check: each of the first 17 characters counts as its index in ``CHARSET`` (0-30), times
its weight (3^i mod 31: 1, 3, 9, 27, 19, 26, ...); the check character is the one whose
index is 31 - (sum mod 31), where 31 stands for 0. ``91350100M000100Y43``, the standard's
own example: sum 1640, 1640 mod 31 = 28, 31 - 28 = 3 → "3".

It is the buyer's tax ID on an invoice (``Tenant.tax_id``) and the seller's
(``INVOICE_SELLER["tax_id"]``); the 数电票 payload refuses either when it is not one.
"""

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

LENGTH = 18
CHARSET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)


def check_character(first17: str) -> str:
    """The check character of a code's first 17 characters (all from ``CHARSET``)."""
    total = sum(CHARSET.index(c) * w for c, w in zip(first17, WEIGHTS, strict=True))
    return CHARSET[(31 - total % 31) % 31]


def check_uscc(value: str) -> None:
    """Raise ValueError with a sentence naming what is wrong: the length, the first
    character not allowed (and where), or the check character and the one it should be."""
    if len(value) != LENGTH:
        raise ValueError(
            _("A 统一社会信用代码 has 18 characters; %(value)s has %(count)s.")
            % {"value": value, "count": len(value)}
        )
    for position, character in enumerate(value, start=1):
        if character not in CHARSET:
            raise ValueError(
                _(
                    "%(value)s has %(character)s at position %(position)s; a "
                    "统一社会信用代码 uses only digits and the capital letters "
                    "ABCDEFGHJKLMNPQRTUWXY."
                )
                % {"value": value, "character": repr(character), "position": position}
            )
    expected = check_character(value[:17])
    if value[17] != expected:
        raise ValueError(
            _(
                "%(value)s has the wrong check character %(found)s; by GB 32100-2015 its "
                "first 17 characters give %(expected)s. Check the code for a typo."
            )
            % {"value": value, "found": value[17], "expected": expected}
        )


def validate_uscc(value: str) -> None:
    """The model field's validator (blank is the field's business, not this one's)."""
    try:
        check_uscc(value)
    except ValueError as exc:
        raise ValidationError(str(exc), code="invalid_uscc") from None
