"""统一社会信用代码 (GB 32100-2015): the check character, and the sentences a wrong code
gets. Sums worked by hand: each character's index in 0-9A-HJ-NP-RTUWXY times its weight
1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28."""

import pytest
from django.core.exceptions import ValidationError

from leases.uscc import check_character, check_uscc
from tests.factories import TenantFactory


@pytest.mark.parametrize(
    ("code", "why"),
    [
        # The standard's own example: 9+3+27+135+0+26+0+0+420 (M=21 * 20)+0+0+0+8+0+0
        # +900 (Y=30 * 30)+112 = 1640; 1640 mod 31 = 28; 31 - 28 = 3.
        ("91350100M000100Y43", "sum 1640, 31 - 28 = 3"),
        # 9+3+9+27+0+26+0+136+100+145+25+39+64+120+0+240+56 = 999; 999 mod 31 = 7;
        # 31 - 7 = 24 = Q.
        ("91110108551385082Q", "sum 999, 31 - 7 = 24 = Q"),
        # The demo seller: sum 1292; 1292 mod 31 = 21; 31 - 21 = 10 → A.
        ("91440300MA5F00001A", "sum 1292, 31 - 21 = 10 = A"),
        # 9 + 3 + 36 + 108 + 78 + G(16)*28 = 682 = 22 * 31: 31 - 0 = 31, written 0.
        ("9144030000000000G0", "sum 682, 31 → 0"),
    ],
)
def test_valid_codes_pass(code: str, why: str) -> None:
    check_uscc(code)
    assert check_character(code[:17]) == code[17], why


def test_wrong_check_character_names_the_right_one() -> None:
    with pytest.raises(ValueError) as refused:
        check_uscc("91440300MA5F00001X")
    assert str(refused.value) == (
        "91440300MA5F00001X has the wrong check character X; by GB 32100-2015 its first 17 "
        "characters give A. Check the code for a typo."
    )


@pytest.mark.parametrize(
    ("code", "character", "position"),
    [
        ("91440300MA5F0000IA", "'I'", 17),  # I is left out (it reads as 1)
        ("91440300mA5F00001A", "'m'", 9),  # lower case
        ("9144030OMA5F00001A", "'O'", 8),
        ("91440300MA5F 0001A", "' '", 13),
    ],
)
def test_bad_character_is_named_with_its_position(code: str, character: str, position: int):
    with pytest.raises(ValueError) as refused:
        check_uscc(code)
    assert f"has {character} at position {position}" in str(refused.value)


@pytest.mark.parametrize("code", ["91440300MA5F00001", "91440300MA5F00001AB", ""])
def test_wrong_length(code: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_uscc(code)
    assert f"has 18 characters; {code} has {len(code)}." in str(refused.value)


@pytest.mark.django_db
def test_tenant_refuses_a_bad_tax_id_and_keeps_a_blank_one() -> None:
    tenant = TenantFactory(tax_id="")
    tenant.full_clean()
    tenant.tax_id = "91110108551385082R"
    with pytest.raises(ValidationError) as refused:
        tenant.full_clean()
    assert refused.value.message_dict["tax_id"] == [
        "91110108551385082R has the wrong check character R; by GB 32100-2015 its first 17 "
        "characters give Q. Check the code for a typo."
    ]
    tenant.tax_id = "91110108551385082Q"
    tenant.full_clean()


def test_seller_check_flags_a_bad_setting(settings) -> None:
    from billing.checks import seller_uscc

    assert seller_uscc() == []
    settings.INVOICE_SELLER = {**settings.INVOICE_SELLER, "tax_id": "91440300MA5F00001X"}
    (error,) = seller_uscc()
    assert error.id == "billing.E001" and "give A" in error.msg
