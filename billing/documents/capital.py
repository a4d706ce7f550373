"""An amount in Chinese capital numerals (大写金额), as an invoice's 价税合计 is written:
12345.67 → 壹万贰仟叁佰肆拾伍元陆角柒分.

The rules (会计基础工作规范, article 52, as invoicing systems apply them):

- digits 零壹贰叁肆伍陆柒捌玖, units 拾佰仟 inside a group of four, 万 and 亿 between
  groups; ten is 壹拾 (a capital amount never starts with a bare 拾);
- one 零 stands for any run of zeros between two non-zero digits, across 万 and 亿 too
  (10005 → 壹万零伍元整; 1000100 → 壹佰万零壹佰元整); zeros at a group's end before its 万
  or 亿 are not read (10001000 → 壹仟万壹仟元整);
- 元 after the yuan; then 整 when there are no 角 and 分; 角 without 分 ends at the 角
  (伍元伍角); 分 without 角 takes a 零 after the 元 (壹拾元零伍分); under one yuan there is
  no 元 (伍角, 柒分); zero is 零元整;
- a negative amount (a 红字) starts with 负.
"""

from decimal import Decimal

DIGITS = "零壹贰叁肆伍陆柒捌玖"
PLACES = ("", "拾", "佰", "仟")
GROUPS = ("", "万", "亿", "万亿")
FEN = Decimal("0.01")


def _group(value: int) -> str:
    """1-9999, with a 零 for zeros between its digits."""
    text, zero = "", False
    for place in (3, 2, 1, 0):
        digit = value // 10**place % 10
        if digit == 0:
            zero = bool(text)
        else:
            if zero:
                text += "零"
                zero = False
            text += DIGITS[digit] + PLACES[place]
    return text


def _yuan(value: int) -> str:
    groups = []
    while value:
        groups.append(value % 10000)
        value //= 10000
    if len(groups) > len(GROUPS):
        raise ValueError("an amount of 10^16 yuan or more has no capital form here")
    text, zero = "", False
    for index in reversed(range(len(groups))):
        group = groups[index]
        if group == 0:
            zero = bool(text)
            continue
        if text and (zero or group < 1000):
            text += "零"
        text += _group(group) + GROUPS[index]
        zero = False
    return text


def capital_amount(amount: Decimal) -> str:
    """``amount`` (at most two decimals) in capital numerals; ValueError for fractions of
    a fen."""
    if amount != amount.quantize(FEN):
        raise ValueError(f"{amount} has a fraction of a fen")
    sign = "负" if amount < 0 else ""
    fen_total = int(abs(amount) * 100)
    yuan, jiao, fen = fen_total // 100, fen_total // 10 % 10, fen_total % 10
    if fen_total == 0:
        return "零元整"
    text = _yuan(yuan) + ("元" if yuan else "")
    if jiao == 0 and fen == 0:
        return sign + text + "整"
    if jiao:
        text += DIGITS[jiao] + "角"
    elif yuan:
        text += "零"
    if fen:
        text += DIGITS[fen] + "分"
    return sign + text
