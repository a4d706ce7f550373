"""README.md and every page under docs/ name only files, management commands, make targets
and modules that exist, so a newcomer following them never hits a dead end.

What is checked (the rules are deliberately simple; widen them here, not in the pages):

- **Paths.** An inline code span (`like/this.py`) with no space in it is a repository
  path, relative to the repository root, when it holds a ``/`` and either its first part
  is one of the repository's top-level names (``billing/``, ``deploy/caddy/Caddyfile``) or
  it ends in one of ``EXTENSIONS``; it must exist (a file, or a folder). A span with no
  ``/`` that ends in one of ``EXTENSIONS`` must be the name of a file somewhere in the
  repository (``rules.test.yml``). Left out, since they are not repository paths:
  URLs (``://``, ``www.``), absolute paths (``/etc/...``, ``/api/v1/...``: the host's
  files and the server's routes), paths outside the repository (``../``), spans holding a
  placeholder or pattern character (``<`` ``>`` ``{`` ``}`` ``*`` ``$`` ``...`` ``…``
  ``|`` ``[`` ``(`` ``=`` ``:`` ``?`` ``@`` ``&`` ``,``), spans whose first part is an
  environment variable (``ARCHIVE_DIR/...``), spans under ``GENERATED`` (state and build
  output made at run time, ignored by git), and the bare file names in ``RUNTIME_NAMES``
  (files gpulease or an operator writes). So ``600/min``, ``Asia/Shanghai``, ``end/`` (a
  route's tail) or another project's ``store/scan.go`` are not paths. Fenced code blocks
  are shell recipes, not path mentions, and are not read for paths.
- **Links.** Every Markdown link ``[text](target)`` that is not a URL or a bare anchor
  must point at an existing file, relative to the page that holds it.
- **Management commands.** ``manage.py NAME`` anywhere in a page (code spans and fenced
  blocks, with or without ``python`` before it) must be a command
  ``django.core.management.get_commands()`` knows.
- **make targets.** ``make NAME`` at the start of a code span or of a command in a fenced
  block (after ``&&``, ``;``, ``|``, ``(``, or ``VAR=value`` assignments) must be a
  target the Makefile declares.
- **Modules.** ``python -m NAME`` must name a module that can be imported from the
  repository (``config.keys``, ``perf.bench_lab_fidelity``; ``pip`` and ``venv`` are the
  standard library's).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
EXTENSIONS = (
    ".py", ".md", ".yml", ".yaml", ".json", ".toml", ".lock", ".txt", ".html", ".css",
    ".js", ".po", ".service", ".conf", ".cfg", ".ini", ".sh", ".sql", ".csv",
)  # fmt: skip
PLACEHOLDER = re.compile(r"[<>{}*$|\[(=:?@&,…]|\.\.\.")
GENERATED = (
    "var/", ".venv/", "site/", "build/", "node_modules/", "staticfiles/",
    "portal/static/portal/vendor/", "perf/results/",
)  # fmt: skip
# Files written at run time (the key registry, an archive's manifest) or by the operator
# or customer in a recipe (a downloaded bundle), never in the repository.
RUNTIME_NAMES = {
    "audit-keys.json", "manifest.json", "bundle.json", "provider-keys.json", "next.json",
    "2026-11.json", "demo-logins.txt", "gpulease.sqlite3",
}  # fmt: skip

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"``?([^`\n]+?)``?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MANAGE = re.compile(r"manage\.py\s+([a-z_][a-z0-9_]*)")
MAKE_IN_SPAN = re.compile(r"^(?:[A-Z_]+=\S*\s+)*make\s+([a-z][\w-]*)")
MAKE_IN_FENCE = re.compile(
    r"(?:^|&&|;|\|\||\||\(|\bsudo)\s*(?:[A-Z_]+=\S*\s+)*make\s+([a-z][\w-]*)", re.M
)
PYTHON_M = re.compile(r"python3?\s+-m\s+([A-Za-z_][\w.]*)")


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def code_spans(text: str) -> list[str]:
    """The inline code spans of a page, fenced blocks left out."""
    return [span.strip() for span in SPAN.findall(FENCE.sub("", text))]


def fenced_blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def path_candidates(text: str, top_level: set[str]) -> list[str]:
    """The spans the module docstring's rules take for repository paths."""
    found = []
    for span in code_spans(text):
        if " " in span or "://" in span or span.startswith(("/", "../", "www.", "~")):
            continue
        if PLACEHOLDER.search(span) or span.startswith(GENERATED):
            continue
        known_extension = Path(span).suffix in EXTENSIONS
        if "/" in span:
            first = span.split("/", 1)[0]
            if re.fullmatch(r"[A-Z][A-Z0-9_]*", first):
                continue
            if first in top_level or known_extension:
                found.append(span)
        elif known_extension and span not in RUNTIME_NAMES:
            found.append(span)
    return found


def repository_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return listed.splitlines()


def missing_paths(text: str, files: list[str]) -> list[str]:
    basenames = {Path(path).name for path in files}
    top_level = {path.split("/", 1)[0] for path in files}
    missing = []
    for path in path_candidates(text, top_level):
        if "/" in path:
            if not (ROOT / path).exists():
                missing.append(path)
        elif path not in basenames:
            missing.append(path)
    return missing


def missing_links(page: Path, text: str) -> list[str]:
    missing = []
    for target in LINK.findall(FENCE.sub("", text)):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        if not (page.parent / target.split("#", 1)[0]).exists():
            missing.append(target)
    return missing


def commands_named(text: str) -> set[str]:
    return set(MANAGE.findall(text))


def make_targets_named(text: str) -> set[str]:
    targets = set()
    for span in code_spans(text):
        if match := MAKE_IN_SPAN.match(span):
            targets.add(match.group(1))
    for block in fenced_blocks(text):
        targets.update(MAKE_IN_FENCE.findall(block))
    return targets


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    phony = set(re.search(r"^\.PHONY:(.*)$", text, re.M).group(1).split())
    rules = set(re.findall(r"^([a-z][\w-]*):", text, re.M))
    return phony | rules


def modules_named(text: str) -> set[str]:
    return set(PYTHON_M.findall(text))


@pytest.fixture(scope="module")
def files() -> list[str]:
    return repository_files()


def test_the_pages_are_found():
    names = {_name(page) for page in PAGES}
    # The front page, the docs site's home and a page of each audience.
    assert {"README.md", "docs/index.md", "docs/architecture.md", "docs/api.md"} <= names
    assert "docs/operators/deploy.md" in names
    assert any(name.startswith("docs/adr/0001-") for name in names)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_path_a_page_names_exists(page, files):
    assert missing_paths(_text(page), files) == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_link_points_at_a_file(page):
    assert missing_links(page, _text(page)) == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_management_command_a_page_names_exists(page):
    assert commands_named(_text(page)) - set(get_commands()) == set()


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_make_target_a_page_names_exists(page):
    assert make_targets_named(_text(page)) - makefile_targets() == set()


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_module_run_with_python_m_exists(page):
    missing = {
        module
        for module in modules_named(_text(page))
        if importlib.util.find_spec(module.split(".")[0]) is None
        or importlib.util.find_spec(module) is None
    }
    assert missing == set()


def test_the_rules_catch_what_they_are_for(files):
    """Each rule on a made-up page: a wrong path, link, command, target and module are
    named, and what the rules leave out is not."""
    page = ROOT / "docs" / "made-up.md"
    text = "\n".join(
        [
            "See `billing/calculations.py` and `leases/services.py`, `nowhere.py`, `Makefile`.",
            "Left out: `/etc/gpulease/gpulease.env`, `https://x.cn/a/b.py`, `var/audit/x.pem`,",
            "`tests/<app>/test_<module>.py`, `ARCHIVE_DIR/x.tar`, `audit-keys.json`, `a b/c.py`,",
            "`600/min`, `Asia/Shanghai`, `end/`, `store/scan.go`, `../shared/DOMAIN.md`, `.csv`.",
            "Checked: `rules.test.yml`, `deploy/caddy/Caddyfile`, `portal/nowhere/`.",
            "[ok](index.md) [gone](nowhere.md) [anchor](#x) [web](https://example.cn/a.md)",
            "Run `python manage.py bill --period 2026-11`, `manage.py no_such_command`,",
            "`make run`, `WEB_PORT=8080 make no-such-target`, `python -m config.keys create`,",
            "`python -m no_such_module`.",
            "```sh",
            "apt-get install -y python3-venv make npm",
            "cd /opt/gpulease && make assets; make nope",
            ".venv/bin/python manage.py migrate",
            "```",
        ]
    )
    assert missing_paths(text, files) == [
        "billing/calculations.py",
        "nowhere.py",
        "portal/nowhere/",
    ]
    assert missing_links(page, text) == ["nowhere.md"]
    assert commands_named(text) - set(get_commands()) == {"no_such_command"}
    assert make_targets_named(text) == {"run", "no-such-target", "assets", "nope"}
    assert make_targets_named(text) - makefile_targets() == {"no-such-target", "nope"}
    assert modules_named(text) == {"config.keys", "no_such_module"}
