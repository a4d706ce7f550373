"""`make lint` runs scripts/size_limits.py: no module over 600 lines and no function over 80
without a one-line `# long:` reason, and an allow-list that can only shrink."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts/size_limits.py"


@pytest.fixture(scope="module")
def limits():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("size_limits", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def function(name: str, body_lines: int, reason: str = "", multiline: bool = False) -> str:
    """A def whose length counts its def line and body: body_lines + 1 (+2 when multiline)."""
    head = f"def {name}(\n    a,\n):\n" if multiline else f"def {name}(a):\n"
    if reason:
        head += f"    # long: {reason}\n"
        body_lines -= 1
    return head + "".join(f"    a += {i}\n" for i in range(body_lines)) + "\n"


def run(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / name
    path.write_text(text)
    return subprocess.run(
        [sys.executable, str(SCRIPT), name], cwd=tmp_path, capture_output=True, text=True
    )


def test_a_function_of_81_lines_fails_and_80_passes(tmp_path):
    result = run(tmp_path, "m.py", function("long_one", 80) + function("just_fits", 79))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "m.py:1: long_one is 81 lines (over 80, no `# long:` reason on the line after its def)"
    ]


def test_a_long_function_with_a_reason_after_its_def_passes(tmp_path):
    text = function("table", 120, reason="one table of 40 rows, read top to bottom")
    text += function("wrapped", 120, reason="the same, after a 3-line signature", multiline=True)
    assert run(tmp_path, "m.py", text).returncode == 0


def test_the_reason_must_be_right_after_the_def_and_say_something(tmp_path):
    late = "def late(a):\n    a = 1\n    # long: too late, after the first statement\n"
    late += "".join(f"    a += {i}\n" for i in range(90))
    result = run(tmp_path, "m.py", late + function("empty", 90, reason="x"))
    assert result.returncode == 1
    assert [line.split(" is ")[0] for line in result.stdout.splitlines()] == [
        "m.py:1: late",
        "m.py:94: empty",
    ]


def test_a_module_of_601_lines_fails_unless_its_first_line_gives_a_reason(tmp_path):
    body = "".join(f"X{i} = {i}\n" for i in range(601))
    result = run(tmp_path, "big.py", body)
    assert result.stdout == "big.py: 601 lines (over 600, no `# long:` reason)\n"
    assert run(tmp_path, "fits.py", body[: -len("X600 = 600\n")]).returncode == 0
    reason = "# long: one generated table of constants\n"
    assert run(tmp_path, "why.py", reason + body).returncode == 0
    shebang = "#!/usr/bin/env python3\n" + reason + body
    assert run(tmp_path, "script.py", shebang).returncode == 0


def test_the_allow_list_lets_a_listed_module_through_and_fails_a_stale_entry(tmp_path, limits):
    (tmp_path / "big.py").write_text("".join(f"X{i} = {i}\n" for i in range(700)))
    (tmp_path / "small.py").write_text("X = 1\n")
    paths = [Path("big.py"), Path("small.py")]
    assert limits.check(paths, tmp_path, {"big.py"}) == []
    assert limits.check(paths, tmp_path, {"big.py", "small.py", "gone.py"}) == [
        "gone.py: on the allow-list but within the limits (or gone): remove it",
        "small.py: on the allow-list but within the limits (or gone): remove it",
    ]


def test_the_walk_leaves_out_tests_migrations_and_hidden_folders(tmp_path, limits):
    for name in ["app/models.py", "app/migrations/0001_x.py", "tests/test_x.py", ".venv/y.py"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert limits.project_modules(tmp_path) == [Path("app/models.py")]
