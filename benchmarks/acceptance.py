"""A tenant admin's sign-off of an acceptance run: the tenant accepts the run by its chain
hash, a tenant record of the lease's chain (``leases.cosign``: the tenant's keys and
signatures; the signed content: ``gpulease_verify.cosign.acceptance_content``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.selectors import require_tenant_admin
from benchmarks.choices import Trigger
from benchmarks.models import ProbeRun
from gpulease_verify import cosign as rules
from gpulease_verify.canonical import iso_utc
from gpulease_verify.terms import TENANT_ADMIN
from leases.cosign import cosignature, record
from leases.models import Lease, TenantLink
from leases.services import lock_lease


def acceptance_content(*, run: ProbeRun, user: Any, at: datetime) -> dict[str, Any]:
    """What a tenant admin signs to accept an acceptance run (a sentence if it is not one)."""
    if run.trigger != Trigger.ACCEPTANCE or run.chain_index is None:
        raise ValidationError(
            {"run": _("Only an acceptance run that is over and in the chain can be signed off.")}
        )
    return rules.acceptance_content(
        tenant=run.lease.tenant.slug,
        lease=run.lease.reference,
        by=user.get_username(),
        role=TENANT_ADMIN,
        at=iso_utc(at) or "",
        run={
            "id": run.pk,
            "chain_index": run.chain_index,
            "run_hash": run.run_hash,
            "verdict": run.verdict,
        },
    )


@transaction.atomic
def sign_off_acceptance(
    *,
    lease: Lease,
    run: ProbeRun,
    user: Any,
    signed_at: datetime | None = None,
    signature: str | None = None,
) -> TenantLink:
    """A tenant admin's sign-off that the tenant accepts the lease's acceptance run, a
    tenant link of the chain (signed when the tenant has keys). Billing does not read it:
    when billing starts stays the terms' rule (``billing.invoicing.billing_start``)."""
    lease = lock_lease(pk=lease.pk)
    require_tenant_admin(
        user,
        lease.tenant,
        _("Only a tenant admin of %(tenant)s can sign off an acceptance of lease %(lease)s.")
        % {"tenant": lease.tenant.name, "lease": lease.reference},
    )
    if run.lease_id != lease.pk:
        raise ValidationError(
            {"run": _("This run is not of lease %(lease)s.") % {"lease": lease.reference}}
        )
    run.lease = lease
    signed = acceptance_content(run=run, user=user, at=signed_at or timezone.now())
    key = cosignature(tenant=lease.tenant, content=signed, signature=signature)
    return record(
        lease=lease,
        kind=rules.ACCEPTANCE,
        signed=signed,
        signature=signature or None,
        key=key,
        extra={"run": run.pk},
    )
