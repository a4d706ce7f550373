"""``python -m benchmarks.netlab up|down|status`` (run as root from the project root)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.netlab.lab import down, status, up
from benchmarks.netlab.spec import LabError, LabSpec

DEFAULT_STATE_DIR = Path("var/netlab")


def _degrade(value: str) -> tuple[str, str]:
    host, sep, rate = value.partition("=")
    if not sep or not host or not rate:
        raise argparse.ArgumentTypeError("use HOST=RATE, e.g. lab-h2=400mbit")
    return host, rate


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.netlab", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--leaves", type=int, default=2)
    parser.add_argument("--host-rate", default="1gbit")
    parser.add_argument("--uplink-rate", default="1gbit")
    parser.add_argument("--degrade", type=_degrade, action="append", default=[],
                        metavar="HOST=RATE", help="e.g. lab-h2=400mbit (repeatable)")  # fmt: skip
    parser.add_argument("--prefix", default="gpl")
    parser.add_argument("--data-subnet", default="198.18.0.0/24")
    parser.add_argument("--mgmt-subnet", default="198.19.0.0/24")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "up":
            spec = LabSpec(
                state_dir=args.state_dir,
                hosts=args.hosts,
                leaves=args.leaves,
                host_rate=args.host_rate,
                uplink_rate=args.uplink_rate,
                degrade=dict(args.degrade),
                prefix=args.prefix,
                data_subnet=args.data_subnet,
                mgmt_subnet=args.mgmt_subnet,
            )
            started = time.monotonic()
            state = up(spec)
            print(state.to_json())
            print(f"lab up in {time.monotonic() - started:.1f}s", file=sys.stderr)
        elif args.command == "down":
            removed = down(args.state_dir)
            print(json.dumps({"removed": removed}))
        else:
            current = status(args.state_dir)
            report = {"up": current.up, "hosts": [asdict(h) for h in current.hosts]}
            print(json.dumps(report, indent=2))
            return 0 if current.up else 1
    except (LabError, ValueError) as exc:
        print(f"netlab: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
