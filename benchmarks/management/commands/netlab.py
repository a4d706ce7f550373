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
        "switches, tc-shaped links, addresses from 198.18.0.0/15. `up` registers it as site "
        f"'lab', nodes lab-h1..N and lease {LAB_LEASE}. Needs root and iproute2."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("action", choices=["up", "down", "status"])
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

    def handle(self, *args: Any, **options: Any) -> None:
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
            self.stdout.write(
                f"{host.name:<8} namespace {'present' if host.namespace_present else 'MISSING'}"
                f"  sshd {host.sshd_pid or 'STOPPED'}"
                f"  ssh {'open' if host.ssh_port_open else 'CLOSED'}"
                f"  data {lab_host.data_address}  link {format_bps(lab_host.rate_bps)}"
            )
        self.stdout.write(f"Lab {'up' if status.up else 'DEGRADED'}.")
