"""``manage.py fabric_health``: telemetry's fabric report of a lease (``telemetry.report``)
with the probe tax of the month the window ends in (``billing.probe_tax``). It lives in
billing, the layer above both, so telemetry does not import billing."""

import json
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from billing import probe_tax
from gpulease_verify.periods import Period
from leases.models import Lease
from leases.selectors import leases_with_reference
from telemetry.report import fabric_health


def _probe_tax(lease: Lease, until: datetime) -> dict[str, Any]:
    """The probe-tax ledger of the month the window ends in (tenant's clock)."""
    period = Period.containing(until, lease.tenant.time_zone)
    return probe_tax.document(probe_tax.probe_tax_of(lease=lease, period=str(period)))


class Command(BaseCommand):
    help = (
        "A lease's fabric health per node and port: the telemetry verdicts (named, versioned "
        "rules), flaps and unavailable time, the switch-side witness cross-check, disputed "
        "runs, fabric incidents and the probe-tax ledger. --json prints the keys docs/telemetry.md "
        "documents."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--lease", required=True, metavar="REF", help="lease reference")
        parser.add_argument(
            "--since",
            type=int,
            default=60,
            metavar="MINUTES",
            help="how far back to look (default 60 minutes)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["since"] <= 0:
            raise CommandError("--since must be a positive number of minutes")
        try:
            lease = leases_with_reference(reference=options["lease"]).get()
        except Lease.DoesNotExist:
            raise CommandError(f"no lease {options['lease']!r}") from None
        until = timezone.now()
        report = {
            **fabric_health(lease, since=until - timedelta(minutes=options["since"]), until=until),
            "probe_tax": _probe_tax(lease, until),
        }
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
            return
        self._text(report)

    def _text(self, report: dict[str, Any]) -> None:
        write = self.stdout.write
        write(f"Fabric health of {report['lease']} from {report['since']} to {report['until']}")
        for node in report["nodes"]:
            write(f"\n{node['node']}")
            if not node["ports"]:
                write("  no telemetry in this window")
            for port in node["ports"]:
                state = {True: "up", False: "DOWN", None: "unknown"}[port["up"]]
                write(
                    f"  {port['port']:<12} {state:<7} {port['samples']} samples, "
                    f"{port['down_cycles']} down-then-up cycle(s), "
                    f"{port['unavailable_seconds']:g} s unavailable"
                )
                for finding in port["findings"]:
                    until = finding["end"] or "open"
                    write(
                        f"    {finding['severity'].upper()} {finding['rule']} "
                        f"v{finding['version']} {finding['start']} .. {until}: {finding['detail']}"
                    )
                if not port["findings"]:
                    write("    healthy: no rule fired")
            witness = node["witness"]
            if witness is None:
                write("  witness: no switch port mapped")
            elif witness["agrees"] is None:
                write(f"  witness: {witness['switch']} {witness['port']}: too few readings yet")
            else:
                verdict = "agrees" if witness["agrees"] else "DISAGREES"
                write(
                    f"  witness: {witness['switch']} {witness['port']} {verdict}: host sent "
                    f"{witness['host_tx_bytes']} B, switch received {witness['switch_in_octets']} "
                    f"B ({witness['difference_percent']:g} % apart)"
                )
            for run in node["disputed_runs"]:
                write(
                    f"  disputed run {run['run']} {run['target']} at {run['slot_at']}: "
                    f"{run['reason']}"
                )
        write("\nIncidents")
        for incident in report["incidents"]:
            write(
                f"  #{incident['id']} {incident['kind']} {incident['target']} {incident['rule']} "
                f"{incident['state']} from {incident['opened_at']}: {incident['detail']}"
            )
        if not report["incidents"]:
            write("  none")
        tax = report["probe_tax"]
        totals = tax["totals"]
        write(f"\nProbe tax of {tax['period']} (gpulease's own probe traffic, never billed)")
        cost = f", would have cost ¥{totals['cost_cny']}" if totals["cost_cny"] else ""
        write(
            f"  {totals['runs']} run(s), {totals['bytes']} B over {totals['seconds']} s{cost}; "
            f"{totals['deferred_runs']} deferred while the lease was busy"
        )
