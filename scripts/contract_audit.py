#!/usr/bin/env python3
"""A customer's monthly contract audit, using nothing but the gpulease API and a token.

    scripts/contract_audit.py --url https://gpulease.example.cn --token gpl_... \\
        --lease 42 --period 2026-11 --out bundle.json
    python manage.py audit_verify bundle.json     # or any reimplementation of it

It downloads the signed audit bundle of the lease for the month and the provider's
published public key, and writes both; audit_verify then checks the signature and the hash
chain and recomputes compliance, credits and invoice lines from the bundle alone.
Standard library only, so a procurement system can run it anywhere."""

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path


def get(url: str, token: str) -> dict:
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        body = error.read().decode(errors="replace")
        sys.exit(f"contract_audit: {url} answered {error.code}: {body[:500]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="gpulease base URL")
    parser.add_argument("--token", required=True, help="an API token with the audit scope")
    parser.add_argument("--lease", required=True, help="lease id")
    parser.add_argument("--period", required=True, help="YYYY-MM")
    parser.add_argument("--out", required=True, help="where to write the bundle JSON")
    parser.add_argument("--public-key-out", help="where to write the provider's public key")
    options = parser.parse_args(argv)
    base = options.url.rstrip("/")
    bundle = get(
        f"{base}/api/v1/leases/{options.lease}/audit/?period={options.period}", options.token
    )
    Path(options.out).write_text(json.dumps(bundle, ensure_ascii=False))
    if options.public_key_out:
        key = get(f"{base}/api/v1/audit/public-key/", options.token)
        Path(options.public_key_out).write_text(key["public_key_pem"])
    runs = len(bundle.get("bundle", {}).get("runs", []))
    print(f"wrote {options.out}: lease {options.lease}, {options.period}, {runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
