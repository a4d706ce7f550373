"""价税合计 in capital numerals: values written out by hand."""

from decimal import Decimal

import pytest

from billing.documents.capital import capital_amount


@pytest.mark.parametrize(
    ("amount", "words"),
    [
        ("12345.67", "壹万贰仟叁佰肆拾伍元陆角柒分"),
        ("10005.00", "壹万零伍元整"),
        ("0.00", "零元整"),
        ("0.50", "伍角"),
        ("0.07", "柒分"),
        ("0.57", "伍角柒分"),
        ("5.50", "伍元伍角"),  # 角 without 分: no 分, no 整
        ("10.05", "壹拾元零伍分"),  # 分 without 角: 零 after 元
        ("10.00", "壹拾元整"),
        ("100.00", "壹佰元整"),
        ("101.00", "壹佰零壹元整"),
        ("1010.00", "壹仟零壹拾元整"),
        ("1001.00", "壹仟零壹元整"),
        ("1000100.00", "壹佰万零壹佰元整"),
        ("10001000.00", "壹仟万壹仟元整"),  # a group's trailing zeros are not read
        ("100000000.00", "壹亿元整"),
        ("100010000.00", "壹亿零壹万元整"),
        ("100000001.00", "壹亿零壹元整"),
        ("6360.00", "陆仟叁佰陆拾元整"),
        ("-1234.50", "负壹仟贰佰叁拾肆元伍角"),
    ],
)
def test_capital(amount: str, words: str) -> None:
    assert capital_amount(Decimal(amount)) == words


def test_fraction_of_a_fen_is_refused() -> None:
    with pytest.raises(ValueError, match="fraction of a fen"):
        capital_amount(Decimal("1.005"))
