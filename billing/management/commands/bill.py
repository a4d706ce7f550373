import json
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from billing import invoicing, services
from billing.choices import InvoiceStatus
from billing.ingest import ingest_all
from billing.models import Invoice
from gpulease_verify.periods import Period, PeriodError
from leases.selectors import tenant_by_slug


class Command(BaseCommand):
    help = (
        "Ingest finished runs, then draft (or recompute) the invoices of a billing month and "
        "print them; with --issue, issue them too. Issued invoices are never changed: they "
        "are printed as they stand."
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
        parser.add_argument(
            "--issue", action="store_true", help="issue the drafts: number, dates, identities"
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="with --issue: issue although runs of the month are unfinished or not ingested",
        )
        parser.add_argument("--reason", help="with --force: why (recorded on the invoice)")

    def handle(self, *args: Any, **options: Any) -> None:
        period = options["period"]
        try:
            Period.parse(period)
        except PeriodError as error:
            raise CommandError(str(error)) from None
        tenant = None
        if options["tenant"]:
            tenant = tenant_by_slug(slug=options["tenant"])
            if tenant is None:
                raise CommandError(f"no tenant with slug {options['tenant']!r}")
        if options["force"] and not options["issue"]:
            raise CommandError("--force only goes with --issue.")
        if options["force"] and not (options["reason"] or "").strip():
            raise CommandError("--force needs --reason: why the month is issued incomplete.")
        if options["issue"] and options["dry_run"]:
            raise CommandError("--issue and --dry-run exclude each other.")
        if not options["dry_run"]:
            ingest_all()  # committed: what it read stays read
        refusals: list[str] = []
        try:
            with transaction.atomic():
                if options["dry_run"]:
                    ingest_all(notify=False)  # rolled back with the rest
                already = set(
                    Invoice.objects.filter(period=period)
                    .exclude(status=InvoiceStatus.DRAFT)
                    .values_list("pk", flat=True)
                )
                if options["issue"]:
                    invoices, refusals = services.issue_period(
                        period=period,
                        tenant=tenant,
                        force=options["force"],
                        reason=options["reason"],
                    )
                else:
                    invoices = services.draft_period(period=period, tenant=tenant)
                # Read everything back before a dry run rolls it away.
                summaries = [invoicing.invoice_summary(invoice) for invoice in invoices]
                notes = (
                    refusals
                    + [
                        invoicing.issued_message(invoice)
                        for invoice in invoices
                        if invoice.pk in already
                    ]
                    + [
                        warning
                        for invoice in invoices
                        if invoice.pk not in already
                        for warning in services.issue_warnings(invoice)
                    ]
                    + [
                        f"{lease.reference} is not billed for {period}: the acceptance its terms "
                        "require has not passed yet."
                        for invoice in invoices
                        if invoice.status == InvoiceStatus.DRAFT
                        for lease in invoicing.awaiting_acceptance(
                            tenant=invoice.tenant, period=period
                        )
                    ]
                )
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
    if summary["number"]:
        rows.append(
            f"number {summary['number']}, issued {summary['issue_date']}, due {summary['due_date']}"
        )
        seller, buyer = summary["seller"], summary["buyer"]
        rows.append(f"seller: {seller.get('legal_name')}, tax ID {seller.get('tax_id')}")
        rows.append(f"buyer: {buyer.get('legal_name')}, tax ID {buyer.get('tax_id') or '-'}")
    if summary["forced_reason"]:
        rows.append(f"issued by force: {summary['forced_reason']}")
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
    rows.append(f"{'subtotal':>70} {summary['subtotal']:>14}")
    for group in summary["tax_groups"]:  # tax per rate, rounded once per group
        label = f"tax {group['tax_rate_percent']}% on {group['subtotal']}"
        rows.append(f"{label:>70} {group['tax']:>14}")
    if len(summary["tax_groups"]) != 1:
        rows.append(f"{'tax':>70} {summary['tax']:>14}")
    rows += [
        f"{'total':>70} {summary['total']:>14}",
        f"network cost share: {share_text}",
    ]
    return "\n".join(rows) + "\n"
