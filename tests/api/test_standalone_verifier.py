"""The auditor's side alone: gpulease-verify installed with pip into a fresh virtualenv that
has no Django, fed by scripts/contract_audit.py (standard library only) from a live server."""

import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from accounts.choices import Role
from billing import audit, ingest, invoicing
from tests.api.test_contract_audit_script import new_token
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def auditor_venv(tmp_path_factory) -> Path:
    """A virtualenv holding gpulease-verify and its one dependency, and nothing of ours."""
    where = tmp_path_factory.mktemp("auditor")
    source = where / "verifier"
    shutil.copytree(ROOT / "verifier", source, ignore=shutil.ignore_patterns("*.egg-info"))
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def run(*command: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=300, cwd="/"
    )


def test_the_standalone_verifier_checks_a_bundle_fetched_from_a_live_server(
    auditor_venv, live_server, tmp_path
):
    python = auditor_venv / "bin" / "python"
    no_django = run(python, "-c", "import django")
    assert no_django.returncode != 0 and "No module named 'django'" in no_django.stderr

    auditor = MembershipFactory(role=Role.AUDITOR, user__username="auditor")
    nodes = NodeFactory.create_batch(2)
    lease = make_lease(tenant=auditor.tenant, nodes=nodes, starts_at=at("2026-11-01 00:00"))
    for hour in range(12):
        make_run(
            lease,
            slot=at("2026-11-05 00:00") + timedelta(hours=hour),
            verdict="fail" if hour == 3 else "pass",
            measured_bps=(40 if hour == 3 else 98) * 10**9,
            nodes=nodes,
        )
    ingest.ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period="2026-11", now=at("2026-12-01 01:00"))
    token = new_token(auditor.user.username, "read,audit")

    bundle, key = tmp_path / "bundle.json", tmp_path / "provider.pem"
    fetched = run(
        python,
        ROOT / "scripts" / "contract_audit.py",
        "--url",
        live_server.url,
        "--token",
        token,
        "--lease",
        lease.pk,
        "--period",
        "2026-11",
        "--out",
        bundle,
        "--public-key-out",
        key,
    )
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr

    verified = run(auditor_venv / "bin" / "gpulease-verify", bundle, "--public-key", key)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.rstrip().endswith("all figures agree")

    # The whole audit in one call, the key pinned by the fingerprint from the contract and
    # every run's raw output re-parsed.
    fingerprint = audit.published_key_info()["fingerprint"]
    audited = run(
        python,
        ROOT / "scripts" / "contract_audit.py",
        *("--url", live_server.url, "--token", token, "--lease", lease.pk),
        *("--period", "2026-11", "--out", tmp_path / "raw.json", "--raw", "--verify"),
        *("--fingerprint", fingerprint),
    )
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert audited.stdout.rstrip().endswith("all figures agree")
    assert '"raw_output"' in (tmp_path / "raw.json").read_text()

    forged = tmp_path / "forged.json"
    document = json.loads(bundle.read_text())
    failed = next(r for r in document["bundle"]["runs"] if r["content"]["verdict"] == "fail")
    failed["content"]["verdict"] = "pass"
    forged.write_text(json.dumps(document))
    refused = run(auditor_venv / "bin" / "gpulease-verify", forged, "--public-key", key)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "MISMATCH: the signature does not verify" in refused.stdout


def test_the_standalone_verifier_makes_a_key_and_signs_what_the_server_checks(
    auditor_venv, tmp_path
):
    """The tenant's side without Django: ``gpulease-verify keygen`` makes the key pair,
    ``gpulease-verify sign`` signs the registration content the server shows, and the
    server registers the key with that signature (issue 29, items 1 and 5)."""
    from django.utils import timezone

    from gpulease_verify import cosign as rules
    from leases import cosign

    admin = MembershipFactory(role=Role.ADMIN, user__username="ada")
    command = auditor_venv / "bin" / "gpulease-verify"
    private = tmp_path / "tenant.pem"
    made = run(command, "keygen", "--out", private)
    assert made.returncode == 0, made.stderr
    public = made.stdout.strip()
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert private.stat().st_mode & 0o777 == 0o600
    assert run(command, "keygen", "--out", private).returncode == 2  # never overwritten

    now = timezone.now()
    content = cosign.registration_content(
        tenant=admin.tenant, user=admin.user, public_key=public, at=now
    )
    (tmp_path / "content.json").write_text(json.dumps(content, indent=2))
    signed = run(command, "sign", "--key", private, tmp_path / "content.json")
    assert signed.returncode == 0, signed.stderr
    signature = signed.stdout.strip()
    assert rules.verifies(public, content, signature)
    key = cosign.register_key(
        tenant=admin.tenant, user=admin.user, public_key=public, signature=signature, signed_at=now
    )
    assert key.fingerprint in made.stderr
