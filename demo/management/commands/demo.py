from datetime import timedelta

from django.core.management.base import BaseCommand

from demo.history import load_history
from demo.invoices import load_invoices
from leases.demo import load_demo
from telemetry.demo import FLAP, FLAP_WINDOW
from telemetry.demo import WINDOW as TELEMETRY_WINDOW


class Command(BaseCommand):
    help = "Load realistic demo data (tenants, three Guangdong sites, fabrics, 18 nodes, leases "
    "in every billing mode, users). Safe to run again: existing objects are kept."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--history-days",
            type=int,
            default=21,
            help="Days of synthetic measurement history for the demo's leases (default 21).",
        )
        parser.add_argument(
            "--telemetry-minutes",
            type=int,
            default=int(TELEMETRY_WINDOW.total_seconds() // 60),
            help="Minutes of fabric telemetry polls before now (default 75; 0 loads none, "
            "under 30 leaves out the flapping port).",
        )

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        result = load_demo()
        window = timedelta(minutes=max(0, options["telemetry_minutes"]))
        history = load_history(days=options["history_days"], telemetry=window)
        invoices = load_invoices()
        self.stdout.write(
            f"Demo data ready: {result.tenants} tenants, {result.nodes} nodes, "
            f"{result.leases} leases ({result.created} objects created this run)."
        )
        if history.runs:
            self.stdout.write(
                f"Synthetic measurement history: {history.runs} runs on {history.leases} "
                "leases (their nodes are not real hosts; the network lab's lease is measured "
                "for real)."
            )
            self.stdout.write(
                f"Telemetry: {history.telemetry_polls} polls of the last "
                f"{int(window.total_seconds() // 60)} minutes, "
                f"{history.telemetry_samples} port intervals and {history.switch_readings} "
                "switch readings stored"
                + (
                    f"; a port of {FLAP.reference} flaps (manage.py fabric_health --lease "
                    f"{FLAP.reference})."
                    if window >= FLAP_WINDOW
                    else "."
                )
            )
        self.stdout.write(
            f"Invoices: {invoices.issued} issued with an SLA credit, credit note "
            f"{invoices.credit_note} on it, and the draft of {invoices.draft}."
        )
        self.stdout.write("Logins (local use only; stored in var/demo-logins.txt):")
        for login in result.logins:
            self.stdout.write(f"  {login.role:<18} {login.username:<16} {login.password}")
