"""A strict file: gpulease-verify and audit_verify refuse a bundle file with a repeated key,
NaN or infinity, a fractional number, an integer beyond ±2^53 or a lone surrogate."""

import json

import pytest
from django.core.management import call_command

from gpulease_verify import cli
from gpulease_verify.canonical import StrictJSONError, strict_loads

SIGNED = {
    "bundle": {"format": "gpulease-audit-bundle/2", "invoice": {"lines": []}},
    "signature": "",
    "public_key": "",
    "algorithm": "Ed25519",
}


def verify_text(tmp_path, capsys, text):  # type: ignore[no-untyped-def]
    path = tmp_path / "bundle.json"
    path.write_text(text, encoding="utf-8")
    code = cli.run([str(path), "--trust-embedded-key"])
    return code, capsys.readouterr().err, str(path)


def test_a_repeated_amount_is_refused(tmp_path, capsys):
    # The forged first "amount" is what some readers keep, the second what Python keeps.
    text = json.dumps(SIGNED).replace(
        '"lines": []', '"lines": [{"amount": "-9000.00", "amount": "-3000.00"}]'
    )
    code, err, path = verify_text(tmp_path, capsys, text)
    assert code == 2
    assert err == f'error: the bundle file {path} repeats the key "amount" in one object\n'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NaN", "holds NaN, which JSON does not allow"),
        ("-Infinity", "holds -Infinity, which JSON does not allow"),
        ("3000.5", "holds the number 3000.5; signed documents write fractions as text"),
        ("1e3", "holds the number 1e3"),
        ("9007199254740993", "holds the integer 9007199254740993, beyond ±2^53"),
        ('"\\ud800"', "holds a lone UTF-16 surrogate"),
    ],
)
def test_values_no_canonical_bundle_holds_are_refused(tmp_path, capsys, value, message):
    text = json.dumps(SIGNED).replace('"lines": []', f'"lines": [], "x": {value}')
    code, err, path = verify_text(tmp_path, capsys, text)
    assert code == 2
    assert err.startswith(f"error: the bundle file {path} {message}")


def test_audit_verify_refuses_the_same(tmp_path, capsys):
    path = tmp_path / "bundle.json"
    path.write_text('{"bundle": {"a": 1, "a": 2}}')
    with pytest.raises(SystemExit) as exited:
        call_command("audit_verify", str(path), "--trust-embedded-key")
    assert exited.value.code == 2
    assert 'repeats the key "a" in one object' in capsys.readouterr().err


def test_strict_loads_reads_canonical_json_unchanged():
    doc = {"a": [1, -(2**53), "¥3,000.00", None, True, {"b": "x"}]}
    assert strict_loads(json.dumps(doc, ensure_ascii=False)) == doc
    with pytest.raises(StrictJSONError, match="is not JSON: Expecting value at line 1"):
        strict_loads("")
