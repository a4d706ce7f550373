"""Contract audit: building, signing and verifying the demo leases' bundles for the last
full month on PostgreSQL (the demo's history: link checks every minute, throughput and
counters every 5 minutes). The verification is the standalone ``gpulease_verify`` on the
JSON text, as an auditor runs it: no database."""

import json
import time

from perf.harness import flush, peak_rss_mib, save, setup_django


def main() -> dict:
    setup_django()
    from django.core.management import call_command
    from django.utils import timezone

    from billing import audit
    from gpulease_verify.bundle import verify_report
    from gpulease_verify.periods import Period
    from leases.models import Lease

    flush()
    started = time.perf_counter()
    call_command("demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    results: dict = {"demo_load_s": round(time.perf_counter() - started, 2), "bundles": []}
    key = audit.published_key_info()["public_key_pem"]
    for lease in Lease.objects.select_related("tenant").order_by("reference"):
        period = Period.containing(timezone.now(), lease.tenant.time_zone).previous
        started = time.perf_counter()
        doc = audit.signed_bundle(lease=lease, period=str(period))
        built = time.perf_counter() - started
        text = json.dumps(doc)
        started = time.perf_counter()
        mismatches, _notes = verify_report(json.loads(text), key)
        verified = time.perf_counter() - started
        results["bundles"].append(
            {
                "lease": lease.reference,
                "period": str(period),
                "runs": len(doc["bundle"]["runs"]),
                "megabytes": round(len(text) / 1e6, 1),
                "build_s": round(built, 2),
                "verify_s": round(verified, 2),
                "runs_per_s_verified": round(len(doc["bundle"]["runs"]) / verified)
                if verified
                else None,
                "mismatches": len(mismatches),
            }
        )
    results["peak_rss_mib"] = peak_rss_mib()
    save("audit", results)
    return results


if __name__ == "__main__":
    main()
