"""What `docker build` would put in the image, without docker: the final stage's COPY
instructions read from the Dockerfile, the build context filtered by .dockerignore, and the
assets stage's output taken from the checkout (`make assets` builds the same files)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath


@dataclass
class Copy:
    sources: list[str]
    dest: str
    stage: str | None  # --from=STAGE, None for the build context


@dataclass
class Stage:
    name: str | None
    workdir: str = "/"
    copies: list[Copy] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def _args(text: str) -> list[str]:
    return list(json.loads(text)) if text.startswith("[") else shlex.split(text)


def stages(dockerfile: Path) -> list[Stage]:
    found: list[Stage] = []
    for keyword, rest in instructions(dockerfile):
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            found.append(Stage(name=name))
            continue
        stage = found[-1]
        if keyword == "WORKDIR":
            stage.workdir = str(PurePosixPath(stage.workdir) / rest)
        elif keyword == "ENV":
            stage.env.update(dict(word.split("=", 1) for word in shlex.split(rest)))
        elif keyword == "CMD":
            stage.cmd = _args(rest)
        elif keyword in ("COPY", "ADD"):
            assert keyword == "COPY", "ADD fetches and unpacks: this test reads COPY only"
            words = _args(rest)
            flags = {w.split("=", 1)[0]: w.partition("=")[2] for w in words if w.startswith("--")}
            paths = [w for w in words if not w.startswith("--")]
            stage.copies.append(Copy(paths[:-1], paths[-1], flags.get("--from")))
    return found


# --- .dockerignore ---------------------------------------------------------------------


def _regex(pattern: str) -> re.Pattern[str]:
    """Go's filepath.Match plus `**` (any number of directories), as Docker reads them."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


class Ignore:
    def __init__(self, path: Path) -> None:
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        if not path.exists():
            return
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            cleaned = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
            self.rules.append((negate, _regex(cleaned)))

    @property
    def has_exceptions(self) -> bool:
        return any(negate for negate, _ in self.rules)

    def ignored(self, relative: str) -> bool:
        """Docker's rule: the last pattern that matches the path or one of its parent
        directories decides."""
        parts = relative.split("/")
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        verdict = False
        for negate, regex in self.rules:
            if any(regex.match(candidate) for candidate in candidates):
                verdict = not negate
        return verdict


def context_files(root: Path, ignore: Ignore) -> list[str]:
    """Every file of the build context, relative and in POSIX form."""
    files: list[str] = []
    for folder, dirs, names in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        if not ignore.has_exceptions:
            dirs[:] = [d for d in dirs if not ignore.ignored(prefix + d)]
        files.extend(prefix + n for n in names if not ignore.ignored(prefix + n))
    return sorted(files)


def build(root: Path, target: Path) -> Stage:
    """Lay out the final stage's WORKDIR as the Dockerfile's COPY instructions would, under
    ``target``; returns the final stage. The assets stage's output is taken from the
    checkout at the same path relative to that stage's WORKDIR."""
    all_stages = stages(root / "Dockerfile")
    final = all_stages[-1]
    named = {stage.name: stage for stage in all_stages if stage.name}
    ignore = Ignore(root / ".dockerignore")
    files = context_files(root, ignore)
    for copy in final.copies:
        dest = target / PurePosixPath(final.workdir, copy.dest).relative_to(final.workdir)
        for source in copy.sources:
            if copy.stage is not None:
                inner = PurePosixPath(source).relative_to(named[copy.stage].workdir)
                origin = root / inner
                if not origin.exists():
                    raise FileNotFoundError(f"{origin} (run `make assets`)")
                if origin.is_dir():
                    shutil.copytree(origin, dest, dirs_exist_ok=True)
                else:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, dest)
                continue
            prefix = os.path.normpath(source).lstrip("/")
            chosen = (
                files
                if prefix == "."
                else [f for f in files if f == prefix or f.startswith(prefix + "/")]
            )
            if not chosen:
                raise FileNotFoundError(f"COPY {source}: nothing in the build context")
            for relative in chosen:
                if prefix == ".":
                    inside = relative
                elif relative == prefix and not copy.dest.endswith("/"):
                    inside = ""
                else:
                    inside = relative[len(prefix) :].lstrip("/") or Path(relative).name
                out = dest / inside if inside else dest
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / relative, out)
    return final
