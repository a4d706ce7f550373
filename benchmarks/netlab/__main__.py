"""``python -m benchmarks.netlab up|down|status|flap|forge`` (run as root from the project
root). ``flap HOST [--count N] [--interval S] [--down S]``, ``forge HOST [--factor F]``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.netlab.faults import flap, forge, forge_link
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
    parser.add_argument("command", choices=["up", "down", "status", "flap", "forge"])
    parser.add_argument("host", nargs="?", help="flap/forge: the lab host, e.g. lab-h2")
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
    parser.add_argument("--count", type=int, default=3, help="flap: how many times")
    parser.add_argument("--interval", type=float, default=30.0, help="flap: seconds apart")
    parser.add_argument("--down", type=float, default=2.0, help="flap: seconds down")
    parser.add_argument("--factor", type=float, default=0.5, help="forge: 1 = honest")
    parser.add_argument("--link", choices=["down", "up", "off"],
                        help="forge: its sysfs says data0 is down/up; off: honest")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.command in ("flap", "forge")) != bool(args.host):
        parser.error("flap and forge need a HOST; up, down and status take none")
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
        elif args.command == "flap":
            changes = flap(args.state_dir, args.host, count=args.count,
                           interval_s=args.interval, down_s=args.down)  # fmt: skip
            print(json.dumps({"host": args.host, "flaps": args.count, "carrier_changes": changes}))
        elif args.command == "forge" and args.link:
            lie = {"down": True, "up": False, "off": None}[args.link]
            wrapper = forge_link(args.state_dir, args.host, lie)
            print(json.dumps({"host": args.host, "link": args.link,
                              "wrapper": str(wrapper) if wrapper else None}))  # fmt: skip
        elif args.command == "forge":
            wrapper = forge(args.state_dir, args.host, args.factor)
            print(json.dumps({"host": args.host, "factor": args.factor,
                              "wrapper": str(wrapper) if wrapper else None}))  # fmt: skip
        else:
            current = status(args.state_dir)
            report: dict[str, object] = {
                "up": current.up,
                "hosts": [asdict(h) for h in current.hosts],
            }
            if current.state is not None and current.state.snmp_address:
                report["snmp"] = {
                    "pid": current.snmpd_pid,
                    "address": current.state.snmp_address,
                    "port": current.state.snmp_port,
                    "community": current.state.snmp_community,
                }
            print(json.dumps(report, indent=2))
            return 0 if current.up else 1
    except (LabError, ValueError) as exc:
        print(f"netlab: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
