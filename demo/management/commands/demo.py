from django.core.management.base import BaseCommand

from demo.history import load_history
from demo.invoices import load_invoices
from leases.demo import load_demo
from telemetry.demo import FLAP
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

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        result = load_demo()
        history = load_history(days=options["history_days"])
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
                f"{int(TELEMETRY_WINDOW.total_seconds() // 60)} minutes, "
                f"{history.telemetry_samples} port intervals and {history.switch_readings} "
                f"switch readings stored; a port of {FLAP.reference} flaps (manage.py "
                f"fabric_health --lease {FLAP.reference})."
            )
        self.stdout.write(
            f"Invoices: {invoices.issued} issued with an SLA credit, credit note "
            f"{invoices.credit_note} on it, and the draft of {invoices.draft}."
        )
        self.stdout.write("Logins (local use only; stored in var/demo-logins.txt):")
        for login in result.logins:
            self.stdout.write(f"  {login.role:<18} {login.username:<16} {login.password}")
