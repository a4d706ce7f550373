#!/usr/bin/env python3
"""The pairs of gpulease's top-level apps that import each other both ways, counting every
import statement (module level or inside a function, as import-linter does; migrations
included, tests excluded). For each pair it names the files on both sides.

    scripts/import_pairs.py            # the two-way pairs, with the importing files
    scripts/import_pairs.py --count    # just the number of pairs

Standard library only; run from the repository root."""

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

APPS = [
    "gpulease_verify", "common", "ledger", "accounts", "leases", "incidents", "benchmarks",
    "telemetry", "billing", "api",
    "portal", "monitoring", "config",
]  # fmt: skip
ROOTS = {app: Path(app) for app in APPS}
ROOTS["gpulease_verify"] = Path("verifier/gpulease_verify")


def module_name(app: str, path: Path) -> str:
    parts = list(path.relative_to(ROOTS[app]).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([app, *parts])


def imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The absolute names every import statement in the tree reaches."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
    return names


def edges() -> dict[tuple[str, str], set[str]]:
    """(importer app, imported app) -> the importing files."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for app, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            module = module_name(app, path)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for name in imported(tree, module, path.name == "__init__.py"):
                top = name.split(".")[0]
                if top in ROOTS and top != app:
                    found[(app, top)].add(str(path))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", action="store_true", help="print only the number of pairs")
    args = parser.parse_args()
    found = edges()
    pairs = sorted({tuple(sorted(edge)) for edge in found if edge[::-1] in found})
    if args.count:
        print(len(pairs))
        return 0
    for a, b in pairs:
        print(f"{a} ⇄ {b}")
        for importer, imported_app in ((a, b), (b, a)):
            for path in sorted(found[(importer, imported_app)]):
                print(f"    {importer} → {imported_app}: {path}")
    print(f"{len(pairs)} two-way pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
