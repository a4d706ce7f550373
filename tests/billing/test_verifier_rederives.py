"""The verifier derives every figure again from the bundle alone (issue 12, item 2): each
tampering below is what an insider with the server could do — edit the bundle, then sign
it with the provider's own key — and each is caught by a recomputation, whose sentence is
asserted.

The month: a lease of two nodes (45,000.00 a node-month, 6,000.00 network fee, 100 Gbps at
95%), ten hourly throughput samples (one at 40 Gbit/s fails, one iperf3 run whose real raw
output measured 204.7 Mbit/s fails), link checks of both nodes in two slots (one real raw
ethtool output each: a 200G port up, above its 100G), rolled up and invoiced. November
in Asia/Shanghai is 2,592,000 s."""

import copy
import hashlib
import json
from datetime import timedelta
from pathlib import Path

import pytest

from benchmarks.models import ProbeRun, outputs
from benchmarks.recording import terms_view
from billing import audit, invoicing
from billing.ingest import ingest_all
from gpulease_verify.interpret import PlanNode, PlanPort, interpret
from leases import services
from leases.choices import LeaseStatus
from leases.models import NodeAssignment
from tests.factories import NicPortFactory, NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-01 02:00")
FIXTURES = Path(__file__).parent.parent / "benchmarks" / "fixtures"
WINDOW = "from 2026-10-31T16:00:00.000000Z to 2026-11-30T16:00:00.000000Z"


def raw_run(lease, *, tool, raw, node=None, **fields):  # type: ignore[no-untyped-def]
    """A run stored exactly as record_execution stores it: the raw output, its sha256, and
    what the real interpretation parsed and judged."""
    run = make_run(lease, tool=tool, **fields)
    result = interpret(tool=tool, raw_output=raw, terms=terms_view(run.terms), node=node)
    outputs.store([raw])
    ProbeRun.objects.filter(pk=run.pk).update(
        raw_sha256=hashlib.sha256(raw.encode()).hexdigest(),
        parsed=result.parsed,
        measured_bps=result.measured_bps,
        latency_us=result.latency_us,
        verdict=result.judgement.verdict,
        rule=result.judgement.rule,
        verdict_reason=result.judgement.reason,
    )
    run.refresh_from_db()
    return run


@pytest.fixture
def month():  # type: ignore[no-untyped-def]
    nodes = NodeFactory.create_batch(2)
    for node in nodes:
        NicPortFactory(node=node, netdev="eth0")
    lease = make_lease(nodes=nodes)
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    for hour in range(9):
        slot = at("2026-11-02 10:00") + timedelta(hours=hour)
        failed = hour == 3
        make_run(
            lease,
            slot=slot,
            verdict="fail" if failed else "pass",
            measured_bps=(40 if failed else 98) * 10**9,
        )
    iperf3 = (FIXTURES / "iperf3" / "tcp_3.14_macos.json").read_text()
    raw_run(lease, tool="iperf3", raw=iperf3, slot=at("2026-11-02 19:00"))
    ethtool = (FIXTURES / "ethtool" / "speed_200g_hccn_tool_prefix.txt").read_text()
    for minute in (0, 5):
        for node in nodes:
            plan = PlanNode(
                node.hostname, "", 0, (PlanPort("mlx5_0", 1, "eth0", None, "ethernet", 100),)
            )
            raw_run(
                lease,
                tool="ethtool",
                raw=f"### ethtool eth0\n{ethtool}\n### carrier_down_count eth0\n0\n",
                node=plan,
                kind="link",
                target=node.hostname,
                pattern="node",
                cadence_s=300,
                slot=at("2026-11-03 08:00") + timedelta(minutes=minute),
            )
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    return lease


def bundle_of(lease, *, raw=False):  # type: ignore[no-untyped-def]
    return audit.build_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER, include_raw=raw)


def verified(bundle):  # type: ignore[no-untyped-def]
    """The mismatches of the bundle signed with the provider's key, checked with the
    provider's published key (what an insider's forgery looks like to an auditor)."""
    return audit.verify(audit.sign_bundle(bundle), audit.published_key_info()["public_key"])


def line(bundle, kind):  # type: ignore[no-untyped-def]
    return next(item for item in bundle["invoice"]["lines"] if item["kind"] == kind)


def passing_run(bundle):  # type: ignore[no-untyped-def]
    return next(
        r
        for r in bundle["runs"]
        if r["content"]["kind"] == "throughput" and r["content"]["verdict"] == "pass"
    )


def test_the_untouched_bundle_verifies_with_raw_output_and_everything_recomputed(month):
    bundle = bundle_of(month, raw=True)
    assert verified(bundle) == []
    assert [(x["kind"], x["amount"]) for x in bundle["invoice"]["lines"]] == [
        ("node_rent", "90000.00"),
        ("network_fee", "6000.00"),
        ("sla_credit", "-3000.00"),
    ]
    assert {a["void"] for a in bundle["assignments"]} == {False}
    assert len(bundle["assignments"]) == 2
    ethtool = next(r for r in bundle["runs"] if r["content"]["tool"] == "ethtool")
    port = json.loads(ethtool["content"]["parsed"])["ports"][0]
    assert (port["expected_bps"], port["previous_link_down_count"]) == (100 * 10**9, None)
    assert bundle["nodes"][ethtool["content"]["target"]]["ports"][0]["netdev"] == "eth0"
    _mismatches, notes = audit.verify_report(
        audit.sign_bundle(bundle), audit.published_key_info()["public_key"]
    )
    assert "runs: 14 re-judged from their figures, 14 re-parsed from raw output" in notes
    assert f"billed window: {WINDOW}" in notes


# --- runs re-judged -------------------------------------------------------------------


def test_a_pass_on_1_mbit_is_rejudged_a_fail(month):
    bundle = bundle_of(month)
    run = passing_run(bundle)
    run["content"]["measured_bps"] = 10**6
    assert (
        f"run {run['id']} (throughput n1>n2): the bundle says pass, the rule gives fail: "
        "measured 1 Mbit/s (0% of contracted), below 95 Gbit/s"
    ) in verified(bundle)


def test_contracted_bandwidth_times_ten_makes_the_passes_fail(month):
    bundle = bundle_of(month)
    bundle["terms"][0]["contracted_bandwidth_gbps"] = "1000"
    run = passing_run(bundle)
    assert (
        f"run {run['id']} (throughput n1>n2): the bundle says pass, the rule gives fail: "
        "measured 98 Gbit/s (9.8% of contracted), below 950 Gbit/s"
    ) in verified(bundle)


def test_a_threshold_raised_to_99_99_percent_makes_98_gbit_fail(month):
    bundle = bundle_of(month)
    bundle["terms"][0]["sla_threshold_percent"] = "99.99"
    run = passing_run(bundle)
    assert (
        f"run {run['id']} (throughput n1>n2): the bundle says pass, the rule gives fail: "
        "measured 98 Gbit/s (98% of contracted), below 100 Gbit/s"
    ) in verified(bundle)


def test_a_verdict_without_its_figure_is_named(month):
    bundle = bundle_of(month)
    run = passing_run(bundle)
    run["content"]["measured_bps"] = None
    assert (
        f"run {run['id']} (throughput n1>n2): the bundle says pass, but the run carries no "
        "measured throughput to judge"
    ) in verified(bundle)


def test_a_link_check_with_a_port_down_cannot_say_pass(month):
    bundle = bundle_of(month)
    run = next(r for r in bundle["runs"] if r["content"]["tool"] == "ethtool")
    parsed = json.loads(run["content"]["parsed"])
    parsed["ports"][0]["up"] = False
    run["content"]["parsed"] = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
    assert (
        f"run {run['id']} (link {run['content']['target']}): the bundle says pass, the rule "
        "gives fail: eth0 is down"
    ) in verified(bundle)


# --- raw output -----------------------------------------------------------------------


def test_edited_raw_output_no_longer_hashes_to_the_run(month):
    bundle = bundle_of(month, raw=True)
    run = next(r for r in bundle["runs"] if r["raw_output"].startswith("{"))
    run["raw_output"] = run["raw_output"].replace('"bits_per_second"', '"bits_per_second" ', 1)
    digest = hashlib.sha256(run["raw_output"].encode()).hexdigest()
    assert (
        f"run {run['id']} (throughput n1>n2): its raw output hashes to {digest}, the run "
        f"says {run['content']['raw_sha256']}"
    ) in verified(bundle)


def test_edited_parsed_output_differs_from_the_raw_output_re_parsed(month):
    bundle = bundle_of(month, raw=True)
    run = next(r for r in bundle["runs"] if r["content"]["tool"] == "ethtool")
    forged = run["content"]["parsed"].replace('"link_down_count":0', '"link_down_count":7')
    assert forged != run["content"]["parsed"]
    run["content"]["parsed"] = forged
    mismatches = verified(bundle)
    assert any(
        m.startswith(
            f"run {run['id']} (link {run['content']['target']}): its parsed differs from its "
            "raw output re-parsed: the bundle says {"
        )
        for m in mismatches
    ), mismatches


# --- window and compliance ------------------------------------------------------------


def test_a_null_compliance_on_a_billed_lease_is_named(month):
    bundle = bundle_of(month)
    bundle["compliance"] = None
    assert f"compliance: the bundle says none, but the lease was billed {WINDOW}" in verified(
        bundle
    )


def test_a_null_credit_on_a_billed_lease_is_named(month):
    bundle = bundle_of(month)
    bundle["credit"] = None
    assert f"credit: the bundle says none, but the lease was billed {WINDOW}" in verified(bundle)


def test_a_compliance_window_moved_by_three_days_is_named(month):
    bundle = bundle_of(month)
    bundle["compliance"]["window_start"] = "2026-11-03T16:00:00.000000Z"
    mismatches = verified(bundle)
    assert (
        "compliance window: the bundle says from 2026-11-03T16:00:00.000000Z to "
        f"2026-11-30T16:00:00.000000Z, recomputed {WINDOW}"
    ) in mismatches


# --- invoice lines from first principles ------------------------------------------------


def test_a_duplicated_rent_line_is_named(month):
    bundle = bundle_of(month)
    rent = copy.deepcopy(line(bundle, "node_rent"))
    rent["position"] = 4
    bundle["invoice"]["lines"].append(rent)
    assert (
        "invoice line 4 (node_rent): a duplicate of invoice line 1 (same kind, terms version "
        "and segment)"
    ) in verified(bundle)


def test_doubled_node_seconds_are_named(month):
    bundle = bundle_of(month)
    line(bundle, "node_rent")["detail"]["node_seconds"] = 2 * 5_184_000
    # Two nodes for the whole month: 2 x 2,592,000 s.
    assert (
        "invoice line 1 (node_rent) node-seconds: the bundle says 10368000, recomputed 5184000"
    ) in verified(bundle)


def test_a_line_of_an_unknown_kind_is_named(month):
    bundle = bundle_of(month)
    bonus = copy.deepcopy(line(bundle, "network_fee"))
    bonus.update(kind="bonus", position=4)
    bundle["invoice"]["lines"].append(bonus)
    assert "invoice line 4: unknown kind 'bonus'" in verified(bundle)


def test_a_missing_fee_line_and_forged_totals_are_named(month):
    bundle = bundle_of(month)
    bundle["invoice"]["lines"] = [
        x for x in bundle["invoice"]["lines"] if x["kind"] != "network_fee"
    ]
    bundle["invoice"]["invoice_tax"] = "0.00"
    mismatches = verified(bundle)
    assert (
        "invoice: a network_fee (terms v1, 2026-10-31T16:00:00.000000Z to "
        "2026-11-30T16:00:00.000000Z) line of 6000.00 is due but missing"
    ) in mismatches
    # 90,000.00 - 3,000.00 = 87,000.00; tax 6% = 5,220.00.
    assert (
        "invoice totals: the bundle says subtotal 93000.00, tax 0.00, total 98580.00; its lines "
        "give 87000.00, 5220.00, 92220.00 (tax per rate: 5220.00 on 87000.00 at 6.00%)"
    ) in mismatches


def test_an_assignment_moved_changes_the_node_seconds_recomputed(month):
    bundle = bundle_of(month)
    # One node from 11-11 00:00 Shanghai instead of 11-01: 10 days (864,000 s) less.
    bundle["assignments"][0]["assigned_from"] = "2026-11-10T16:00:00.000000Z"
    mismatches = verified(bundle)
    assert (
        "invoice line 1 (node_rent) node-seconds: the bundle says 5184000, recomputed 4320000"
    ) in mismatches
    # 45,000.00 x 4,320,000 / 2,592,000 = 75,000.00
    assert "invoice line 1 (node_rent) amount: the bundle says 90000.00, recomputed 75000.00" in (
        mismatches
    )


def test_a_void_assignment_is_not_rent(month):
    NodeAssignment.objects.filter(lease=month).update(void=False)
    bundle = bundle_of(month)
    bundle["assignments"][1]["void"] = True
    assert (
        "invoice line 1 (node_rent) node-seconds: the bundle says 5184000, recomputed 2592000"
    ) in verified(bundle)


# --- acceptance -----------------------------------------------------------------------


def test_billing_starts_at_the_acceptance_the_bundle_proves():
    nodes = NodeFactory.create_batch(2)
    lease = make_lease(nodes=nodes, billing_starts_on_acceptance=True)
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    make_run(
        lease,
        trigger="acceptance",
        slot=at("2026-11-05 00:00"),
        finished=at("2026-11-05 00:10"),
        measured_bps=99 * 10**9,
    )
    ingest_all(notify=False)
    bundle = bundle_of(lease)
    assert bundle["billing_window"]["billing_start"] == "2026-11-04T16:10:00.000000Z"
    assert bundle["acceptance_run"]["runs"][0]["content"]["trigger"] == "acceptance"
    assert verified(bundle) == []

    forged = copy.deepcopy(bundle)
    forged["acceptance_run"]["runs"][0]["content"]["verdict"] = "fail"
    mismatches = verified(forged)
    assert (
        "the acceptance attempt in the bundle did not pass: every run of one slot must finish "
        "ok with a pass verdict"
    ) in mismatches
    # No passing acceptance: nothing may be billed this month.
    assert (
        "compliance window: the bundle says from 2026-11-04T16:10:00.000000Z to "
        "2026-11-30T16:00:00.000000Z, recomputed nothing (not billed)"
    ) in mismatches

    earlier = copy.deepcopy(bundle)
    earlier["billing_window"]["billing_start"] = "2026-11-01T16:10:00.000000Z"
    assert (
        "billing start: the bundle says 2026-11-01T16:10:00.000000Z, its acceptance attempt "
        "finished at 2026-11-04T16:10:00.000000Z"
    ) in verified(earlier)


def test_overlapping_segments_are_named(month):
    bundle = bundle_of(month)
    first = line(bundle, "node_rent")
    second = copy.deepcopy(first)
    first["detail"]["segment_end"] = "2026-11-16T16:00:00.000000Z"
    second["detail"]["segment_start"] = "2026-11-14T16:00:00.000000Z"
    second["position"] = 4
    bundle["invoice"]["lines"].append(second)
    assert (
        "invoice lines 1 and 4 (node_rent): their segments overlap (2026-10-31T16:00:00.000000Z "
        "to 2026-11-16T16:00:00.000000Z and 2026-11-14T16:00:00.000000Z to "
        "2026-11-30T16:00:00.000000Z)"
    ) in verified(bundle)


# --- the pure rules the server bills by -------------------------------------------------


def test_the_window_rules_are_the_servers():
    from gpulease_verify import window

    start, end = at("2026-11-01 00:00"), at("2026-12-01 00:00")
    amended = at("2026-11-16 00:00")
    # Before the first version is in force nothing is billed; an amendment cuts.
    assert window.cut(start=start, end=end, effective_from=[at("2026-11-03 00:00"), amended]) == [
        (at("2026-11-03 00:00"), amended),
        (amended, end),
    ]
    # The first passing attempt, at its latest finish; a failed attempt before it is skipped.
    runs = [
        (at("2026-11-02 00:00"), "ok", "fail", at("2026-11-02 00:10")),
        (at("2026-11-03 00:00"), "ok", "pass", at("2026-11-03 00:10")),
        (at("2026-11-03 00:00"), "ok", "none", at("2026-11-03 00:12")),
        (at("2026-11-04 00:00"), "ok", "pass", at("2026-11-04 00:10")),
    ]
    assert window.billing_start(runs) == at("2026-11-03 00:12")
    # An open assignment runs to the lease's end; one outside the segment gives nothing.
    lease_end = at("2026-11-20 00:00")
    assert window.assignment_spans(
        assignments=[(at("2026-11-10 00:00"), None), (at("2026-10-01 00:00"), start)],
        lease_end=lease_end,
        segment=(start, end),
    ) == [(at("2026-11-10 00:00"), lease_end), None]
