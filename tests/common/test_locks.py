"""Row locks have one home (common.locks): FOR NO KEY UPDATE, so that a lock taken as a
mutex never holds up another transaction's foreign keys (see the module's docstring)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_code_takes_a_row_lock_but_common_locks():
    found = subprocess.run(
        ["git", "grep", "-n", "select_for_update(", "--", "*.py", ":!tests", ":!common/locks.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode in (0, 1), found.stderr  # 1: no match
    assert found.stdout == ""
