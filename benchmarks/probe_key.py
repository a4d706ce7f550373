"""The provider's probe key: the SSH key the workers log in to nodes with."""

import os
from pathlib import Path

import asyncssh


def ensure_probe_key(path: Path) -> str:
    """Create the ed25519 key at ``path`` if missing; return its public key text, which an
    operator installs in each node's authorized_keys (for the node's SSH user)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = asyncssh.generate_private_key("ssh-ed25519", comment="gpulease-probe")
        key.write_private_key(str(path))
        os.chmod(path, 0o600)
        key.write_public_key(str(path) + ".pub")
    public = asyncssh.read_private_key(str(path)).export_public_key("openssh").decode()
    algorithm, body = public.split()[:2]
    return f"{algorithm} {body}"
