from django.core.management.base import BaseCommand

from leases.demo import load_demo


class Command(BaseCommand):
    help = "Load realistic demo data (tenants, three Guangdong sites, fabrics, 18 nodes, leases "
    "in every billing mode, users). Safe to run again: existing objects are kept."

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        result = load_demo()
        self.stdout.write(
            f"Demo data ready: {result.tenants} tenants, {result.nodes} nodes, "
            f"{result.leases} leases ({result.created} objects created this run)."
        )
        self.stdout.write("Logins (local use only; stored in var/demo-logins.txt):")
        for login in result.logins:
            self.stdout.write(f"  {login.role:<16} {login.username:<18} {login.password}")
