#!/usr/bin/env python3
"""A customer's monthly contract audit, using nothing but the gpulease API, a token and the
standalone verifier (``pip install ./verifier`` gives ``gpulease-verify``; no Django).

    scripts/contract_audit.py --url https://gpulease.example.cn --token gpl_... \\
        --lease 42 --period 2026-11 --out bundle.json --fingerprint sha256:9f2c... \\
        --previous checkpoints/2026-10.json --verify

It downloads the signed audit bundle of the lease for the month (with every run's raw
output when ``--raw`` is given) and the provider's published keys, writes both, and with
``--verify`` runs gpulease-verify on them: signature, hash chain, every verdict, compliance,
the SLA credit and every invoice line recomputed from the bundle alone. Pin the provider's
key with ``--fingerprint`` (from the contract, not from the server you are auditing);
without it the key the server publishes now is used, which only proves the bundle is the
server's. Standard library only, so a procurement system can run it anywhere. Exit status:
0 fetched (and, with --verify, all figures agree), 1 a mismatch, 2 an input problem."""

import argparse
import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path


def get(url: str, token: str) -> dict:
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        body = error.read().decode(errors="replace")
        sys.exit(f"contract_audit: {url} answered {error.code}: {body[:500]}")
    except urllib.error.URLError as error:
        sys.exit(f"contract_audit: cannot reach {url}: {error.reason}")


def verifier() -> list[str]:
    """The gpulease-verify command: on PATH, beside this Python, or as a module."""
    beside = Path(sys.executable).with_name("gpulease-verify")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("gpulease-verify")
    if found:
        return [found]
    return [sys.executable, "-m", "gpulease_verify.cli"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", required=True, help="gpulease base URL")
    parser.add_argument("--token", required=True, help="an API token with the audit scope")
    parser.add_argument("--lease", required=True, help="lease id")
    parser.add_argument("--period", required=True, help="YYYY-MM")
    parser.add_argument("--out", required=True, help="where to write the bundle JSON")
    parser.add_argument("--public-key-out", help="where to write the provider's public key PEM")
    parser.add_argument("--keys-out", help="where to write the published keys (JSON)")
    parser.add_argument("--raw", action="store_true", help="include every run's raw output")
    parser.add_argument("--verify", action="store_true", help="run gpulease-verify on it")
    parser.add_argument("--fingerprint", help="the provider's key fingerprint, from the contract")
    parser.add_argument("--previous", help="an earlier bundle or checkpoint, for continuity")
    options = parser.parse_args(argv)
    base = options.url.rstrip("/")
    query = urllib.parse.urlencode(
        {"period": options.period, **({"raw": 1} if options.raw else {})}
    )
    lease = urllib.parse.quote(str(options.lease), safe="")
    bundle = get(f"{base}/api/v1/leases/{lease}/audit/?{query}", options.token)
    Path(options.out).write_text(json.dumps(bundle, ensure_ascii=False), encoding="utf-8")
    runs = len(bundle.get("bundle", {}).get("runs", []))
    print(f"wrote {options.out}: lease {options.lease}, {options.period}, {runs} runs")

    keys = get(f"{base}/api/v1/audit/public-key/", options.token)
    pem = Path(options.public_key_out or Path(options.out).with_suffix(".pem"))
    pem.write_text(keys["public_key_pem"], encoding="utf-8")
    if options.keys_out:
        Path(options.keys_out).write_text(json.dumps(keys, indent=2), encoding="utf-8")
    if not options.verify:
        return 0

    command = [*verifier(), options.out]
    if options.fingerprint:
        command += ["--fingerprint", options.fingerprint]
    else:
        print(
            "contract_audit: no --fingerprint: trusting the key the server publishes now "
            f"({keys.get('fingerprint')})",
            file=sys.stderr,
        )
        command += ["--public-key", str(pem)]
    if options.previous:
        command += ["--previous", options.previous]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
