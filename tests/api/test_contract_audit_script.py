"""The issue's "done when": over real HTTP, a script with only the API and a token creates
a lease (provider), reads its audit bundle (auditor) and verifies it with audit_verify."""

import io
import json
import os
import subprocess
import sys
import urllib.request
from contextlib import redirect_stdout
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command

from accounts.choices import Role
from billing import ingest, invoicing
from tests.factories import (
    MembershipFactory,
    NicPortFactory,
    NodeFactory,
    StaffFactory,
    at,
    make_run,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import contract_audit  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def new_token(username: str, scopes: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        call_command("create_api_token", username, "--scopes", scopes, stdout=out)
    return next(word for word in out.getvalue().split() if word.startswith("gpl_"))


def api(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"{base}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"{}")


def audit_verify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "audit_verify", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DATABASE_URL": "sqlite:////nonexistent/never-opened.sqlite3"},
    )


def test_a_script_with_tokens_creates_a_lease_and_verifies_its_audit_bundle(live_server, tmp_path):
    provider = StaffFactory(username="ops")
    auditor = MembershipFactory(role=Role.AUDITOR, user__username="auditor", tenant__slug="zy")
    nodes = NodeFactory.create_batch(2)
    for node in nodes:
        NicPortFactory(node=node)
    provider_token = new_token(provider.username, "read,write")
    auditor_token = new_token(auditor.user.username, "read,audit")

    # The provider's automation creates and activates the lease through the API.
    lease = api(
        live_server.url,
        provider_token,
        "POST",
        "/api/v1/leases/",
        {
            "tenant": "zy",
            "reference": "ZY-AUDIT-1",
            "starts_at": "2026-11-01T00:00:00+08:00",
            "nodes": [node.pk for node in nodes],
            "terms": {
                "contracted_bandwidth_gbps": "100",
                "technology": "roce",
                "billing_mode": "monthly",
                "node_rent_per_month": "45000.00",
                "network_fee_per_month": "22000.00",
            },
        },
    )
    api(live_server.url, provider_token, "POST", f"/api/v1/leases/{lease['id']}/activate/", {})

    # A month of measurements (as the probes would have stored them), rolled up and billed.
    from leases.models import Lease

    stored = Lease.objects.get(pk=lease["id"])
    for hour in range(24):
        make_run(
            stored,
            slot=at("2026-11-05 00:00") + timedelta(hours=hour),
            verdict="fail" if hour in (3, 4) else "pass",
            measured_bps=(40 if hour in (3, 4) else 98) * 10**9,
            nodes=nodes,
        )
    ingest.ingest_all(notify=False)
    invoicing.draft_invoice(tenant=stored.tenant, period="2026-11", now=at("2026-12-01 01:00"))

    # The customer's auditor: the script, then audit_verify on what it wrote.
    bundle, key = tmp_path / "bundle.json", tmp_path / "provider.pem"
    assert (
        contract_audit.main(
            [
                "--url",
                live_server.url,
                "--token",
                auditor_token,
                "--lease",
                str(lease["id"]),
                "--period",
                "2026-11",
                "--out",
                str(bundle),
                "--public-key-out",
                str(key),
            ]
        )
        == 0
    )
    verified = audit_verify(str(bundle), "--public-key", str(key))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "all figures agree" in verified.stdout

    # One changed verdict: the signature and the chain both say so.
    document = json.loads(bundle.read_text())
    run = document["bundle"]["runs"][0]
    run_content = run.get("content", run)
    run_content["verdict"] = "fail" if run_content["verdict"] == "pass" else "pass"
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(document))
    refused = audit_verify(str(tampered), "--public-key", str(key))
    assert refused.returncode == 1
    assert "MISMATCH" in refused.stdout
