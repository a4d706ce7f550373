"""Provision and check the provider's two keys where production keeps them.

    python -m config.keys create   # makes each key that is missing, never replaces one
    python -m config.keys check    # exits 1 naming each key that is missing

The paths are ``AUDIT_SIGNING_KEY`` (the Ed25519 key that signs audit bundles and chain
checkpoints) and ``PROBE_SSH_KEY`` (the key probes log in to nodes with), the same
variables the settings read; unset, the local defaults under ``GPULEASE_VAR_DIR``. This
runs without Django's settings, because those refuse to load in production while a key is
missing. Rotating the audit key is ``manage.py audit_key --rotate`` (docs/operators/keys.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def var_dir() -> Path:
    default = Path(__file__).resolve().parent.parent / "var"
    return Path(os.environ.get("GPULEASE_VAR_DIR") or default)


def key_paths() -> dict[str, Path]:
    """Each key's variable and where it lives (what config.settings resolves too)."""
    audit = os.environ.get("AUDIT_SIGNING_KEY") or var_dir() / "audit" / "ed25519.pem"
    probe = os.environ.get("PROBE_SSH_KEY") or var_dir() / "ssh" / "probe_ed25519"
    return {"AUDIT_SIGNING_KEY": Path(audit), "PROBE_SSH_KEY": Path(probe)}


def missing_keys(paths: dict[str, Path] | None = None) -> list[str]:
    """``VARIABLE (path)`` for each key that is not a readable file."""
    paths = paths or key_paths()
    return [
        f"{name} ({path})"
        for name, path in paths.items()
        if not (path.is_file() and os.access(path, os.R_OK))
    ]


def create() -> list[str]:
    """Make the missing keys; one line per key saying what happened."""
    from benchmarks.probe_key import ensure_probe_key
    from billing.audit_keys import create_key

    paths = key_paths()
    lines = []
    audit = paths["AUDIT_SIGNING_KEY"]
    made = create_key(audit)
    lines.append(f"AUDIT_SIGNING_KEY {audit}: {'created' if made else 'kept'}")
    probe = paths["PROBE_SSH_KEY"]
    existed = probe.exists()
    public = ensure_probe_key(probe)
    lines.append(f"PROBE_SSH_KEY {probe}: {'kept' if existed else 'created'}; public key:")
    lines.append(public)
    return lines


def main(argv: list[str]) -> int:
    if argv == ["create"]:
        print("\n".join(create()))
        return 0
    if argv == ["check"]:
        missing = missing_keys()
        for entry in missing:
            print(f"missing: {entry}", file=sys.stderr)
        return 1 if missing else 0
    print("usage: python -m config.keys create|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
