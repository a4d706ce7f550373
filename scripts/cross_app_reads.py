#!/usr/bin/env python3
"""Where an app reads or writes another app's tables directly: ``Model.objects`` (or
``_default_manager``, or a many-to-many's ``Model.field.through.objects``) of a model that
another app owns. The owner's ``selectors.py`` (reads) and ``services.py`` (writes) are the
way in; everything else is listed here. Migrations, tests and perf/ are left out (a perf
benchmark builds its data like a fixture).

    scripts/cross_app_reads.py             # each reference, by (reader, owner) and file
    scripts/cross_app_reads.py --count     # just the number
    scripts/cross_app_reads.py --max N     # fail when there are more than N

Run from the repository root with the project's Python (it asks Django which app owns
which model)."""

import argparse
import ast
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = [
    "common", "ledger", "accounts", "leases", "incidents", "benchmarks", "telemetry",
    "billing", "api", "portal", "monitoring", "config", "demo",
]  # fmt: skip
MANAGERS = {"objects", "_default_manager"}


def owners() -> dict[str, str]:
    """Model class name -> the top-level package that defines it."""
    sys.path[:0] = [str(ROOT), str(ROOT / "verifier")]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django
    from django.apps import apps

    django.setup()
    return {
        model.__name__: model.__module__.split(".")[0]
        for model in apps.get_models(include_auto_created=False)
        if model.__module__.split(".")[0] in APPS
    }


def model_of(node: ast.Attribute) -> str | None:
    """``Lease.objects`` -> Lease; ``ProbeRun.nodes.through.objects`` -> ProbeRun."""
    value = node.value
    if isinstance(value, ast.Attribute) and value.attr == "through":
        value = value.value.value if isinstance(value.value, ast.Attribute) else value.value
    return value.id if isinstance(value, ast.Name) else None


def references(owner_of: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """(reading app, owning app) -> ``path:line Model`` for each reference."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Attribute) and node.attr in MANAGERS):
                    continue
                model = model_of(node)
                owner = owner_of.get(model or "")
                if owner and owner != app:
                    where = path.relative_to(ROOT)
                    found[(app, owner)].append(f"{where}:{node.lineno} {model}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", action="store_true", help="print only the number")
    parser.add_argument("--max", type=int, help="fail when there are more than this many")
    args = parser.parse_args()
    found = references(owners())
    total = sum(len(refs) for refs in found.values())
    if args.count:
        print(total)
    else:
        for (reader, owner), refs in sorted(found.items(), key=lambda item: -len(item[1])):
            print(f"{reader} -> {owner}: {len(refs)}")
            for ref in refs:
                print(f"    {ref}")
        print(f"{total} references to another app's tables outside its selectors/services")
    if args.max is not None and total > args.max:
        print(f"more than the allowed {args.max}: read through the owner's selectors.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
