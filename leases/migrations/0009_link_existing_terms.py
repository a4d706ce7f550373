"""Link every existing terms version into its lease's hash chain, appended after the
existing links in version order. Runs already linked keep their content and hashes (they
name no terms hash: their terms were linked after them).

No acknowledgement is invented: a version other than a lease's first that took effect
before it was created is linked unacknowledged, and the verifier says so. A lease's first
version is the contract itself and is never retroactive."""

from django.db import migrations

from gpulease_verify.canonical import iso_utc
from gpulease_verify.chain import GENESIS, link_hash
from gpulease_verify.terms import CONTRACT_FIELDS, DEFAULTED_FIELDS, LATER_FIELDS, terms_content


def _plain(value):  # type: ignore[no-untyped-def]
    from decimal import Decimal

    return str(value) if isinstance(value, Decimal) else value


def link_existing(apps, schema_editor):  # type: ignore[no-untyped-def]
    LeaseTerms = apps.get_model("leases", "LeaseTerms")
    ProbeRun = apps.get_model("benchmarks", "ProbeRun")
    lease_ids = (
        LeaseTerms.objects.filter(chain_index__isnull=True)
        .values_list("lease_id", flat=True)
        .distinct()
    )
    for lease_id in sorted(set(lease_ids)):
        last = (
            ProbeRun.objects.filter(lease_id=lease_id, chain_index__isnull=False)
            .order_by("-chain_index")
            .values_list("chain_index", "run_hash")
            .first()
        )
        index, prev = last if last is not None else (0, GENESIS)
        versions = LeaseTerms.objects.filter(lease_id=lease_id).select_related("lease")
        for version in versions.order_by("version"):
            fields = {
                "lease": version.lease.reference,
                "version": version.version,
                "effective_from": iso_utc(version.effective_from),
                "created_at": iso_utc(version.created_at),
                "amendment_reason": version.amendment_reason,
                # Fields added later do not exist yet here; their hash rule leaves them out.
                **{
                    name: _plain(getattr(version, name))
                    for name in CONTRACT_FIELDS
                    if name not in LATER_FIELDS and name not in DEFAULTED_FIELDS
                },
                "acknowledgement": None
                if version.acknowledged_at is None
                else {
                    "by": version.acknowledged_by_username,
                    "role": version.acknowledged_by_role,
                    "at": iso_utc(version.acknowledged_at),
                    "reason": version.acknowledgement_reason,
                },
            }
            index += 1
            version.chain_index, version.prev_hash = index, prev
            version.terms_hash = link_hash(terms_content(fields), prev)
            version.save(update_fields=["chain_index", "prev_hash", "terms_hash"])
            prev = version.terms_hash


class Migration(migrations.Migration):
    dependencies = [
        ("leases", "0008_terms_chain_links"),
        ("benchmarks", "0007_trigger_tenant"),
    ]

    operations = [migrations.RunPython(link_existing, migrations.RunPython.noop)]
