"""Contract audit: the probe runs' hash chain, the signed bundle, and audit_verify
recomputing compliance, the credit and the invoice lines from the bundle alone."""

import json
from datetime import timedelta
from decimal import Decimal as D

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command

from benchmarks.links import link_pending, run_content
from benchmarks.missed_slots import mark_missed
from benchmarks.models import ProbeRun
from billing import audit, invoicing
from billing.ingest import ingest_all
from gpulease_verify.chain import GENESIS, Link, link_hash, verify_chain
from leases import services
from leases.choices import LeaseStatus
from ledger.chain import stored_links, verify_lease
from tests.factories import NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-01 02:00")


def active_lease(**terms):  # type: ignore[no-untyped-def]
    lease = make_lease(nodes=NodeFactory.create_batch(2), **terms)
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


@pytest.fixture
def month():  # type: ignore[no-untyped-def]
    """A lease's November: 10 hourly throughput samples (one failed, one that measured
    nothing), link checks of both nodes in three slots (one node down in one), and an
    acceptance run that is evidence, not a sample. Rollups ingested, invoice drafted.

    Throughput: 8 passed, 1 failed, 1 unknown -> 80.000%; availability: 2 slots of 5
    minutes up, 1 down -> 66.667%. The credit compliance is the lower, 66.667%, below the
    95% tier (50%), capped at 50%: 50% of the 6,000.00 network fee = -3,000.00."""
    lease = active_lease()
    for hour in range(10):
        slot = at("2026-11-02 10:00") + timedelta(hours=hour)
        if hour == 3:
            make_run(lease, slot=slot, verdict="fail", measured_bps=40 * 10**9)
        elif hour == 7:
            make_run(lease, slot=slot, state="failed")
        else:
            make_run(lease, slot=slot, measured_bps=98 * 10**9)
    for minute, down in ((0, None), (5, "n2"), (10, None)):
        slot = at("2026-11-03 08:00") + timedelta(minutes=minute)
        for node in ("n1", "n2"):
            make_run(
                lease,
                kind="link",
                target=node,
                pattern="node",
                slot=slot,
                cadence_s=300,
                verdict="fail" if node == down else "pass",
            )
    make_run(lease, slot=at("2026-11-01 00:05"), trigger="acceptance", measured_bps=99 * 10**9)
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    return lease


def floats(value, path="bundle"):  # type: ignore[no-untyped-def]
    if isinstance(value, float):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from floats(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from floats(item, f"{path}[{index}]")


def signed(lease):  # type: ignore[no-untyped-def]
    return audit.signed_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER)


def resign(doc, key):  # type: ignore[no-untyped-def]
    return audit.sign_bundle(doc["bundle"], key)


# --------------------------------------------------------------------------------------
# The chain
# --------------------------------------------------------------------------------------


def test_finished_runs_are_linked_in_finish_order_after_the_first_terms_version():
    lease = active_lease()
    first_terms = lease.terms.get()
    assert (first_terms.chain_index, first_terms.prev_hash) == (1, GENESIS)
    late = make_run(lease, slot=at("2026-11-02 10:00"), finished=at("2026-11-02 10:30"))
    early = make_run(lease, slot=at("2026-11-02 11:00"), finished=at("2026-11-02 10:10"))
    linked = link_pending(lease_id=lease.pk)
    assert [run.pk for run in linked] == [early.pk, late.pk]
    early.refresh_from_db()
    late.refresh_from_db()
    assert (early.chain_index, early.prev_hash) == (2, first_terms.terms_hash)
    assert (late.chain_index, late.prev_hash) == (3, early.run_hash)
    assert late.run_hash == link_hash(run_content(late), early.run_hash)
    assert link_pending(lease_id=lease.pk) == []  # idempotent
    assert verify_lease(lease_id=lease.pk) == []


def test_a_run_still_scheduled_is_not_linked_until_it_is_missed():
    lease = active_lease()
    done = make_run(lease, slot=at("2026-11-02 10:00"))
    waiting = make_run(lease, slot=at("2026-11-02 11:00"), state="scheduled")
    ProbeRun.objects.filter(pk=waiting.pk).update(finished_at=None, started_at=None)
    link_pending(lease_id=lease.pk)
    waiting.refresh_from_db()
    assert waiting.chain_index is None
    # The dispatcher marks it missed (one UPDATE, whatever the number of leases); the next
    # run recorded for the lease, or the next audit bundle, links it.
    mark_missed(now=at("2026-11-02 13:00"))
    link_pending(lease_id=lease.pk)
    waiting.refresh_from_db()
    done.refresh_from_db()
    assert (waiting.state, waiting.chain_index, waiting.prev_hash) == (
        "missed",
        3,  # 1 is the terms version
        done.run_hash,
    )


def test_recording_a_run_links_it_and_the_runs_that_finished_before_it():
    from benchmarks.probes.runner import Execution
    from benchmarks.recording import record_execution

    lease = active_lease()
    skipped = make_run(lease, slot=at("2026-11-02 10:00"), state="skipped")
    run = make_run(lease, slot=at("2026-11-02 11:00"), state="running")
    ProbeRun.objects.filter(pk=run.pk).update(finished_at=None)
    run.refresh_from_db()
    execution = Execution(
        command="iperf3 -c 198.18.0.2 -J",
        raw_output="{}",
        stderr="",
        exit_code=1,
        state="failed",
        error="iperf3 exited 1",
        finished_at=at("2026-11-02 11:01"),
    )
    record_execution(run=run, execution=execution, terms=None, plan={}, hostnames=[])
    skipped.refresh_from_db()
    assert (skipped.chain_index, run.chain_index, run.prev_hash) == (2, 3, skipped.run_hash)
    assert verify_lease(lease_id=lease.pk) == []


def test_an_unreachable_run_that_may_be_retried_waits_for_its_last_attempt():
    lease = active_lease()
    run = make_run(lease, slot=at("2026-11-02 10:00"), state="unreachable")
    ProbeRun.objects.filter(pk=run.pk).update(attempts=1)
    assert link_pending(lease_id=lease.pk, now=at("2026-11-02 10:30")) == []
    ProbeRun.objects.filter(pk=run.pk).update(attempts=3)
    assert len(link_pending(lease_id=lease.pk, now=at("2026-11-02 10:30"))) == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [("raw_sha256", "f" * 64), ("verdict", "pass")],
)
def test_changing_a_stored_run_breaks_the_chain_at_that_run(field, value):
    lease = active_lease()
    make_run(lease, slot=at("2026-11-02 10:00"))
    tampered = make_run(lease, slot=at("2026-11-02 11:00"), verdict="fail")
    make_run(lease, slot=at("2026-11-02 12:00"))
    link_pending(lease_id=lease.pk)
    ProbeRun.objects.filter(pk=tampered.pk).update(**{field: value})
    problems = verify_lease(lease_id=lease.pk)
    assert len(problems) == 1
    assert problems[0].startswith(f"chain link 3 (run {tampered.pk}): stored hash ")
    assert "does not match its content" in problems[0]


def test_a_removed_link_and_a_wrong_genesis_are_named():
    lease = active_lease()
    for hour in range(3):
        make_run(lease, slot=at("2026-11-02 10:00") + timedelta(hours=hour))
    link_pending(lease_id=lease.pk)
    links = stored_links(lease_id=lease.pk)
    assert verify_chain([links[0], links[2]]) == [
        f"chain link 3 (run {links[2].run_id}) follows chain link 1: 1 link(s) are missing"
    ]
    forged = Link(1, "1" * 64, links[0].run_hash, links[0].content, links[0].run_id)
    problems = verify_chain([forged])
    assert "not the genesis hash" in problems[0]
    assert "does not match its content" in problems[1]


# --------------------------------------------------------------------------------------
# The bundle and its signature
# --------------------------------------------------------------------------------------


def test_the_bundle_holds_terms_runs_rollups_compliance_credit_and_lines(month):
    doc = signed(month)
    bundle = doc["bundle"]
    assert bundle["format"] == audit.FORMAT
    assert bundle["period"] == {
        "period": NOVEMBER,
        "time_zone": "Asia/Shanghai",
        "start": "2026-10-31T16:00:00.000000Z",
        "end": "2026-11-30T16:00:00.000000Z",
        "month_seconds": 2_592_000,
    }
    assert [t["version"] for t in bundle["terms"]] == [1]
    assert bundle["terms"][0]["network_fee_per_month"] == "6000.00"
    assert len(bundle["runs"]) == 17
    # Link 1 is terms v1, created with the lease before any run.
    assert [r["chain_index"] for r in bundle["runs"]] == list(range(2, 19))
    assert (bundle["terms"][0]["chain_index"], bundle["terms"][0]["prev_hash"]) == (1, "0" * 64)
    assert bundle["runs"][0]["prev_hash"] == bundle["terms"][0]["terms_hash"]
    assert bundle["runs"][0]["content"]["terms_hash"] == bundle["terms"][0]["terms_hash"]
    acceptance = next(r for r in bundle["runs"] if r["content"]["trigger"] == "acceptance")
    assert acceptance["sla"] == {"counted": False, "outcome": None}
    assert acceptance["raw_url"] == f"/api/v1/probe-runs/{acceptance['id']}/raw/"
    throughput = bundle["compliance"]["by_kind"]["throughput"]
    assert (throughput["passed"], throughput["failed"], throughput["unknown"]) == (8, 1, 1)
    assert throughput["compliance_percent"] == "80.000"
    assert bundle["compliance"]["availability"]["percent"] == "66.667"
    assert bundle["compliance"]["credit_compliance_percent"] == "66.667"
    assert bundle["credit"]["amount"] == "-3000.00"
    assert bundle["credit"]["capped"] is False
    kinds = [(line["kind"], line["amount"]) for line in bundle["invoice"]["lines"]]
    assert kinds == [
        ("node_rent", "90000.00"),
        ("network_fee", "6000.00"),
        ("sla_credit", "-3000.00"),
    ]
    assert bundle["invoice"]["source"] == "invoice"
    assert not list(floats(bundle)), "a bundle holds no JSON float (see verifier/README.md)"
    assert audit.verify(doc, audit.published_key_info()) == []


def test_a_modified_bundle_fails_the_signature(month):
    doc = signed(month)
    doc["bundle"]["credit"]["amount"] = "-30.00"
    mismatches = audit.verify(doc, audit.published_key_info())
    assert mismatches[0].startswith("the signature does not verify")


def test_a_bundle_resigned_with_another_key_fails_against_the_published_key(month):
    doc = signed(month)
    published = audit.published_key_info()["public_key_pem"]
    forged = resign(doc, Ed25519PrivateKey.generate())
    assert audit.verify(forged, trust_embedded_key=True) == []  # consistent in itself...
    mismatches = audit.verify(forged, published)  # ...but not the provider's
    assert mismatches[0].startswith("the bundle names signing key sha256:")
    assert mismatches[1].startswith("the signature does not verify")


def test_a_forged_verdict_is_caught_by_the_chain_and_the_recomputation(month):
    doc = signed(month)
    key = Ed25519PrivateKey.generate()
    failed = next(
        r for r in doc["bundle"]["runs"] if r["content"]["verdict"] == "fail"
    )  # the 40 Gbit/s sample
    failed["content"]["verdict"] = "pass"
    mismatches = audit.verify(resign(doc, key), trust_embedded_key=True)
    assert any(
        m.startswith(f"chain link {failed['chain_index']} (run {failed['id']}): stored hash")
        for m in mismatches
    )
    assert f"run {failed['id']}: the bundle says failed, recomputed passed" in mismatches
    assert "throughput passed samples: the bundle says 8, recomputed 9" in mismatches


def test_a_stale_rollup_and_a_wrong_line_are_each_named(month):
    doc = signed(month)
    bundle = doc["bundle"]
    rollup = next(r for r in bundle["rollups"] if r["kind"] == "throughput")
    rollup["passed"] += 1
    rent = bundle["invoice"]["lines"][0]
    rent["amount"] = "90000.01"
    mismatches = audit.verify(resign(doc, Ed25519PrivateKey.generate()), trust_embedded_key=True)
    assert mismatches == [
        f"hourly rollup throughput {rollup['hour']}: rollup vs runs: passed 2 vs 1",
        "invoice line 1 (node_rent) amount: the bundle says 90000.01, recomputed 90000.00",
        "invoice totals: the bundle says subtotal 93000.00, tax 5580.00, total 98580.00; its "
        "lines give 93000.01, 5580.00, 98580.01 (tax per rate: 5580.00 on 93000.01 at 6.00%)",
    ]


def test_a_line_taxed_at_another_rate_than_its_terms_say_is_named(month):
    # The rent line claims 0% (its terms say 6%): its rate is named, and the totals no
    # longer add up per rate group: 6% on 3,000.00 (fee 6,000.00 - credit 3,000.00) =
    # 180.00, 0% on the rent 90,000.00 = 0.00.
    doc = signed(month)
    bundle = doc["bundle"]
    rent = bundle["invoice"]["lines"][0]
    assert rent["tax_rate_percent"] == "6.00"
    rent["tax_rate_percent"] = "0.00"
    mismatches = audit.verify(resign(doc, Ed25519PrivateKey.generate()), trust_embedded_key=True)
    assert mismatches == [
        "invoice line 1 (node_rent) tax rate percent: the bundle says 0.00, recomputed 6.00",
        "invoice tax rate percent: the bundle says 6.00, but its lines have 2 rates "
        "(0.00, 6.00): null",
        "invoice totals: the bundle says subtotal 93000.00, tax 5580.00, total 98580.00; its "
        "lines give 93000.00, 180.00, 93180.00 (tax per rate: 0.00 on 90000.00 at 0.00%, "
        "180.00 on 3000.00 at 6.00%)",
    ]


def test_a_bundle_from_before_tax_per_line_still_verifies(month):
    # Written before lines carried a rate: each line's rate in detail.terms_tax_rate_percent
    # (other lines' as terms_tax_rate_percent), no rent rate in the terms (its hash left it
    # out: it equalled the service rate). The one-rate rule still applies to it.
    doc = signed(month)
    bundle = doc["bundle"]
    for line in bundle["invoice"]["lines"]:
        line["detail"]["terms_tax_rate_percent"] = line.pop("tax_rate_percent")
    for line in bundle["invoice"]["other_lines"]:
        line["terms_tax_rate_percent"] = line.pop("tax_rate_percent")
    for entry in bundle["terms"]:
        assert entry.pop("rent_tax_rate_percent") == entry["tax_rate_percent"]
    key = Ed25519PrivateKey.generate()
    assert audit.verify(resign(doc, key), trust_embedded_key=True) == []
    bundle["invoice"]["invoice_tax"] = "5580.01"
    assert audit.verify(resign(doc, key), trust_embedded_key=True) == [
        "invoice totals: the bundle says subtotal 93000.00, tax 5580.01, total 98580.00; its "
        "lines give 93000.00, 5580.00, 98580.00 (tax per rate: 5580.00 on 93000.00 at 6.00%)"
    ]


def test_the_credit_is_recomputed_with_the_bundles_tiers_and_cap(month):
    doc = signed(month)
    bundle = doc["bundle"]
    bundle["terms"][0]["credit_cap_percent"] = "10"
    mismatches = audit.verify(resign(doc, Ed25519PrivateKey.generate()), trust_embedded_key=True)
    assert "credit percent applied: the bundle says 50, recomputed 10" in mismatches
    assert "credit amount: the bundle says -3000.00, recomputed -600.00" in mismatches
    assert (
        "SLA credit line(s) on the invoice: the bundle says -3000.00, recomputed -600.00"
        in mismatches
    )


def test_the_public_key_is_created_once_and_reused(settings, tmp_path):
    settings.AUDIT_SIGNING_KEY = str(tmp_path / "keys" / "audit.pem")
    first = audit.published_key_info()
    assert (tmp_path / "keys" / "audit.pem").stat().st_mode & 0o777 == 0o600
    assert audit.published_key_info() == first
    assert audit.load_public_key(first["public_key"]).public_bytes_raw() == (
        audit.load_public_key(first["public_key_pem"]).public_bytes_raw()
    )


def test_a_bad_period_is_refused():
    lease = active_lease()
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="YYYY-MM"):
        audit.build_bundle(lease=lease, period="2026-13")


# --------------------------------------------------------------------------------------
# audit_verify
# --------------------------------------------------------------------------------------


def run_verify(*args, capsys):  # type: ignore[no-untyped-def]
    try:
        call_command("audit_verify", *args)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_audit_verify_exits_0_on_a_real_bundle_without_touching_the_database(
    month, tmp_path, capsys, django_assert_num_queries
):
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(signed(month), ensure_ascii=False))
    key = tmp_path / "provider.pem"
    key.write_text(audit.published_key_info()["public_key_pem"])
    with django_assert_num_queries(0):
        code, out, _err = run_verify(str(path), "--public-key", str(key), capsys=capsys)
    assert code == 0, out
    assert "ok: chain: 17 link(s) checked" in out
    assert "ok: credit: 50% of network fee 6000.00 = -3000.00" in out
    assert out.rstrip().endswith("all figures agree")


def test_audit_verify_exits_1_and_prints_every_mismatch(month, tmp_path, capsys):
    doc = signed(month)
    doc["bundle"]["invoice"]["lines"][1]["amount"] = "6100.00"
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(doc))
    fingerprint = audit.published_key_info()["fingerprint"]
    code, out, err = run_verify(str(path), "--fingerprint", fingerprint, capsys=capsys)
    assert code == 1
    assert "MISMATCH: the signature does not verify" in out
    assert "MISMATCH: invoice line 2 (network_fee) amount: the bundle says 6100.00" in out
    assert "mismatch(es)" in err


def test_an_accepted_dispute_credit_line_is_checked_too(month):
    from billing import evidence
    from tests.factories import MembershipFactory, StaffFactory

    dispute = evidence.open_dispute(
        lease=month,
        user=MembershipFactory(tenant=month.tenant, role="admin").user,
        reason="the 40 Gbit/s sample was our own job",
        probe_run=month.probe_runs.filter(verdict="fail").first(),
        now=at("2026-11-20 10:00"),
    )
    evidence.accept_dispute(
        dispute=dispute,
        user=StaffFactory(),
        reason="agreed",
        credit_cny=D("123.45"),
        now=at("2026-11-21 10:00"),
    )
    invoicing.draft_invoice(tenant=month.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    doc = signed(month)
    assert doc["bundle"]["invoice"]["lines"][-1]["amount"] == "-123.45"
    assert doc["bundle"]["disputes"][0]["events"][-1]["action"] == "accepted"
    assert audit.verify(doc, audit.published_key_info()) == []


def test_a_month_without_runs_or_invoice_verifies_with_computed_lines():
    lease = active_lease()
    doc = signed(lease)
    assert doc["bundle"]["runs"] == []
    assert doc["bundle"]["invoice"]["source"] == "computed"
    assert [line["kind"] for line in doc["bundle"]["invoice"]["lines"]] == [
        "node_rent",
        "network_fee",
    ]
    assert audit.verify(doc, audit.published_key_info()) == []
