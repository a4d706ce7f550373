"""Records the tenant signs (issue 29, items 1, 2 and 5): a tenant admin registers an
Ed25519 key; from then on the server refuses an acknowledgement or a dispute whose
signature does not verify with a key of that tenant valid at its time, and an insider
with the database and the provider's key cannot make a bundle that verifies while it
says the tenant agreed to something it did not sign. Each verifier sentence is asserted."""

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from accounts.choices import Role
from benchmarks import acceptance
from benchmarks.links import link_pending
from benchmarks.models import ProbeRun, Rejudgement
from billing import audit, evidence, invoicing
from billing.models import Dispute
from gpulease_verify import cosign as rules
from gpulease_verify.bundle import verify_report
from gpulease_verify.canonical import iso_utc
from gpulease_verify.chain import GENESIS, link_hash
from gpulease_verify.keys import fingerprint
from leases import cosign, services
from leases.models import LeaseTerms, TenantKey, TenantLink
from ledger.chain import stored_links, verify_lease
from telemetry.models import TelemetryBatch
from tests.billing.test_audit import AFTER_NOVEMBER, NOVEMBER, month  # noqa: F401
from tests.factories import MembershipFactory, StaffFactory, at

pytestmark = pytest.mark.django_db


def verified(lease: Any, period: str = NOVEMBER, **options: Any) -> list[str]:
    """The verifier's mismatches of a bundle the server signs now with the provider's key
    (what an insider holding that key would publish)."""
    now = AFTER_NOVEMBER if period == NOVEMBER else timezone.now()
    doc = audit.signed_bundle(lease=lease, period=period, now=now)
    return verify_report(doc, audit.published_key_info()["public_key_pem"], **options)[0]


def register(admin: Any, private: Any = None, *, now: Any = None) -> tuple[Any, TenantKey]:
    """A key pair and its registration by ``admin``, proven as the portal and the
    command do: the registration content signed with the new key."""
    private = private or rules.generate()
    public = rules.public_key_text(private.public_key())
    tenant = admin.memberships.get().tenant
    when = now or timezone.now()
    content = cosign.registration_content(tenant=tenant, user=admin, public_key=public, at=when)
    key = cosign.register_key(
        tenant=tenant,
        user=admin,
        public_key=public,
        signature=rules.sign(private, content),
        signed_at=when,
    )
    return private, key


def propose(lease: Any, day: str = "2026-11-02", cap: str = "0") -> Any:
    return services.propose_retroactive_amendment(
        lease=lease,
        effective_from=at(f"{day} 00:00"),
        changes={"credit_cap_percent": cap},
        reason="The cap was waived.",
    )


def acknowledge(amendment: Any, admin: Any, private: Any, reason: str = "Agreed.") -> Any:
    when = timezone.now()
    content = services.acknowledgement_content(
        amendment=amendment, user=admin, reason=reason, at=when
    )
    return services.acknowledge_amendment(
        amendment=amendment,
        user=admin,
        reason=reason,
        signed_at=when,
        signature=rules.sign(private, content),
    )


def rehash(lease: Any) -> None:
    """What an insider with the database and the server's code does after an edit: every
    link's hash recomputed from its row as it is now, in index order, and stored."""
    prev = GENESIS
    for link in stored_links(lease_id=lease.pk):
        digest = link_hash(link.content, prev)
        fields = {"prev_hash": prev}
        if link.run_id is not None:
            ProbeRun.objects.filter(pk=link.run_id).update(run_hash=digest, **fields)
        elif link.terms_version is not None:
            LeaseTerms.objects.filter(lease=lease, version=link.terms_version).update(
                terms_hash=digest, **fields
            )
        elif link.rejudgement_id is not None:
            Rejudgement.objects.filter(pk=link.rejudgement_id).update(link_hash=digest, **fields)
        elif link.telemetry_id is not None:
            TelemetryBatch.objects.filter(pk=link.telemetry_id).update(link_hash=digest, **fields)
        else:
            TenantLink.objects.filter(pk=link.tenant_link_id).update(link_hash=digest, **fields)
        prev = digest
    assert verify_lease(lease_id=lease.pk) == []


@pytest.fixture
def signed_v2(month):  # type: ignore[no-untyped-def]  # noqa: F811
    """November with the tenant's key registered and v2 (the credit cap at 0 % from 2
    November) acknowledged with the tenant's signature: the honest bundle verifies."""
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)
    admin = MembershipFactory(tenant=month.tenant, role=Role.ADMIN, user__username="ada").user
    private, key = register(admin)
    amendment = propose(month)
    v2 = acknowledge(amendment, admin, private)
    invoicing.draft_invoice(tenant=month.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    assert verified(month) == []
    return {
        "lease": month,
        "admin": admin,
        "private": private,
        "key": key,
        "v2": v2,
        "amendment": amendment,
    }


# --- the server refuses --------------------------------------------------------------


def test_registration_and_acknowledgement_are_links_the_verifier_checks(signed_v2):  # type: ignore[no-untyped-def]
    lease, key = signed_v2["lease"], signed_v2["key"]
    kinds = list(TenantLink.objects.filter(lease=lease).values_list("kind", flat=True))
    assert kinds == ["key_registered", "acknowledgement"]
    ack = TenantLink.objects.get(lease=lease, kind="acknowledgement")
    assert ack.content["key"] == key.fingerprint
    assert ack.content["record"] == {"terms_version": 2}
    signed = ack.content["signed"]
    assert signed["purpose"] == "gpulease-cosign-v1:acknowledgement"
    assert signed["amends"]["version"] == 1
    assert signed["amends"]["terms_hash"] == lease.terms.get(version=1).terms_hash
    assert signed["changes"] == {"credit_cap_percent": "0"}
    assert signed_v2["v2"].acknowledged_at == rules._at(signed["at"])
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER)
    notes = verify_report(
        doc, audit.published_key_info()["public_key_pem"], tenant_keys={key.fingerprint}
    )[1]
    assert (
        "tenant signatures: 1 co-signed record(s) checked with 1 tenant key(s) (pinned by "
        "--tenant-keys)" in notes
    )


def test_forged_signatures_are_refused(signed_v2):  # type: ignore[no-untyped-def]
    """Wrong key, revoked key, another tenant's key, a signature replayed from another
    amendment, and none at all: each refused with its reason, the amendment still
    pending."""
    lease, admin, private = signed_v2["lease"], signed_v2["admin"], signed_v2["private"]
    amendment = propose(lease, day="2026-11-20", cap="10")
    tenant = lease.tenant.name
    now = timezone.now()
    content = services.acknowledgement_content(amendment=amendment, user=admin, reason="ok", at=now)
    no_key = (
        f"The signature does not verify with any key of tenant {tenant} valid at {iso_utc(now)}."
    )

    def refused(signature: str | None, message: str) -> None:
        with pytest.raises(ValidationError) as error:
            services.acknowledge_amendment(
                amendment=amendment, user=admin, reason="ok", signed_at=now, signature=signature
            )
        assert error.value.message_dict["signature"] == [message]

    refused(rules.sign(rules.generate(), content), no_key)  # a key nobody registered
    other_admin = MembershipFactory(role=Role.ADMIN).user
    other_private, _ = register(other_admin)
    refused(rules.sign(other_private, content), no_key)  # another tenant's key
    first = services.acknowledgement_content(
        amendment=signed_v2["amendment"], user=admin, reason="ok", at=now
    )
    refused(rules.sign(private, first), no_key)  # replayed from amendment 1
    refused(
        None,
        f"Tenant {tenant} has registered signing keys: this record needs the tenant's "
        "signature over its content.",
    )
    cosign.revoke_key(key=signed_v2["key"], user=admin, now=now - timedelta(seconds=1))
    refused(rules.sign(private, content), no_key)  # revoked before it signed
    amendment.refresh_from_db()
    assert amendment.status == amendment.Status.PENDING


def test_only_a_tenant_admin_manages_keys_and_a_key_proves_its_registration(month):  # type: ignore[no-untyped-def]  # noqa: F811
    admin = MembershipFactory(tenant=month.tenant, role=Role.ADMIN).user
    viewer = MembershipFactory(tenant=month.tenant, role=Role.VIEWER).user
    staff = StaffFactory()
    private = rules.generate()
    public = rules.public_key_text(private.public_key())
    now = timezone.now()
    for user in (viewer, staff):
        with pytest.raises(PermissionDenied, match="Only a tenant admin of"):
            cosign.register_key(
                tenant=month.tenant, user=user, public_key=public, signature="", signed_at=now
            )
    content = cosign.registration_content(
        tenant=month.tenant, user=admin, public_key=public, at=now
    )
    with pytest.raises(ValidationError, match="not this key's signature over its registration"):
        cosign.register_key(
            tenant=month.tenant,
            user=admin,
            public_key=public,
            signature=rules.sign(rules.generate(), content),
            signed_at=now,
        )
    with pytest.raises(ValidationError, match="Not an Ed25519 public key"):
        cosign.registration_content(tenant=month.tenant, user=admin, public_key="abc", at=now)
    assert not TenantKey.objects.exists()
    _, key = register(admin, private, now=now)
    assert key.fingerprint == fingerprint(private.public_key())
    with pytest.raises(PermissionDenied):
        cosign.revoke_key(key=key, user=staff)


# --- an insider edits the database, re-hashes the chain, re-signs the bundle -----------


def test_db_edit_of_the_acknowledged_terms(signed_v2):  # type: ignore[no-untyped-def]
    lease, v2 = signed_v2["lease"], signed_v2["v2"]
    LeaseTerms.objects.filter(pk=v2.pk).update(credit_cap_percent="50")
    rehash(lease)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    assert verified(lease) == [
        f"acknowledgement of amendment {signed_v2['amendment'].pk} (terms v2): the version's "
        "credit_cap_percent differ(s) from what the tenant signed"
    ]


def test_db_edit_of_the_acknowledgement_and_of_its_signed_content(signed_v2):  # type: ignore[no-untyped-def]
    """The reason edited on the version, then in the signed content too: the second is
    caught by the tenant's signature."""
    lease, v2, number = signed_v2["lease"], signed_v2["v2"], signed_v2["amendment"].pk
    LeaseTerms.objects.filter(pk=v2.pk).update(acknowledgement_reason="We waive all credits.")
    rehash(lease)
    assert verified(lease) == [
        f"acknowledgement of amendment {number} (terms v2): the version's reason differ(s) "
        "from what the tenant signed"
    ]
    link = TenantLink.objects.get(lease=lease, kind="acknowledgement")
    link.content["signed"]["reason"] = "We waive all credits."
    link.save()
    rehash(lease)
    assert verified(lease) == [
        f"acknowledgement of amendment {number}: signature does not verify with tenant key "
        f"{signed_v2['key'].fingerprint}"
    ]


def test_db_deleted_signature(signed_v2):  # type: ignore[no-untyped-def]
    lease, v2 = signed_v2["lease"], signed_v2["v2"]
    TenantLink.objects.filter(lease=lease, kind="acknowledgement").delete()
    rehash(lease)
    assert verified(lease) == [
        f"the acknowledgement of terms v2 at {iso_utc(v2.acknowledged_at)} carries no tenant "
        f"signature, though tenant key(s) {signed_v2['key'].fingerprint} were registered then: "
        "the tenant must co-sign it"
    ]


def test_db_key_of_the_insiders_own_is_refused_by_the_tenants_published_keys(signed_v2):  # type: ignore[no-untyped-def]
    """The insider adds a key of its own to the tenant (a registration it signs itself)
    and signs an edited acknowledgement with it: the bundle verifies by its own keys, not
    against the keys the tenant published."""
    lease, v2, admin = signed_v2["lease"], signed_v2["v2"], signed_v2["admin"]
    insider = rules.generate()
    TenantKey.objects.filter(pk=signed_v2["key"].pk).delete()
    _, forged = register(admin, insider, now=v2.acknowledged_at - timedelta(minutes=1))
    first, added = TenantLink.objects.filter(lease=lease, kind="key_registered")
    TenantLink.objects.filter(pk=first.pk).update(content=added.content)
    added.delete()
    LeaseTerms.objects.filter(pk=v2.pk).update(credit_cap_percent="50")
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    link = TenantLink.objects.get(lease=lease, kind="acknowledgement")
    link.content["signed"]["changes"] = {"credit_cap_percent": "50"}
    link.content["signature"] = rules.sign(insider, link.content["signed"])
    link.content["key"] = forged.fingerprint
    link.save()
    rehash(lease)
    assert verified(lease) == []  # by the bundle's own keys alone
    assert verified(lease, tenant_keys={signed_v2["key"].fingerprint}) == [
        f"tenant key {forged.fingerprint} is not one of the tenant's published keys "
        "(--tenant-keys): the tenant did not register it",
        f"the tenant's published key {signed_v2['key'].fingerprint} is not among the "
        "bundle's tenant keys",
    ]


def test_db_edit_of_a_signed_dispute(signed_v2):  # type: ignore[no-untyped-def]
    lease, admin, private = signed_v2["lease"], signed_v2["admin"], signed_v2["private"]
    run = ProbeRun.objects.filter(lease=lease, verdict="fail").order_by("pk").first()
    now = timezone.now()
    reason = "The 40 Gbps run was our own job's traffic, not the fabric."
    content = evidence.dispute_content(
        lease=lease, user=admin, reason=reason, at=now, probe_run=run
    )
    with pytest.raises(ValidationError, match="does not verify"):
        evidence.open_dispute(
            lease=lease,
            user=admin,
            reason=reason + " Credit us in full.",
            probe_run=run,
            signed_at=now,
            signature=rules.sign(private, content),
        )
    dispute = evidence.open_dispute(
        lease=lease,
        user=admin,
        reason=reason,
        probe_run=run,
        signed_at=now,
        signature=rules.sign(private, content),
    )
    period = timezone.localtime(now, timezone.get_default_timezone()).strftime("%Y-%m")
    assert verified(lease, period) == []
    Dispute.objects.filter(pk=dispute.pk).update(reason="We withdraw every claim.")
    rehash(lease)
    assert verified(lease, period) == [
        f"dispute #{dispute.pk}: its reason differ(s) from what the tenant signed"
    ]
    link = TenantLink.objects.get(lease=lease, kind="dispute")
    link.content["signed"]["reason"] = "We withdraw every claim."
    link.save()
    rehash(lease)
    assert verified(lease, period) == [
        f"dispute #{dispute.pk}: signature does not verify with tenant key "
        f"{signed_v2['key'].fingerprint}"
    ]


def test_acceptance_sign_off_is_a_signed_link(signed_v2):  # type: ignore[no-untyped-def]
    from tests.factories import make_run

    lease, admin, private = signed_v2["lease"], signed_v2["admin"], signed_v2["private"]
    run = make_run(
        lease, slot=at("2026-11-01 08:00"), trigger="acceptance", measured_bps=98 * 10**9
    )
    link_pending(lease_id=lease.pk)
    run = ProbeRun.objects.select_related("lease__tenant").get(pk=run.pk)
    now = timezone.now()
    content = acceptance.acceptance_content(run=run, user=admin, at=now)
    with pytest.raises(ValidationError, match="needs the tenant's signature"):
        acceptance.sign_off_acceptance(lease=lease, run=run, user=admin, signed_at=now)
    link = acceptance.sign_off_acceptance(
        lease=lease, run=run, user=admin, signed_at=now, signature=rules.sign(private, content)
    )
    assert link.content["signed"]["run"] == {
        "id": run.pk,
        "chain_index": run.chain_index,
        "run_hash": run.run_hash,
        "verdict": "pass",
    }
    assert verified(lease) == []
    link.content["signed"]["run"]["verdict"] = "fail"
    TenantLink.objects.filter(pk=link.pk).update(content=link.content)
    rehash(lease)
    assert verified(lease) == [
        f"acceptance of run {run.pk}: signature does not verify with tenant key "
        f"{signed_v2['key'].fingerprint}"
    ]
