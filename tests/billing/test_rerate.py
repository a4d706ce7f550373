"""Re-rating a window under corrected terms (issue 13, item 6): runs judged again as
rejudgement links of the chain, rollups and drafts rebuilt, an issued month's difference
carried as an adjustment onto the next open draft.

The lease: one node from 1 October 2026 (Asia/Shanghai), 45,000.00 rent and 6,000.00
network fee a month, 100 Gbps contracted at a 90% threshold (90 Gbit/s), default tiers
(below 99.5: 10%, below 99: 25%, below 95: 50%), cap 50%.

- October (31 days): 18 hourly samples at 98 Gbit/s and one at 85 on the 5th, one at 85 on
  the 12th: 18/20 = 90.000% -> 50% of 6,000.00 = -3,000.00. Issued.
- November: 9 samples at 98 Gbit/s on the 5th, one at 85 on the 12th: 9/10 = 90.000% ->
  -3,000.00. Drafted.

Then an acknowledged amendment contracts 90 Gbps from 10 October 00:00 (threshold 0.9 x
90 = 81 Gbit/s), and ``rerate`` from the 10th: the two samples at 85 after the 10th pass.
October: 19/20 = 95.000% (not below 95) -> 25% of 6,000.00 = -1,500.00, so the November
draft carries +1,500.00 for October's credit (-3,000.00 -> -1,500.00). Rent and fee split at
the 10th add up to what was billed (13,064.52 + 31,935.48 = 45,000.00; 1,741.94 + 4,258.06
= 6,000.00): no adjustment. November: 10/10 = 100.000% -> no credit; its draft is 45,000.00
+ 6,000.00 + 1,500.00 = 52,500.00 before tax."""

import copy
import json
from datetime import timedelta
from decimal import Decimal as D

import pytest
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from benchmarks.links import link_pending
from benchmarks.models import ProbeRun, Rejudgement
from billing import audit, invoicing, services, sla
from billing.choices import InvoiceStatus, LineKind
from billing.ingest import ingest_all
from billing.rerate import rerate
from billing.rerate_admin import rerate_from_corrected_terms
from gpulease_verify.chain import link_hash
from gpulease_verify.periods import Period
from leases import services as lease_services
from leases.choices import LeaseStatus
from leases.models import LeaseEvent, TermsAmendment
from ledger.chain import chain_head, verify_lease
from tests.factories import (
    NodeFactory,
    StaffFactory,
    amend_acknowledged,
    at,
    make_lease,
    make_run,
)

pytestmark = pytest.mark.django_db

OCTOBER, NOVEMBER = "2026-10", "2026-11"
AFTER_NOVEMBER = at("2026-12-01 02:00")
TENTH = at("2026-10-10 00:00")
GBIT = 10**9


def lease_with_two_months():  # type: ignore[no-untyped-def]
    lease = make_lease(
        nodes=[NodeFactory()], starts_at=at("2026-10-01 00:00"), sla_threshold_percent=D("90")
    )
    lease = lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    for hour in range(18):
        make_run(lease, slot=at("2026-10-05 00:00") + timedelta(hours=hour), measured_bps=98 * GBIT)
    make_run(lease, slot=at("2026-10-05 19:00"), verdict="fail", measured_bps=85 * GBIT)
    make_run(lease, slot=at("2026-10-12 10:00"), verdict="fail", measured_bps=85 * GBIT)
    for hour in range(9):
        make_run(lease, slot=at("2026-11-05 00:00") + timedelta(hours=hour), measured_bps=98 * GBIT)
    make_run(lease, slot=at("2026-11-12 10:00"), verdict="fail", measured_bps=85 * GBIT)
    link_pending(lease_id=lease.pk, now=AFTER_NOVEMBER)
    ingest_all(notify=False)
    return lease


@pytest.fixture
def billed():  # type: ignore[no-untyped-def]
    """October issued, November drafted, both with a -3,000.00 credit."""
    lease = lease_with_two_months()
    october = invoicing.draft_invoice(
        tenant=lease.tenant, period=OCTOBER, now=at("2026-11-01 00:30")
    )
    october = services.issue_invoice(invoice=october, now=at("2026-11-02 09:00"))
    invoicing.draft_invoice(tenant=lease.tenant, period=NOVEMBER, now=AFTER_NOVEMBER)
    return lease


def corrected(lease):  # type: ignore[no-untyped-def]
    return amend_acknowledged(
        lease=lease,
        effective_from=TENTH,
        changes={"contracted_bandwidth_gbps": "90"},
        reason="The contract says 90 Gbps; v1 was typed as 100.",
    )


def compliance(lease, period):  # type: ignore[no-untyped-def]
    start, end = Period.parse(period).bounds(lease.tenant.time_zone)
    return sla.evaluate(lease=lease, start=start, end=end).credit_compliance_percent


def amounts(invoice):  # type: ignore[no-untyped-def]
    return [(line.kind, line.amount) for line in invoice.lines.order_by("position")]


def november(lease):  # type: ignore[no-untyped-def]
    return invoicing.open_invoice(lease.tenant, NOVEMBER)


def test_the_months_as_billed_before_the_correction(billed):
    october = invoicing.open_invoice(billed.tenant, OCTOBER)
    assert october.status == InvoiceStatus.ISSUED
    assert amounts(october) == [
        (LineKind.NODE_RENT, D("45000.00")),
        (LineKind.NETWORK_FEE, D("6000.00")),
        (LineKind.SLA_CREDIT, D("-3000.00")),
    ]
    assert compliance(billed, OCTOBER) == D("90.000")
    assert compliance(billed, NOVEMBER) == D("90.000")
    # An amendment alone changes no verdict: the runs keep counting as judged.
    corrected(billed)
    ingest_all(notify=False)
    assert compliance(billed, OCTOBER) == D("90.000")


def test_rerate_judges_the_window_again_and_carries_the_difference(billed):
    v2 = corrected(billed)
    result = rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)

    # Runs after the 10th: October's one at 85 and November's ten; the 5 October ones are
    # still v1's.
    assert result.runs_rejudged == 11
    assert (result.fail_to_pass, result.pass_to_fail, result.other_changes) == (2, 0, 0)
    assert result.hours_rebuilt == 11
    failing = ProbeRun.objects.get(lease=billed, slot_at=at("2026-10-12 10:00"))
    again = Rejudgement.objects.get(run=failing)
    assert (again.terms, again.verdict) == (v2, "pass")
    assert again.rule == "throughput >= 90% of 90 Gbps contracted (terms v2)"
    assert failing.verdict == "fail"  # the run's own link never changes
    assert verify_lease(lease_id=billed.pk) == []
    assert result.chain_links == (again.chain_index, again.chain_index + 10)

    assert compliance(billed, OCTOBER) == D("95.000")
    assert compliance(billed, NOVEMBER) == D("100.000")
    october = invoicing.open_invoice(billed.tenant, OCTOBER)
    assert amounts(october)[-1] == (LineKind.SLA_CREDIT, D("-3000.00"))  # issued: unchanged
    draft = november(billed)
    assert [d.pk for d in result.drafts] == [draft.pk]
    assert amounts(draft) == [
        (LineKind.NODE_RENT, D("45000.00")),
        (LineKind.NETWORK_FEE, D("6000.00")),
        (LineKind.ADJUSTMENT, D("1500.00")),
    ]
    adjustment = draft.lines.get(kind=LineKind.ADJUSTMENT)
    assert adjustment.detail["adjusted_kind"] == "sla_credit"
    assert (adjustment.detail["finalised_amount"], adjustment.detail["recomputed_amount"]) == (
        "-3000.00",
        "-1500.00",
    )
    assert draft.subtotal == D("52500.00")
    assert result.adjustments == [
        {
            "invoice": draft.pk,
            "period": NOVEMBER,
            "adjusted_invoice": october.number,
            "adjusted_period": OCTOBER,
            "kind": "sla_credit",
            "amount": "1500.00",
        }
    ]
    event = billed.events.get(action=LeaseEvent.Action.RERATED)
    assert event.detail["runs_rejudged"] == 11
    assert event.detail["verdicts_changed"] == {"pass_to_fail": 0, "fail_to_pass": 2, "other": 0}


def test_rerating_twice_changes_nothing(billed):
    corrected(billed)
    rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)
    before = (
        Rejudgement.objects.count(),
        amounts(november(billed)),
        chain_head(lease_id=billed.pk),
    )
    again = rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)
    assert (again.runs_rejudged, again.hours_rebuilt, again.drafts) == (0, 0, [])
    after = (
        Rejudgement.objects.count(),
        amounts(november(billed)),
        chain_head(lease_id=billed.pk),
    )
    assert after == before
    assert billed.events.filter(action=LeaseEvent.Action.RERATED).count() == 1


def test_an_unacknowledged_amendment_makes_rerate_refuse(billed):
    pending = lease_services.propose_retroactive_amendment(
        lease=billed,
        effective_from=TENTH,
        changes={"contracted_bandwidth_gbps": "90"},
        reason="The contract says 90 Gbps.",
    )
    with pytest.raises(ValidationError) as refused:
        rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)
    assert refused.value.messages == [
        f"The amendment #{pending.pk} of lease {billed.reference}, effective "
        "2026-10-09T16:00:00.000000Z, waits for a tenant admin's acknowledgement; re-rate "
        "once it is acknowledged."
    ]
    assert Rejudgement.objects.count() == 0
    assert compliance(billed, OCTOBER) == D("90.000")


def test_a_retroactive_version_without_an_admin_acknowledgement_is_refused(billed):
    v2 = corrected(billed)
    type(v2).objects.filter(pk=v2.pk).update(acknowledged_by_role="viewer")
    with pytest.raises(ValidationError, match="no tenant admin acknowledged it"):
        rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)


def test_an_empty_or_future_window_is_refused(billed):
    with pytest.raises(ValidationError, match="it must start before it ends"):
        rerate(billed, TENTH, TENTH, now=AFTER_NOVEMBER)
    with pytest.raises(ValidationError, match="in the future"):
        rerate(
            billed,
            AFTER_NOVEMBER + timedelta(days=1),
            AFTER_NOVEMBER + timedelta(days=2),
            now=AFTER_NOVEMBER,
        )


# --- the audit bundle -----------------------------------------------------------------


def signed_november(lease):  # type: ignore[no-untyped-def]
    return audit.sign_bundle(audit.build_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER))


def check(doc):  # type: ignore[no-untyped-def]
    return audit.verify_report(doc, audit.published_key_info()["public_key"])


def test_the_rerated_month_verifies_with_its_rejudgements(billed):
    corrected(billed)
    rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)
    doc = signed_november(billed)
    bundle = doc["bundle"]
    assert len(bundle["rejudgements"]) == 10
    failing = next(r for r in bundle["runs"] if r["content"]["measured_bps"] == 85 * GBIT)
    assert failing["content"]["verdict"] == "fail"
    assert failing["sla"]["outcome"] == "passed"  # by its rejudgement
    assert bundle["compliance"]["by_kind"]["throughput"]["compliance_percent"] == "100.000"
    mismatches, notes = check(doc)
    assert mismatches == []
    assert "rejudgements: 10 checked against the terms in force" in notes


def rehash(entry):  # type: ignore[no-untyped-def]
    entry["rejudgement_hash"] = link_hash(entry["content"], entry["prev_hash"])


def test_a_forged_rejudgement_verdict_is_caught(billed):
    corrected(billed)
    rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)
    bundle = copy.deepcopy(signed_november(billed)["bundle"])
    forged = next(e for e in bundle["rejudgements"] if e["content"]["verdict"] == "pass")
    forged["content"]["verdict"] = "fail"
    rehash(forged)  # as an insider would, so the hash alone does not tell
    mismatches, _notes = check(audit.sign_bundle(bundle))
    run = next(r for r in bundle["runs"] if r["run_hash"] == forged["content"]["run_hash"])
    assert (
        f"rejudgement {forged['id']} (chain link {forged['chain_index']}) of run {run['id']} "
        f"(throughput n1>n2): the bundle's verdict is 'fail', terms v2 give 'pass'"
    ) in mismatches


def test_a_rejudgement_under_terms_not_in_force_is_caught(billed):
    corrected(billed)
    rerate(billed, TENTH, AFTER_NOVEMBER, now=AFTER_NOVEMBER)
    bundle = copy.deepcopy(signed_november(billed)["bundle"])
    forged = bundle["rejudgements"][0]
    v1 = next(t for t in bundle["terms"] if t["version"] == 1)
    forged["content"].update(terms_version=1, terms_hash=v1["terms_hash"])
    rehash(forged)
    mismatches, _notes = check(audit.sign_bundle(bundle))
    assert any(
        m.endswith(
            "names terms v1, but the version in force at the run's slot "
            f"({bundle['runs'][0]['content']['slot_at']}) was v2"
        )
        for m in mismatches
    ), mismatches


# --- the command ----------------------------------------------------------------------


def test_the_command_prints_the_summary_as_json(billed, capsys):
    corrected(billed)
    call_command("rerate", "--lease", billed.reference, "--from", "2026-10-10", "--json")
    summary = json.loads(capsys.readouterr().out)
    assert {k: summary[k] for k in ("lease", "time_zone", "start", "runs_rejudged")} == {
        "lease": billed.reference,
        "time_zone": "Asia/Shanghai",
        "start": "2026-10-09T16:00:00.000000Z",
        "runs_rejudged": 11,
    }
    assert summary["verdicts_changed"] == {"pass_to_fail": 0, "fail_to_pass": 2, "other": 0}
    assert summary["hours_rebuilt"] == 11
    assert [d["period"] for d in summary["drafts_rebuilt"]] == [NOVEMBER]
    assert [(a["adjusted_period"], a["kind"], a["amount"]) for a in summary["adjustments"]] == [
        (OCTOBER, "sla_credit", "1500.00")
    ]
    call_command("rerate", "--lease", billed.reference, "--from", "2026-10-10")
    assert "Nothing to re-rate" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--lease", "NOPE", "--from", "2026-10-10"], "no lease with reference 'NOPE'"),
        (["--from", "10/10/2026"], "--from must be a date, YYYY-MM-DD, not '10/10/2026'."),
        (["--from", "2026-10-10", "--to", "2026-10-10"], "The window to re-rate is empty"),
    ],
)
def test_the_command_refuses_bad_input(billed, arguments, message):  # type: ignore[no-untyped-def]
    if "--lease" not in arguments:
        arguments = ["--lease", billed.reference, *arguments]
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(".", r"\.")):
        call_command("rerate", *arguments)


# --- the admin action (wired on the terms amendment admin) ----------------------------


class _Admin:
    def __init__(self) -> None:
        self.said: list[tuple[int, str]] = []

    def message_user(self, request, message, level):  # type: ignore[no-untyped-def]
        self.said.append((level, str(message)))


def test_the_admin_action_rerates_from_an_acknowledged_amendment(billed):
    v2 = corrected(billed)
    request = RequestFactory().post("/")
    request.user = StaffFactory()
    admin = _Admin()
    rerate_from_corrected_terms(admin, request, TermsAmendment.objects.filter(terms=v2))
    assert admin.said == [
        (
            messages.SUCCESS,
            f"Lease {billed.reference} re-rated under terms v2: 11 run(s) judged again, "
            "2 fail -> pass, 0 pass -> fail, 1 draft(s) rebuilt.",
        )
    ]
    event = billed.events.get(action=LeaseEvent.Action.RERATED)
    assert event.actor == request.user
    pending = lease_services.propose_retroactive_amendment(
        lease=billed,
        effective_from=at("2026-11-20 00:00"),
        changes={"credit_cap_percent": "40"},
        reason="Lower cap.",
    )
    admin = _Admin()
    rerate_from_corrected_terms(admin, request, TermsAmendment.objects.filter(pk=pending.pk))
    assert admin.said == [
        (
            messages.ERROR,
            f"The amendment of lease {billed.reference} waits for a tenant admin's "
            "acknowledgement; re-rate once it is acknowledged.",
        )
    ]


def test_the_admin_changelist_offers_the_action_and_runs_it(billed, client):
    """Through the real admin: the terms amendment changelist's action re-rates."""
    v2 = corrected(billed)
    amendment = TermsAmendment.objects.get(terms=v2)
    client.force_login(StaffFactory())
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    page = client.get("/admin/leases/termsamendment/")
    assert b"rerate_from_corrected_terms" in page.content
    response = client.post(
        "/admin/leases/termsamendment/",
        {"action": "rerate_from_corrected_terms", "_selected_action": [amendment.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert f"Lease {billed.reference} re-rated under terms v2" in response.content.decode()
    assert billed.events.filter(action=LeaseEvent.Action.RERATED).count() == 1
