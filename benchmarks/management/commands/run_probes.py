import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks import execution, services, witness_settle
from benchmarks.choices import Pattern, Trigger
from benchmarks.models import ProbeRun
from gpulease_verify.units import format_bps
from leases.choices import ProbeKind
from leases.selectors import leases_with_reference

BUSY_WAIT_S = 120


class Command(BaseCommand):
    help = "Run a lease's probes now, in the foreground, and print each run."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--lease", required=True, help="contract reference, e.g. LAB-1")
        parser.add_argument("--kind", choices=ProbeKind.values, help="only this probe kind")
        parser.add_argument("--json", action="store_true", help="one JSON object per line")

    def handle(self, *args: Any, **options: Any) -> None:
        lease = leases_with_reference(reference=options["lease"]).first()
        if lease is None:
            raise CommandError(f"no lease with reference {options['lease']!r}")
        kinds = [options["kind"]] if options["kind"] else None
        try:
            batches = services.request_runs(
                lease=lease, kinds=kinds, trigger=Trigger.MANUAL, enqueue=False
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        for batch in batches:
            self._execute(batch)
            for run in ProbeRun.objects.filter(batch=batch).order_by("pk"):
                self.stdout.write(self._line(run, as_json=options["json"]))

    def _execute(self, batch) -> None:  # type: ignore[no-untyped-def]
        waited = 0.0
        while True:
            try:
                execution.execute_batch(batch, max_attempts=1)
                # a throughput batch read by a switch witness is judged once it settled
                witness_settle.settle_in_foreground(batch)
                return
            except execution.NodesBusy:
                if waited >= BUSY_WAIT_S:
                    raise CommandError("the nodes stayed busy with another probe") from None
                time.sleep(5)
                waited += 5

    def _line(self, run: ProbeRun, *, as_json: bool) -> str:
        if as_json:
            return json.dumps(run_summary(run))
        figure = (
            format_bps(run.measured_bps)
            if run.measured_bps is not None
            else f"{run.latency_us:.1f} µs"
            if run.latency_us is not None
            else "-"
        )
        detail = run.verdict_reason or run.error
        return (
            f"{run.kind:<10} {run.tool:<15} {run.pattern:<10} {run.target:<24} "
            f"{run.state:<11} {run.verdict:<5} {figure:>14}  {detail}"
        )


def run_summary(run: ProbeRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "lease": run.lease.reference,
        "kind": run.kind,
        "tool": run.tool,
        "pattern": run.pattern,
        "target": run.target,
        "nodes": run.target.split(">") if ">" in run.target else run.hostnames(),
        # A sweep's nodes one by one: what each showed.
        **(
            {
                "by_node": {
                    r.node: {"state": r.state, "verdict": r.verdict, "error": r.error}
                    for r in run.results()
                }
            }
            if run.pattern == Pattern.SWEEP
            else {}
        ),
        "state": run.state,
        "verdict": run.verdict,
        "measured_bps": run.measured_bps,
        "latency_us": run.latency_us,
        "rule": run.rule,
        "reason": run.verdict_reason,
        "error": run.error,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "raw_sha256": run.raw_sha256,
    }
