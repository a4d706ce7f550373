import json
import re
from datetime import date, datetime, time
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from billing.ingest import ingest_all
from billing.rerate import RerateResult, rerate
from gpulease_verify.periods import PeriodError, zone
from leases.selectors import leases_with_reference

DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _day(text: str, option: str, zone_name: str) -> datetime:
    """Local midnight of ``YYYY-MM-DD`` in the tenant's zone."""
    try:
        if not DATE.fullmatch(text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{option} must be a date, YYYY-MM-DD, not {text!r}.") from None
    return datetime.combine(day, time(0), tzinfo=zone(zone_name))


class Command(BaseCommand):
    help = (
        "Re-rate a lease's window under its corrected (acknowledged) terms: ingest, then "
        "judge each scheduled run of [--from, --to) again by the terms version now in force "
        "at its slot (a rejudgement link of the lease's chain), rebuild the hourly rollups "
        "it touches and redraft the invoices that bill them; a difference on an issued "
        "month becomes adjustment lines on the next open draft. Dates are YYYY-MM-DD in the "
        "tenant's time zone, --to exclusive (default now). Refused while an amendment of "
        "the window waits for a tenant admin's acknowledgement. With --json: one object "
        "with the keys lease, time_zone, start, end (ISO UTC), runs_rejudged, "
        "verdicts_changed {pass_to_fail, fail_to_pass, other}, not_judgeable, chain_links "
        "[first, last] or null, hours_rebuilt, drafts_rebuilt [{invoice, period, total}], "
        "adjustments [{invoice, period, adjusted_invoice, adjusted_period, kind, amount}]."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--lease", required=True, help="the lease's reference")
        parser.add_argument(
            "--from", dest="start", required=True, help="first day, YYYY-MM-DD (tenant zone)"
        )
        parser.add_argument(
            "--to", dest="end", help="day after the last, YYYY-MM-DD (tenant zone); default now"
        )
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        lease = leases_with_reference(reference=options["lease"]).select_related("tenant").first()
        if lease is None:
            raise CommandError(f"no lease with reference {options['lease']!r}")
        try:
            zone(lease.tenant.time_zone)
        except PeriodError as error:
            raise CommandError(str(error)) from None
        start = _day(options["start"], "--from", lease.tenant.time_zone)
        now = timezone.now()
        end = _day(options["end"], "--to", lease.tenant.time_zone) if options["end"] else now
        ingest_all()  # committed: the window's rollups start from every finished run
        try:
            result = rerate(lease, start, end, now=now)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict(), ensure_ascii=False, indent=2))
            return
        self.stdout.write(describe(result))


def describe(result: RerateResult) -> str:
    """The summary as text, one fact a line."""
    zone_name = result.lease.tenant.time_zone
    local = zone(zone_name)
    lines = [
        f"Lease {result.lease.reference}: re-rated from "
        f"{result.start.astimezone(local):%Y-%m-%d %H:%M} to "
        f"{result.end.astimezone(local):%Y-%m-%d %H:%M} ({zone_name})",
        f"runs re-judged: {result.runs_rejudged}"
        + (
            f" (chain links {result.chain_links[0]}..{result.chain_links[1]})"
            if result.chain_links
            else ""
        ),
        f"verdicts changed: {result.fail_to_pass} fail -> pass, {result.pass_to_fail} "
        f"pass -> fail, {result.other_changes} other",
    ]
    if result.not_judgeable:
        lines.append(f"not re-judged (figures alone cannot decide): {result.not_judgeable}")
    lines.append(f"hourly rollups rebuilt: {result.hours_rebuilt}")
    for invoice in result.drafts:
        lines.append(f"draft {invoice.period} rebuilt: total {invoice.total}")
    for item in result.adjustments:
        lines.append(
            f"adjustment on the {item['period']} draft for {item['adjusted_period']} "
            f"({item['adjusted_invoice'] or 'unnumbered'}, {item['kind']}): {item['amount']}"
        )
    if not result.runs_rejudged:
        lines.append("Nothing to re-rate: every run already counts under the terms in force.")
    return "\n".join(lines)
