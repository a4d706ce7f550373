from django.conf import settings
from django.core.management.base import BaseCommand

from benchmarks.probe_key import ensure_probe_key


class Command(BaseCommand):
    help = "Print the probe SSH public key (creating the key pair if needed) to install on nodes."

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        self.stdout.write(ensure_probe_key(settings.PROBE_SSH_KEY))
