"""``manage.py chain_checkpoint --period YYYY-MM [--lease REF]``: sign the chain
checkpoints of a month now (beat does it at each month's close); one already made is kept."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from billing.checkpoints import close_period
from leases.selectors import leases_with_reference


class Command(BaseCommand):
    help = "Sign the hash-chain checkpoint of every lease billed in a month (or of one lease)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--period", required=True, help="YYYY-MM, in each tenant's zone")
        parser.add_argument("--lease", help="one lease, by reference")

    def handle(self, *args: Any, **options: Any) -> None:
        lease = None
        if options["lease"]:
            lease = (
                leases_with_reference(reference=options["lease"]).select_related("tenant").first()
            )
            if lease is None:
                raise CommandError(f"There is no lease {options['lease']!r}.")
        try:
            made = close_period(period=options["period"], lease=lease)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        for checkpoint, created in made:
            state = "signed" if created else "already signed"
            self.stdout.write(
                f"{checkpoint.lease.reference} {checkpoint.period}: {state}, head link "
                f"{checkpoint.head_index} {checkpoint.head_hash[:16]}…"
            )
        if not made:
            self.stdout.write(f"no lease was billed in {options['period']}")
