from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks import netlab
from benchmarks.lab_registry import LAB_LEASE, register_lab
from gpulease_verify.units import format_bps


def lab_dir() -> Path:
    return settings.VAR_DIR / "netlab"


class Command(BaseCommand):
    help = (
        "Build (up), inspect (status) or remove (down) a real network lab on this machine: "
        "network namespaces as hosts running sshd and iperf3, Linux bridges as leaf and spine "
        "switches (with an SNMP agent, snmpd), tc-shaped links, addresses from "
        "198.18.0.0/15. `up` registers it as site "
        f"'lab', nodes lab-h1..N and lease {LAB_LEASE}. Needs root, iproute2 and snmpd. "
        "Faults: `flap HOST` takes the host's data link down and up (--count, --interval, "
        "--down); `forge HOST --factor F` makes its iperf3 report F x what it measured "
        "(--factor 1 makes it honest again)."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("action", choices=["up", "down", "status", "flap", "forge"])
        parser.add_argument("host", nargs="?", help="flap/forge: the lab host, e.g. lab-h2")
        parser.add_argument(
            "--degrade",
            action="append",
            default=[],
            metavar="HOST=RATE",
            help="slow one host's link, e.g. lab-h2=400mbit (repeatable)",
        )
        parser.add_argument("--hosts", type=int, default=4)
        parser.add_argument("--leaves", type=int, default=2)
        parser.add_argument("--rate", default="1gbit", help="host link rate (default 1gbit)")
        parser.add_argument("--uplink", default="1gbit", help="leaf uplink rate (default 1gbit)")
        parser.add_argument("--count", type=int, default=3, help="flap: how many (default 3)")
        parser.add_argument(
            "--interval", type=float, default=30.0, help="flap: seconds between flaps (30)"
        )
        parser.add_argument(
            "--down", type=float, default=2.0, help="flap: seconds the link stays down (2)"
        )
        parser.add_argument(
            "--factor",
            type=float,
            default=0.5,
            help="forge: report this multiple of what was measured (0.5; 1 removes the forgery)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        needs_host = options["action"] in ("flap", "forge")
        if needs_host and not options["host"]:
            raise CommandError(f"netlab {options['action']} needs a HOST, e.g. lab-h2")
        if not needs_host and options["host"]:
            raise CommandError(f"netlab {options['action']} takes no HOST")
        try:
            getattr(self, options["action"])(options)
        except netlab.LabUnavailable as error:
            raise CommandError(str(error)) from None
        except (netlab.LabError, ValueError) as error:
            raise CommandError(f"netlab {options['action']} failed: {error}") from None

    def up(self, options: dict[str, Any]) -> None:
        degrade = {}
        for item in options["degrade"]:
            host, sep, rate = item.partition("=")
            if not sep:
                raise ValueError(f"--degrade wants HOST=RATE, got {item!r}")
            degrade[host] = rate
        spec = netlab.LabSpec(
            state_dir=lab_dir(),
            hosts=options["hosts"],
            leaves=options["leaves"],
            host_rate=options["rate"],
            uplink_rate=options["uplink"],
            degrade=degrade,
        )
        state = netlab.up(spec)
        lease = register_lab(state)
        for host in state.hosts:
            self.stdout.write(
                f"{host.name:<8} {host.leaf:<6} ssh {host.mgmt_address}:{host.ssh_port}  "
                f"data {host.data_address}  link {format_bps(host.rate_bps)}"
            )
        self.stdout.write(
            f"Lab up: {len(state.hosts)} hosts on {len(state.leaves)} leaves, registered as "
            f"lease {lease.reference}. Try: python manage.py run_probes --lease {LAB_LEASE}"
        )

    def down(self, options: dict[str, Any]) -> None:
        removed = netlab.down(lab_dir())
        self.stdout.write(f"Lab down: removed {len(removed)} item(s).")

    def status(self, options: dict[str, Any]) -> None:
        status = netlab.status(lab_dir())
        if status.state is None:
            self.stdout.write("Lab down: nothing is built.")
            return
        for host in status.hosts:
            lab_host = status.state.host(host.name)
            forged = netlab.forged_factor(lab_dir(), host.name)
            self.stdout.write(
                f"{host.name:<8} namespace {'present' if host.namespace_present else 'MISSING'}"
                f"  sshd {host.sshd_pid or 'STOPPED'}"
                f"  ssh {'open' if host.ssh_port_open else 'CLOSED'}"
                f"  data {lab_host.data_address}  link {format_bps(lab_host.rate_bps)}"
                + (f"  iperf3 FORGED x{forged:g}" if forged is not None else "")
            )
        state = status.state
        if state.snmp_address:
            self.stdout.write(
                f"switches snmpd {status.snmpd_pid or 'STOPPED'}  "
                f"snmp v2c udp {state.snmp_address}:{state.snmp_port}  "
                f"community {state.snmp_community}"
            )
        self.stdout.write(f"Lab {'up' if status.up else 'DEGRADED'}.")

    def flap(self, options: dict[str, Any]) -> None:
        host, count = options["host"], options["count"]

        def report(n: int) -> None:
            self.stdout.write(f"{host}: flap {n}/{count} done (link down {options['down']:g}s)")

        changes = netlab.flap(
            lab_dir(),
            host,
            count=count,
            interval_s=options["interval"],
            down_s=options["down"],
            on_flap=report,
        )
        self.stdout.write(f"{host}: data link flapped {count} time(s); carrier_changes +{changes}.")

    def forge(self, options: dict[str, Any]) -> None:
        host, factor = options["host"], options["factor"]
        wrapper = netlab.forge(lab_dir(), host, factor)
        if wrapper is None:
            self.stdout.write(f"{host}: iperf3 reports what it measures again.")
        else:
            self.stdout.write(
                f"{host}: iperf3 in SSH sessions now reports {factor:g} x what it measured "
                f"({wrapper}); `netlab forge {host} --factor 1` undoes it."
            )
