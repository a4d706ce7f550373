import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from billing.ingest import ingest_all
from billing.reports import sla_report
from gpulease_verify.periods import Period, PeriodError
from gpulease_verify.units import format_bps
from leases.selectors import leases_with_reference


def _figure(bps: int | None) -> str:
    return format_bps(bps) if bps is not None else "-"


class Command(BaseCommand):
    help = "A lease's SLA over a billing period: compliance, availability, incidents, credit."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--lease", required=True, help="contract reference")
        parser.add_argument("--period", required=True, help="YYYY-MM, in the tenant's zone")
        parser.add_argument("--json", action="store_true", help="one JSON document")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            Period.parse(options["period"])
        except PeriodError as error:
            raise CommandError(str(error)) from None
        lease = leases_with_reference(reference=options["lease"]).select_related("tenant").first()
        if lease is None:
            raise CommandError(f"no lease with reference {options['lease']!r}")
        ingest_all()  # the report reads rollups: bring them up to date first
        report = sla_report(lease=lease, period=options["period"])
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
            return
        self.stdout.write(self._text(report))

    def _text(self, report: dict[str, Any]) -> str:
        t, a = report["throughput"], report["availability"]
        lines = [
            f"SLA report {report['lease']} ({report['tenant']}), {report['period']} "
            f"({report['time_zone']}): {report['billed_from']} .. {report['billed_until']}",
            "terms: "
            + "; ".join(
                f"v{v['version']} from {v['effective_from']}: {v['contracted_bandwidth_gbps']} "
                f"Gbps, threshold {v['sla_threshold_percent']}%, {v['billing_mode']}"
                for v in report["terms_versions"]
            ),
            f"throughput: {t['passed']} passed, {t['failed']} failed, {t['unknown']} unknown, "
            f"{t['excluded']} excluded -> compliance {t['compliance_percent']}% "
            f"(measured only {t['measured_compliance_percent']}%), mean {_figure(t['mean_bps'])}, "
            f"lowest {_figure(t['min_bps'])}",
            f"availability: {a['pass_minutes']} min pass, {a['degraded_minutes']} min degraded "
            f"({a['degraded_weighted']} counted as down), {a['down_minutes']} min down, "
            f"{a['no_evidence_minutes']} min no evidence -> {a['percent']}%",
            f"credit compliance: {report['credit_compliance_percent']}%",
        ]
        credit = report["credit"]
        if credit:
            lines.append(
                f"credit: {credit['percent_applied']}% of the {credit['credit_base']} billed "
                f"¥{credit['credit_base_amount']} = ¥{credit['amount']} ({credit['reason']})"
            )
        lines.append(f"incidents: {len(report['incidents'])}")
        for incident in report["incidents"]:
            cost = (incident["training_impact"] or {}).get("cost_lost", "-")
            lines.append(
                f"  #{incident['id']} {incident['kind']} {incident['target']} "
                f"{incident['opened_at']} .. {incident['closed_at'] or 'open'}: "
                f"{incident['violations']} violations, worst {_figure(incident['worst_bps'])}, "
                f"training impact ¥{cost}; runs {incident['evidence_run_ids']}"
            )
        if report["training_impact"]:
            ti = report["training_impact"]
            below, informational = ti["below_threshold"], ti["below_contract"]
            lines.append(
                f"training impact ({ti['model']} on {ti['gpus']} GPUs, {ti['wall_hours']} h "
                f"elapsed): {below['gpu_hours']} GPU-hours, ¥{below['cny']} below the SLA "
                f"threshold; {informational['gpu_hours']} GPU-hours, ¥{informational['cny']} "
                "below contract (informational)"
            )
        lines.append(f"policy: {report['policy']}")
        return "\n".join(lines)
