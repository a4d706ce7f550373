"""What the project installs is what pyproject.toml declares: every third-party module our
code imports belongs to a declared distribution, and the lock files (make lock) pin every
declared dependency, with hashes, at a version the declaration allows; nothing declared is
missing from them and nothing they hold as ours is undeclared."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass, field
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERIFIER = tomllib.loads((ROOT / "verifier/pyproject.toml").read_text())["project"]
APP_PACKAGES = [
    "config", "common", "ledger", "accounts", "leases", "incidents", "benchmarks", "billing",
    "portal", "api", "monitoring", "telemetry", "demo",
]  # fmt: skip
FIRST_PARTY = {*APP_PACKAGES, "gpulease_verify", "tests", "perf", "manage", "contract_audit"}
LOCAL = canonicalize_name("gpulease-verify")  # ./verifier, never from an index


def requirements(texts: list[str]) -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, texts)}


RUNTIME = requirements(PROJECT["dependencies"])
MESSAGES = requirements(PROJECT["optional-dependencies"]["messages"])
DEV = requirements(PROJECT["optional-dependencies"]["dev"])
VERIFIER_RUNTIME = requirements(VERIFIER["dependencies"])


@dataclass
class Pin:
    version: str
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)


def read_lock(name: str) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in (ROOT / name).read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            current = pins[canonicalize_name(match[1])] = Pin(match[2])
        elif current and (match := re.search(r"--hash=(sha256:[0-9a-f]{64})", line)):
            current.hashes.append(match[1])
        elif current and (match := re.match(r"^\s+#\s+(?:via\s+)?(\S.*)$", line)):
            current.via.append(match[1])
        elif not line.strip():
            current = None
    return pins


def direct(pins: dict[str, Pin]) -> set[str]:
    """The packages the lock holds because our pyproject.toml names them."""
    return {name for name, pin in pins.items() if "gpulease (pyproject.toml)" in pin.via}


@pytest.mark.parametrize(
    ("lock", "declared"),
    [
        ("requirements.lock", RUNTIME | MESSAGES),
        ("requirements-dev.lock", RUNTIME | MESSAGES | DEV),
    ],
)
def test_the_lock_pins_exactly_what_pyproject_declares(lock, declared):
    pins = read_lock(lock)
    assert LOCAL not in pins  # ours, installed from ./verifier
    wanted = {name for name in declared if name != LOCAL}
    # Added to pyproject.toml but not locked, or still locked after leaving it: `make lock`.
    assert direct(pins) == wanted
    for name in wanted | set(VERIFIER_RUNTIME):
        requirement = (declared | VERIFIER_RUNTIME)[name]
        assert requirement.specifier.contains(pins[name].version, prereleases=True), (
            name,
            pins[name].version,
            str(requirement.specifier),
        )
    assert all(pin.hashes for pin in pins.values()), [n for n, p in pins.items() if not p.hashes]
    # The build backend our two packages are installed with (--no-build-isolation).
    assert "setuptools" in pins


def test_the_dev_lock_runs_what_production_runs():
    production, dev = read_lock("requirements.lock"), read_lock("requirements-dev.lock")
    assert {name: pin.version for name, pin in production.items()} == {
        name: dev[name].version for name in production
    }


def test_the_gpulease_verify_pin_is_the_verifier_in_this_tree():
    assert RUNTIME[LOCAL].specifier.contains(VERIFIER["version"])


def top_level_imports(paths: list[Path]) -> dict[str, str]:
    """Each absolute import's top-level module, with one file that imports it."""
    found: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def undeclared(paths: list[Path], declared: set[str]) -> list[str]:
    distributions = packages_distributions()
    problems = []
    for module, where in sorted(top_level_imports(paths).items()):
        if module in sys.stdlib_module_names or module in FIRST_PARTY:
            continue
        owners = {canonicalize_name(d) for d in distributions.get(module, [])}
        if not owners:
            problems.append(f"{module} ({where}): no installed distribution provides it")
        elif not owners & declared:
            problems.append(f"{module} ({where}): from {sorted(owners)}, not declared")
    return problems


def python_files(*folders: str) -> list[Path]:
    return [path for folder in folders for path in (ROOT / folder).rglob("*.py")]


def test_our_packages_import_only_what_pyproject_declares():
    app = [*python_files(*APP_PACKAGES), ROOT / "manage.py"]
    assert undeclared(app, set(RUNTIME)) == []


def test_the_verifier_imports_only_what_its_pyproject_declares():
    assert undeclared(python_files("verifier/gpulease_verify"), set(VERIFIER_RUNTIME)) == []


def test_tests_and_tools_import_only_what_pyproject_declares():
    paths = python_files("tests", "perf", "scripts")
    assert undeclared(paths, set(RUNTIME) | set(MESSAGES) | set(DEV)) == []
