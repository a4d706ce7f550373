import json
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from billing import invoicing
from billing.choices import InvoiceStatus
from gpulease_verify.periods import Period, PeriodError
from leases.models import Tenant


class Command(BaseCommand):
    help = (
        "Draft (or recompute) the invoices of a billing month and print them. "
        "Finalised invoices are never changed: they are printed as they stand."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--period", required=True, help="billing month, YYYY-MM")
        parser.add_argument("--tenant", help="only this tenant (its slug)")
        parser.add_argument(
            "--dry-run", action="store_true", help="compute and print, save nothing"
        )
        parser.add_argument(
            "--json", action="store_true", help="one JSON document: a list of invoices"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        period = options["period"]
        try:
            Period.parse(period)
        except PeriodError as error:
            raise CommandError(str(error)) from None
        tenant = None
        if options["tenant"]:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"no tenant with slug {options['tenant']!r}")
        try:
            with transaction.atomic():
                invoices = invoicing.draft_period(period=period, tenant=tenant)
                # Read everything back before a dry run rolls it away.
                summaries = [invoicing.invoice_summary(invoice) for invoice in invoices]
                notes = [
                    invoicing.finalised_message(invoice)
                    for invoice in invoices
                    if invoice.status == InvoiceStatus.FINAL
                ] + [
                    f"{lease.reference} is not billed for {period}: the acceptance its terms "
                    "require has not passed yet."
                    for invoice in invoices
                    if invoice.status == InvoiceStatus.DRAFT
                    for lease in invoicing.awaiting_acceptance(tenant=invoice.tenant, period=period)
                ]
                if options["dry_run"]:
                    transaction.set_rollback(True)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        for note in notes:
            self.stderr.write(note)
        if options["json"]:
            self.stdout.write(json.dumps(summaries, ensure_ascii=False, indent=2))
            return
        if not summaries:
            self.stdout.write(f"No invoice for {period}: no tenant had a billable lease.")
        for summary in summaries:
            self.stdout.write(render(summary))
        if options["dry_run"]:
            self.stdout.write("Dry run: nothing was saved.")


def render(summary: dict[str, Any]) -> str:
    """A readable table of one invoice summary."""
    status = dict(InvoiceStatus.choices).get(summary["status"], summary["status"])
    head = (
        f"Invoice {summary['tenant']} {summary['period']} ({status}), "
        f"{summary['tenant_name']}, time zone {summary['time_zone']}"
    )
    rows = [head, "=" * len(head)]
    rows.append(
        f"{'#':>3}  {'lease':<14} {'kind':<12} {'quantity':>16} {'unit':<10} "
        f"{'unit price':>12} {'amount (¥)':>14}  description"
    )
    for line in summary["lines"]:
        rows.append(
            f"{line['position']:>3}  {line['lease'] or '-':<14} {line['kind']:<12} "
            f"{line['quantity']:>16} {line['unit']:<10} {line['unit_price']:>12} "
            f"{line['amount']:>14}  {line['description']}"
        )
    if not summary["lines"]:
        rows.append("     (no lines)")
    share = summary["network_cost_share"]
    share_text = "-" if share is None else f"{Decimal(share) * 100:.2f}%"
    rows += [
        f"{'subtotal':>70} {summary['subtotal']:>14}",
        f"{'tax ' + summary['tax_rate_percent'] + '%':>70} {summary['tax']:>14}",
        f"{'total':>70} {summary['total']:>14}",
        f"network cost share: {share_text}",
    ]
    if summary["tax_note"]:
        rows.append(summary["tax_note"])
    return "\n".join(rows) + "\n"
