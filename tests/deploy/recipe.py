"""The production recipes of docs/operators/deploy.md as an operator runs them: the shell
block that writes .env, and docker-compose.yml's variables interpolated from that .env as
Compose does (``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?error}``,
``${VAR?error}``, ``$$``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
# Where the recipes are written down (the README's Production section until it moved).
RECIPES = ROOT / "docs" / "operators" / "deploy.md"
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
_BLOCK = re.compile(r"```(?:sh|bash)\n(.*?)```", re.S)
_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def readme_block(first_line: str) -> str:
    """The shell block of the deploy page (``RECIPES``) whose first line is ``first_line``."""
    text = RECIPES.read_text()
    found = [b for b in _BLOCK.findall(text) if b.splitlines()[0].strip() == first_line]
    name = RECIPES.relative_to(ROOT)
    assert len(found) == 1, f"{name} has {len(found)} shell blocks starting {first_line!r}"
    return found[0]


def run_block(block: str, cwd: Path) -> None:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines, as Compose's .env and systemd's EnvironmentFile= read them (no
    quotes are used in ours)."""
    values = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: {raw!r} is not KEY=VALUE"
        values[key.strip()] = value.strip()
    return values


class MissingVariable(Exception):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        operator, argument = match.group(2), match.group(3) or ""
        value = env.get(name)
        unset = not value if operator in (":-", ":?") else value is None
        if operator in (":-", "-"):
            return argument if unset else str(value)
        if operator in (":?", "?") and unset:
            raise MissingVariable(f"{name}: {argument}")
        return value or ""

    return _VARIABLE.sub(one, text)


def variables(value: Any) -> set[tuple[str, str | None]]:
    """(name, operator) of every variable anywhere in a compose value."""
    if isinstance(value, dict):
        return set().union(*(variables(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(variables(v) for v in value)) if value else set()
    if isinstance(value, str):
        return {(m[0] or m[3], m[1] or None) for m in _VARIABLE.findall(value) if m[0] or m[3]}
    return set()


def service_environment(name: str, env: dict[str, str]) -> dict[str, str]:
    service = COMPOSE["services"][name]
    return {key: interpolate(str(value), env) for key, value in service["environment"].items()}
