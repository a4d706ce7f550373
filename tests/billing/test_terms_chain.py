"""Terms versions as links of the lease's hash chain, and retroactive amendments only with
a tenant admin's acknowledgement (issue 12, item 1)."""

from datetime import timedelta

import pytest
from django.apps import apps
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from accounts.choices import Role
from benchmarks.links import link_pending, run_content
from benchmarks.models import ProbeRun
from billing import audit, invoicing
from billing.ingest import ingest_all
from gpulease_verify.chain import GENESIS, link_hash
from gpulease_verify.terms import DEFAULTED_FIELDS, terms_content
from leases import selectors, services
from leases.choices import LeaseStatus
from leases.links import terms_fields
from leases.models import LeaseEvent, LeaseTerms, TermsAmendment
from ledger.chain import verify_lease
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-01 02:00")
SKEWED = "2026-11-14T16:00:00.000000Z"  # 15 November, Asia/Shanghai


def active_lease():  # type: ignore[no-untyped-def]
    lease = make_lease(nodes=NodeFactory.create_batch(2))
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def admin_of(lease):  # type: ignore[no-untyped-def]
    return MembershipFactory(tenant=lease.tenant, role=Role.ADMIN).user


def acknowledged(lease, effective_from, **changes):  # type: ignore[no-untyped-def]
    amendment = services.propose_retroactive_amendment(
        lease=lease, effective_from=effective_from, changes=changes, reason="Signed late."
    )
    return services.acknowledge_amendment(
        amendment=amendment, user=admin_of(lease), reason="We agreed on this by phone."
    )


@pytest.fixture
def month():  # type: ignore[no-untyped-def]
    """Terms v1 (link 1), three runs on 2 November (links 2-4), then v2, effective from
    15 November and acknowledged (link 5), then three runs on 20 November judged by v2
    (links 6-8). The bundle's stretch is links 2..8: v2 is inside it, v1 before it."""
    lease = active_lease()
    for hour in range(3):
        make_run(lease, slot=at("2026-11-02 10:00") + timedelta(hours=hour), measured_bps=98e9)
    link_pending(lease_id=lease.pk)
    acknowledged(lease, at("2026-11-15 00:00"), incident_after_violations=4)
    for hour in range(3):
        make_run(lease, slot=at("2026-11-20 10:00") + timedelta(hours=hour), measured_bps=98e9)
    link_pending(lease_id=lease.pk)
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    return lease


def signed(lease):  # type: ignore[no-untyped-def]
    return audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER)


def verify(doc):  # type: ignore[no-untyped-def]
    return audit.verify(doc, audit.published_key_info())


def entry(doc, version):  # type: ignore[no-untyped-def]
    return next(t for t in doc["bundle"]["terms"] if t["version"] == version)


# --- linking ----------------------------------------------------------------------------


def test_creating_a_version_links_it_after_the_chain_head():
    lease = active_lease()
    first = lease.terms.get()
    assert (first.chain_index, first.prev_hash) == (1, GENESIS)
    run = make_run(lease, slot=at("2026-11-02 10:00"))
    link_pending(lease_id=lease.pk)
    run.refresh_from_db()
    later = services.amend_terms(
        lease=lease,
        effective_from=timezone.now() + timedelta(days=30),
        changes={"credit_cap_percent": "40"},
        reason="Lower cap from next month.",
    )
    assert (later.chain_index, later.prev_hash) == (3, run.run_hash)
    fields = terms_fields(later)
    assert later.terms_hash == link_hash(terms_content(fields), run.run_hash)
    assert fields["acknowledgement"] is None  # in the future: none needed
    assert verify_lease(lease_id=lease.pk) == []
    event = lease.events.filter(action=LeaseEvent.Action.AMENDED).get()
    assert event.detail["terms_hash"] == later.terms_hash


def test_a_run_linked_after_its_terms_names_their_hash():
    lease = active_lease()
    run = make_run(lease, slot=at("2026-11-02 10:00"))
    link_pending(lease_id=lease.pk)
    run.refresh_from_db()
    content = run_content(ProbeRun.objects.select_related("lease", "terms").get(pk=run.pk))
    assert (content["link"], content["terms_hash"]) == ("run", lease.terms.get().terms_hash)


def test_a_bundle_carries_terms_links_and_verifies(month):
    doc = signed(month)
    bundle = doc["bundle"]
    v1, v2 = entry(doc, 1), entry(doc, 2)
    assert (v1["chain_index"], v2["chain_index"]) == (1, 5)
    assert [r["chain_index"] for r in bundle["runs"]] == [2, 3, 4, 6, 7, 8]
    assert v2["acknowledgement"]["role"] == "admin"
    assert v2["acknowledgement"]["reason"] == "We agreed on this by phone."
    assert v2["created_at"] > v2["effective_from"]
    assert v2["content"] == terms_content(v2)
    late_run = next(r for r in bundle["runs"] if r["chain_index"] == 6)
    assert late_run["prev_hash"] == v2["terms_hash"]
    assert late_run["content"]["terms_hash"] == v2["terms_hash"]
    mismatches, notes = audit.verify_report(doc, audit.published_key_info())
    assert mismatches == []
    assert "chain: 7 link(s) checked" in notes  # six runs and v2, links 2..8


# --- insider edits in the database, then a fresh bundle ---------------------------------


def test_a_past_version_edited_in_the_database_is_caught(month):
    v1 = month.terms.get(version=1)
    windows = [{"weekday": 0, "start": "00:00", "end": "23:59"}]
    LeaseTerms.objects.filter(pk=v1.pk).update(maintenance_windows=windows)
    mismatches = verify(signed(month))
    assert any(
        m.startswith(f"chain link 1 (terms v1): stored hash {v1.terms_hash[:16]}… does not match")
        and m.endswith("the terms version was changed after it was recorded")
        for m in mismatches
    ), mismatches
    problems = verify_lease(lease_id=month.pk)
    assert problems[0].startswith("chain link 1 (terms v1): stored hash ")


def test_re_hashing_the_edited_version_breaks_the_next_link(month):
    v2 = month.terms.get(version=2)
    LeaseTerms.objects.filter(pk=v2.pk).update(credit_cap_percent="0")
    v2.refresh_from_db()
    rehashed = link_hash(terms_content(terms_fields(v2)), v2.prev_hash)
    LeaseTerms.objects.filter(pk=v2.pk).update(terms_hash=rehashed)
    next_run = ProbeRun.objects.get(lease=month, chain_index=6)
    mismatches = verify(signed(month))
    assert (
        f"chain link 6 (run {next_run.pk}) names {v2.terms_hash[:16]}… as the previous hash, "
        f"but chain link 5 (terms v2) has hash {rehashed[:16]}…"
    ) in mismatches
    # The runs judged by v2 name its hash in their content: theirs no longer recompute.
    assert any(
        m.startswith(f"chain link 6 (run {next_run.pk}): stored hash ")
        and m.endswith("the run was changed after it was recorded")
        for m in mismatches
    )


# --- edited bundles, re-signed with the provider's key ------------------------------------


def test_a_run_naming_another_terms_hash_is_reported(month):
    doc = signed(month)
    run = next(r for r in doc["bundle"]["runs"] if r["chain_index"] == 7)
    v1, v2 = entry(doc, 1), entry(doc, 2)
    run["content"]["terms_hash"] = v1["terms_hash"]
    mismatches = verify(audit.sign_bundle(doc["bundle"]))
    assert (
        f"chain link 7 (run {run['id']}) was judged by terms v2 with hash "
        f"{v1['terms_hash'][:16]}…, but the bundle's terms v2 has hash {v2['terms_hash'][:16]}…"
    ) in mismatches
    assert any(m.startswith(f"chain link 7 (run {run['id']}): stored hash") for m in mismatches)


def test_a_retroactive_version_without_acknowledgement_is_reported(month):
    doc = signed(month)
    v2 = entry(doc, 2)
    v2["acknowledgement"] = None
    v2["content"] = terms_content(v2)
    v2["terms_hash"] = link_hash(v2["content"], v2["prev_hash"])
    mismatches = verify(audit.sign_bundle(doc["bundle"]))
    assert (
        f"terms v2 took effect {SKEWED}, before it was created ({v2['created_at']}), and no "
        "tenant admin acknowledged it"
    ) in mismatches


def test_a_content_that_disagrees_with_its_fields_is_reported(month):
    doc = signed(month)
    entry(doc, 1)["maintenance_windows"] = [{"weekday": 0, "start": "00:00", "end": "23:59"}]
    mismatches = verify(audit.sign_bundle(doc["bundle"]))
    assert "terms v1: its hashed content does not match its fields (maintenance_windows)" in (
        mismatches
    )


def test_a_dropped_terms_link_leaves_a_gap(month):
    doc = signed(month)
    doc["bundle"]["terms"] = [t for t in doc["bundle"]["terms"] if t["version"] != 2]
    mismatches = verify(audit.sign_bundle(doc["bundle"]))
    run = next(r for r in doc["bundle"]["runs"] if r["chain_index"] == 6)
    assert f"chain link 6 (run {run['id']}) follows chain link 4: 1 link(s) are missing" in (
        mismatches
    )


# --- retroactive amendments ----------------------------------------------------------------


def test_a_retroactive_amendment_is_refused_then_pending_then_in_force_once_acknowledged():
    lease = active_lease()
    past = at("2026-11-20 00:00")
    with pytest.raises(ValidationError) as error:
        services.amend_terms(
            lease=lease, effective_from=past, changes={"credit_cap_percent": "0"}, reason="Cap 0"
        )
    assert error.value.messages[0].startswith(
        "This amendment would take effect 2026-11-20 00:00, before it is recorded ("
    )
    assert error.value.messages[0].endswith(
        f"An amendment in the past needs a tenant admin of {lease.tenant.name} to acknowledge "
        "it: propose it as a retroactive amendment."
    )
    amendment = services.propose_retroactive_amendment(
        lease=lease, effective_from=past, changes={"credit_cap_percent": "0"}, reason="Cap 0"
    )
    assert amendment.status == TermsAmendment.Status.PENDING
    assert lease.terms.count() == 1
    assert selectors.terms_in_force(lease=lease, at=at("2026-11-25 00:00")).version == 1
    assert [t.version for t in selectors.TermsTimeline.for_lease(lease)] == [1]
    assert lease.events.filter(action=LeaseEvent.Action.AMENDMENT_PROPOSED).count() == 1

    viewer = MembershipFactory(tenant=lease.tenant, role=Role.VIEWER).user
    with pytest.raises(PermissionDenied, match="Only a tenant admin of"):
        services.acknowledge_amendment(amendment=amendment, user=viewer, reason="ok")
    admin = admin_of(lease)
    with pytest.raises(ValidationError, match=r"An acknowledgement needs a reason\."):
        services.acknowledge_amendment(amendment=amendment, user=admin, reason=" ")

    terms = services.acknowledge_amendment(amendment=amendment, user=admin, reason="Agreed.")
    amendment.refresh_from_db()
    assert amendment.status == TermsAmendment.Status.ACKNOWLEDGED and amendment.terms == terms
    assert (terms.version, str(terms.credit_cap_percent)) == (2, "0.00")
    assert terms.acknowledgement["by"] == admin.username
    assert (terms.acknowledged_by_role, terms.acknowledgement_reason) == ("admin", "Agreed.")
    assert terms.chain_index == 2 and terms.prev_hash == lease.terms.get(version=1).terms_hash
    assert selectors.terms_in_force(lease=lease, at=at("2026-11-25 00:00")) == terms
    assert verify_lease(lease_id=lease.pk) == []
    event = lease.events.filter(action=LeaseEvent.Action.AMENDED).get()
    assert event.detail["acknowledged_by"] == admin.username
    with pytest.raises(ValidationError, match="already acknowledged: it is terms v2"):
        services.acknowledge_amendment(amendment=amendment, user=admin, reason="again")


def test_an_amendment_within_the_clock_skew_tolerance_needs_no_acknowledgement():
    lease = active_lease()
    terms = services.amend_terms(
        lease=lease,
        effective_from=timezone.now() - timedelta(seconds=30),
        changes={"incident_after_violations": 5},
        reason="Effective now (client clock a little behind).",
    )
    assert terms.acknowledgement is None
    with pytest.raises(ValidationError, match="not in the past"):
        services.propose_retroactive_amendment(
            lease=lease,
            effective_from=timezone.now() + timedelta(days=1),
            changes={},
            reason="Tomorrow.",
        )


def test_a_lease_whose_history_starts_in_the_past_needs_no_acknowledgement_for_v1():
    lease = active_lease()  # starts 2026-11-01, created now
    first = lease.terms.get()
    assert first.effective_from < first.created_at - timedelta(days=1)
    assert verify_lease(lease_id=lease.pk) == []


# --- the migration ---------------------------------------------------------------------------


def test_the_migration_links_existing_versions_after_existing_runs():
    from importlib import import_module

    migration = import_module("leases.migrations.0009_link_existing_terms")
    lease = active_lease()
    acknowledged(lease, at("2026-11-15 00:00"), incident_after_violations=4)
    # As before this change: terms unlinked, runs linked from the genesis hash without a
    # terms hash in their content.
    # (Versions that existed then are judged by fabric health rule set 1: leases 0014.)
    LeaseTerms.objects.filter(lease=lease).update(
        chain_index=None, prev_hash="", terms_hash="", health_rules=1
    )
    runs = [make_run(lease, slot=at("2026-11-02 10:00") + timedelta(hours=h)) for h in range(2)]
    link_pending(lease_id=lease.pk)
    runs = [ProbeRun.objects.get(pk=run.pk) for run in runs]
    assert (runs[0].chain_index, runs[0].prev_hash) == (1, GENESIS)
    migration.link_existing(apps, None)
    v1, v2 = lease.terms.order_by("version")
    assert (v1.chain_index, v1.prev_hash) == (3, runs[1].run_hash)
    assert (v2.chain_index, v2.prev_hash) == (4, v1.terms_hash)
    assert verify_lease(lease_id=lease.pk) == []  # old runs' hashes still hold
    content = run_content(ProbeRun.objects.select_related("lease", "terms").get(pk=runs[0].pk))
    assert "terms_hash" not in content


def test_fields_added_with_a_default_leave_older_hashes_standing_and_cover_a_change():
    """The fabric-health, witness, probe-tax and confirmation fields came after versions
    were hashed: a version at their defaults hashes as one written before they existed,
    and one that sets any of them hashes differently, so the change cannot be made
    unseen."""
    version = make_lease().terms.get()
    # A new version is judged by fabric health rule set 2; one from before the field
    # existed was judged by set 1, which its hash implies (leases 0014 sets it).
    assert version.health_rules == 2
    version.health_rules = 1
    fields = terms_fields(version)
    older = {name: value for name, value in fields.items() if name not in DEFAULTED_FIELDS}
    assert terms_content(fields) == terms_content(older)
    assert fields["witness_tolerance_percent"] == "10.00"
    for name, value in (
        ("health_thresholds", {"drop_after_s": 120}),
        ("witness_tolerance_percent", "5.00"),
        ("probe_idle_below_percent", "30.00"),
        ("telemetry_interval_s", 60),
        ("health_rules", 2),
        ("confirm_failures", False),
        ("confirm_pause_s", 30),
        ("p95_direction", "max"),
        ("p95_window", "daily_average"),
    ):
        changed = terms_content({**fields, name: value})
        assert changed != terms_content(fields), name
        assert name in changed


def test_health_thresholds_in_the_terms_are_checked_when_written():
    version = make_lease().terms.get()
    version.health_thresholds = {"drop_after_seconds": 120}
    with pytest.raises(ValidationError) as refused:
        version.full_clean()
    assert "unknown health threshold 'drop_after_seconds'" in str(refused.value)
    version.health_thresholds = {"drop_after_s": -1}
    with pytest.raises(ValidationError) as negative:
        version.full_clean()
    assert "must not be negative" in str(negative.value)
