import subprocess
import sys

import pytest

from tests.conftest import require
from tests.deploy.processes import ROOT, base_env

# Where docker-compose.yml (the `keys` volume, the image's GPULEASE_VAR_DIR) and
# deploy/systemd (GPULEASE_VAR_DIR, the keys) keep state; the tests map it to a folder.
STATE_DIR = "/var/lib/gpulease"


@pytest.fixture(scope="session")
def production_files(tmp_path_factory):
    """What a production host holds before its processes start: the two keys, made by
    `python -m config.keys create` under the state folder, and the static files that
    `collectstatic` builds with the production settings (hashed names, a manifest)."""
    vendor = ROOT / "portal/static/portal/vendor"
    require((vendor / "pico.min.css").exists(), "the portal's vendor files (make assets)")
    base = tmp_path_factory.mktemp("production")
    state = base / "var-lib-gpulease"
    keys = {
        "AUDIT_SIGNING_KEY": str(state / "keys/audit/ed25519.pem"),
        "PROBE_SSH_KEY": str(state / "keys/ssh/probe_ed25519"),
    }
    env = base_env(base) | keys
    subprocess.run(
        [sys.executable, "-m", "config.keys", "create"], cwd=ROOT, env=env, check=True, timeout=60
    )
    production = env | {
        "DJANGO_DEBUG": "false",
        "SECRET_KEY": "collectstatic-only-" + "x" * 40,
        "GPULEASE_VAR_DIR": str(state),
        "STATIC_ROOT": str(base / "static"),
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "-v0"],
        cwd=ROOT,
        env=production,
        check=True,
        timeout=300,
    )
    return {"state": state, "static": base / "static", "keys": keys}
