"""Key trust: gpulease-verify checks a signature only with a key the auditor trusts, and
keys rotate: the public-key endpoint lists current and retired keys with their validity."""

import json
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command

from billing import audit, audit_keys
from billing.ingest import ingest_all
from gpulease_verify import cli
from gpulease_verify.trust import NoTrustedKey
from leases import services
from leases.choices import LeaseStatus
from tests.factories import NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
CLOSE = at("2026-12-01 02:00")
ROTATED = at("2026-12-05 00:00")


@pytest.fixture
def lease():  # type: ignore[no-untyped-def]
    lease = make_lease(nodes=NodeFactory.create_batch(2))
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    for hour in range(3):
        make_run(
            lease, slot=at("2026-11-10 10:00") + timedelta(hours=hour), measured_bps=98 * 10**9
        )
    ingest_all(notify=False)
    return lease


def run(tmp_path, capsys, doc, *args):  # type: ignore[no-untyped-def]
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(doc))
    code = cli.run([str(path), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def trust_mismatches(out):  # type: ignore[no-untyped-def]
    """The mismatches about signatures and keys (the figures are other tests' subject)."""
    return [
        line
        for line in out.splitlines()
        if line.startswith("MISMATCH") and ("key" in line or "sign" in line)
    ]


def key_file(tmp_path, published):  # type: ignore[no-untyped-def]
    path = tmp_path / "key.json"
    path.write_text(json.dumps(published))
    return str(path)


def test_a_strangers_bundle_without_a_key_is_refused(lease, tmp_path, capsys):
    forged = audit.sign_bundle(
        audit.build_bundle(lease=lease, period=NOVEMBER, now=CLOSE), Ed25519PrivateKey.generate()
    )
    code, out, err = run(tmp_path, capsys, forged)
    assert code == 2
    assert out == ""
    assert err.startswith(
        "error: no trusted key: pass the provider's published key with --public-key FILE"
    )
    assert "--fingerprint HEX" in err
    with pytest.raises(NoTrustedKey):
        audit.verify(forged)


def test_trusting_the_embedded_key_warns(lease, tmp_path, capsys):
    forged = audit.sign_bundle(
        audit.build_bundle(lease=lease, period=NOVEMBER, now=CLOSE), Ed25519PrivateKey.generate()
    )
    _code, out, err = run(tmp_path, capsys, forged, "--trust-embedded-key")
    assert trust_mismatches(out) == []
    warning = (
        "WARNING: the signature was checked with the key inside the file, which proves "
        f"nothing about who signed it; compare {forged['key_id']} with the provider's "
        "published fingerprint"
    )
    assert warning in out.splitlines()
    assert warning in err


def test_the_fingerprint_names_the_one_key_to_trust(lease, tmp_path, capsys):
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    published = audit.published_key_info()["fingerprint"]
    assert doc["key_id"] == published
    for given in (published, published.removeprefix("sha256:"), published.upper()):
        code, out, _err = run(tmp_path, capsys, doc, "--fingerprint", given)
        assert trust_mismatches(out) == []
        assert f"ok: signature of the bundle: valid Ed25519 signature by key {published}" in out

    stranger = Ed25519PrivateKey.generate()
    forged = audit.sign_bundle(doc["bundle"], stranger)
    code, out, _err = run(tmp_path, capsys, forged, "--fingerprint", published)
    assert code == 1
    assert (
        f"MISMATCH: the bundle is signed with key {forged['key_id']}, not the key with the "
        f"given fingerprint {published}; its signature is not trusted"
    ) in out

    code, _out, err = run(tmp_path, capsys, doc, "--fingerprint", "sha256:12ab")
    assert code == 2
    assert "'sha256:12ab' is not a sha256 fingerprint" in err


def test_the_key_named_must_be_the_key_carried(lease):
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    doc["public_key"] = audit.sign_bundle({}, Ed25519PrivateKey.generate())["public_key"]
    mismatches = audit.verify(doc, fingerprint=doc["key_id"])
    assert mismatches[0].startswith(f"the bundle names key {doc['key_id']} but carries key")


def test_rotation_keeps_old_bundles_verifiable_and_retires_the_old_key(lease, tmp_path, capsys):
    old_key = audit_keys.signing_key()
    before = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    retired, current = audit_keys.rotate(now=ROTATED)
    assert retired["fingerprint"] == before["key_id"]
    assert (retired["not_before"], retired["not_after"]) == (None, "2026-12-04T16:00:00.000000Z")
    assert (current["not_before"], current["not_after"]) == ("2026-12-04T16:00:00.000000Z", None)

    published = audit.published_key_info()
    assert published["fingerprint"] == current["fingerprint"]
    assert [(k["fingerprint"], k["current"]) for k in published["keys"]] == [
        (retired["fingerprint"], False),
        (current["fingerprint"], True),
    ]
    keys = key_file(tmp_path, published)
    assert trust_mismatches(run(tmp_path, capsys, before, "--public-key", keys)[1]) == []
    after = audit.signed_bundle(lease=lease, period=NOVEMBER, now=ROTATED + timedelta(hours=1))
    assert after["key_id"] == current["fingerprint"]
    assert trust_mismatches(run(tmp_path, capsys, after, "--public-key", keys)[1]) == []

    # The retired key, stolen or misused, signs a bundle made after it was retired.
    late = audit.sign_bundle(after["bundle"], old_key)
    code, out, _err = run(tmp_path, capsys, late, "--public-key", keys)
    assert code == 1
    assert (
        "MISMATCH: the bundle says it was signed at 2026-12-04T17:00:00.000000Z, after key "
        f"{retired['fingerprint']} was retired (2026-12-04T16:00:00.000000Z): a retired key "
        "must sign nothing new"
    ) in out


def test_audit_key_rotate_command(capsys):
    first = audit.published_key_info()["fingerprint"]
    call_command("audit_key", "--rotate")
    out = capsys.readouterr().out
    assert f"retired: {first} (not_after " in out
    second = audit.published_key_info()["fingerprint"]
    assert second != first
    assert f"current: {second} (not_before " in out
    assert audit_keys.key_path().stat().st_mode & 0o777 == 0o600
    assert [k["current"] for k in audit.published_key_info()["keys"]] == [False, True]


def test_a_key_list_with_a_wrong_fingerprint_is_refused(lease, tmp_path, capsys):
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    published = audit.published_key_info()
    published["keys"][0]["fingerprint"] = "sha256:" + "0" * 64
    code, _out, err = run(tmp_path, capsys, doc, "--public-key", key_file(tmp_path, published))
    assert code == 2
    assert "the key file lists fingerprint sha256:000" in err
