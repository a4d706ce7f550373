"""The tampering suite: one month of a real lease (runs through ingest into the invoice),
then forgeries of three kinds, each of which the verifier must name.

1. A bundle edited after it was signed: the signature fails.
2. A bundle edited and re-signed with the provider's own key, as a server signs whatever
   its database says (where a forgery touches hashed content, the whole chain is re-hashed
   as an insider would, so the finer checks must catch it).
3. Insider edits and deletions in the database, then a fresh bundle from the server.

Every case asserts the verifier's sentence."""

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from benchmarks.links import link_pending
from benchmarks.models import ProbeRun, Rejudgement
from billing import audit, checkpoints
from billing.models import HourlyRollup
from billing.rerate import rerate
from gpulease_verify.canonical import StrictJSONError, strict_loads
from gpulease_verify.chain import link_hash
from gpulease_verify.terms import terms_content
from gpulease_verify.trust import NoTrustedKey
from leases.links import link_terms
from leases.models import LeaseTerms, NodeAssignment
from tests.billing.test_audit import AFTER_NOVEMBER, NOVEMBER, month, signed  # noqa: F401
from tests.factories import amend_acknowledged, at, make_run

pytestmark = pytest.mark.django_db

Bundle = dict[str, Any]


def published() -> str:
    return audit.published_key_info()["public_key_pem"]


def mismatches(doc: dict[str, Any], **trust: Any) -> list[str]:
    return audit.verify(doc, trust.pop("key", published()), **trust)


def relink(bundle: Bundle) -> Bundle:
    """Re-hash every link of the bundle in order, as an insider rewriting the chain would
    (runs name the new hashes of their terms versions)."""
    links = [("terms", t) for t in bundle["terms"] if t.get("chain_index") is not None]
    links += [("run", r) for r in bundle["runs"]]
    links.sort(key=lambda link: link[1]["chain_index"])
    terms_hashes: dict[int, str] = {}
    prev = None
    for kind, entry in links:
        if prev is not None:
            entry["prev_hash"] = prev
        if kind == "terms":
            entry["content"] = terms_content(entry)
            entry["terms_hash"] = prev = link_hash(entry["content"], entry["prev_hash"])
            terms_hashes[int(entry["version"])] = prev
        else:
            content = entry["content"]
            if "terms_hash" in content and content.get("terms_version") in terms_hashes:
                content["terms_hash"] = terms_hashes[content["terms_version"]]
            entry["run_hash"] = prev = link_hash(content, entry["prev_hash"])
    by_index = {entry["chain_index"]: entry for kind, entry in links if kind == "run"}
    for run in (bundle.get("acceptance_run") or {}).get("runs", []):
        source = by_index.get(run["chain_index"])
        if source is not None:
            run.update(copy.deepcopy({k: source[k] for k in ("prev_hash", "run_hash", "content")}))
    head = bundle["chain"].get("head")
    if head and links and head["index"] == links[-1][1]["chain_index"]:
        head["hash"] = prev
    return bundle


def first(bundle: Bundle, **where: Any) -> dict[str, Any]:
    return next(
        run
        for run in bundle["runs"]
        if all(run["content"].get(key) == value for key, value in where.items())
    )


def line(bundle: Bundle, kind: str) -> dict[str, Any]:
    return next(item for item in bundle["invoice"]["lines"] if item["kind"] == kind)


def shift(text: str, **delta: float) -> str:
    instant = datetime.fromisoformat(text.replace("Z", "+00:00")) + timedelta(**delta)
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- forgeries of the bundle (classes 1 and 2) ------------------------------------------


def pass_on_one_megabit(b: Bundle) -> None:
    first(b, kind="throughput", verdict="pass")["content"]["measured_bps"] = 10**6
    relink(b)


def contract_times_ten(b: Bundle) -> None:
    b["terms"][0]["contracted_bandwidth_gbps"] = str(
        D(b["terms"][0]["contracted_bandwidth_gbps"]) * 10
    )
    relink(b)


def threshold_raised(b: Bundle) -> None:
    b["terms"][0]["sla_threshold_percent"] = "99.99"
    relink(b)


def verdict_flipped(b: Bundle) -> None:
    first(b, kind="throughput", verdict="fail")["content"]["verdict"] = "pass"


def rent_line_duplicated(b: Bundle) -> None:
    rent = copy.deepcopy(line(b, "node_rent"))
    rent["position"] = 99
    b["invoice"]["lines"].append(rent)


def node_seconds_doubled(b: Bundle) -> None:
    rent = line(b, "node_rent")
    rent["detail"]["node_seconds"] *= 2


def unknown_kind(b: Bundle) -> None:
    bonus = copy.deepcopy(line(b, "network_fee"))
    bonus.update(kind="bonus", position=98)
    b["invoice"]["lines"].append(bonus)


def compliance_null(b: Bundle) -> None:
    b["compliance"] = None


def credit_null(b: Bundle) -> None:
    b["credit"] = None


def window_moved(b: Bundle) -> None:
    b["compliance"]["window_start"] = shift(b["compliance"]["window_start"], days=3)


def credit_amount_halved(b: Bundle) -> None:
    b["credit"]["amount"] = str(D(b["credit"]["amount"]) / 2)


def rollup_edited(b: Bundle) -> None:
    row = next(r for r in b["rollups"] if r["kind"] == "throughput" and r["failed"])
    row.update(failed=0, passed=row["passed"] + 1)


def totals_edited(b: Bundle) -> None:
    b["invoice"]["invoice_total"] = str(D(b["invoice"]["invoice_total"]) - 100)


def assignment_moved(b: Bundle) -> None:
    b["assignments"][0]["assigned_from"] = shift(b["assignments"][0]["assigned_from"], days=5)


def last_runs_dropped(b: Bundle) -> None:
    del b["runs"][-2:]
    b["chain"]["last_index"] = b["runs"][-1]["chain_index"]


def middle_run_dropped(b: Bundle) -> None:
    del b["runs"][len(b["runs"]) // 2]


def rent_price_raised(b: Bundle) -> None:
    rent = line(b, "node_rent")
    rent["amount"] = str(D(rent["amount"]) + D("0.01"))


def sample_outcome_changed(b: Bundle) -> None:
    run = next(r for r in b["runs"] if (r["sla"] or {}).get("outcome") == "failed")
    run["sla"]["outcome"] = "passed"


def unacknowledged_amendment(b: Bundle) -> None:
    """v2, effective one second before the month's end with the credit cap at 0, created
    after the fact, never acknowledged: appended to the chain and re-signed."""
    v2 = copy.deepcopy(b["terms"][0])
    last = max(run["chain_index"] for run in b["runs"])
    v2.update(
        version=2,
        effective_from=shift(b["period"]["end"], seconds=-1),
        created_at=shift(b["period"]["end"], days=2),
        credit_cap_percent="0.00",
        acknowledgement=None,
        amendment_reason="cap",
        chain_index=last + 1,
        prev_hash="",
    )
    b["terms"].append(v2)
    relink(b)


FORGERIES: list[tuple[str, Callable[[Bundle], None], str]] = [
    ("pass on 1 Mbit/s", pass_on_one_megabit, "the bundle says pass, the rule gives fail"),
    ("contract x10", contract_times_ten, "the rule gives fail"),
    ("threshold 99.99%", threshold_raised, "the rule gives fail"),
    ("verdict flipped", verdict_flipped, "does not match its content"),
    ("rent line duplicated", rent_line_duplicated, "a duplicate of invoice line"),
    ("node-seconds doubled", node_seconds_doubled, "node-seconds"),
    ("unknown line kind", unknown_kind, "unknown kind 'bonus'"),
    ("compliance null", compliance_null, "compliance: the bundle says none"),
    ("credit null", credit_null, "credit: the bundle says none"),
    ("window moved 3 days", window_moved, "compliance window"),
    ("credit halved", credit_amount_halved, "credit amount"),
    ("rollup edited", rollup_edited, "hourly rollup"),
    ("invoice total edited", totals_edited, "invoice totals"),
    ("assignment moved", assignment_moved, "node-seconds"),
    ("last runs dropped", last_runs_dropped, "passed samples: the bundle says"),
    ("middle run dropped", middle_run_dropped, "link(s) are missing"),
    ("rent amount +0.01", rent_price_raised, "invoice line 1 (node_rent) amount"),
    ("sample outcome changed", sample_outcome_changed, "recomputed failed"),
    ("retroactive amendment", unacknowledged_amendment, "no tenant admin acknowledged it"),
]


@pytest.mark.parametrize(("name", "forge", "said"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_an_edited_bundle_fails_its_signature(month, name, forge, said):  # noqa: F811
    doc = signed(month)
    forge(doc["bundle"])
    found = mismatches(doc)
    assert any("the signature does not verify" in m for m in found), "\n".join(found)


@pytest.mark.parametrize(("name", "forge", "said"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_an_edited_bundle_re_signed_with_the_providers_key_is_caught(month, name, forge, said):  # noqa: F811
    doc = signed(month)
    assert mismatches(doc) == []
    bundle = copy.deepcopy(doc["bundle"])
    forge(bundle)
    found = mismatches(audit.sign_bundle(bundle))
    assert not any("signature" in m for m in found), found
    assert any(said in m for m in found), "\n".join(found)


def test_a_strangers_key_and_no_key_and_a_duplicated_key_are_refused(month):  # noqa: F811
    doc = signed(month)
    stranger = audit.sign_bundle(copy.deepcopy(doc["bundle"]), Ed25519PrivateKey.generate())
    assert any("signature" in m for m in mismatches(stranger))
    with pytest.raises(NoTrustedKey):
        audit.verify(stranger)
    text = json.dumps(doc)
    amount = line(doc["bundle"], "network_fee")["amount"]
    forged = text.replace(f'"amount": "{amount}"', f'"amount": "1.00", "amount": "{amount}"', 1)
    assert forged != text
    with pytest.raises(StrictJSONError, match='repeats the key "amount"'):
        strict_loads(forged)


# --- insider edits in the database, then a fresh bundle (class 3) ------------------------


def fresh(lease) -> list[str]:  # type: ignore[no-untyped-def]
    return mismatches(signed(lease))


def test_db_terms_maintenance_widened(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    LeaseTerms.objects.filter(lease=month, version=1).update(
        maintenance_windows=[{"weekday": day, "start": "00:00", "end": "24:00"} for day in range(7)]
    )
    found = fresh(month)
    assert any("terms v1" in m and "does not match" in m for m in found), "\n".join(found)


def test_db_terms_cap_lowered(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    LeaseTerms.objects.filter(lease=month, version=1).update(credit_cap_percent=D("0"))
    found = fresh(month)
    assert any("terms v1" in m for m in found), "\n".join(found)


def test_db_run_verdict_edited(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    run = ProbeRun.objects.filter(lease=month, verdict="fail").first()
    ProbeRun.objects.filter(pk=run.pk).update(verdict="pass")
    found = fresh(month)
    assert any(f"(run {run.pk})" in m and "does not match its content" in m for m in found), (
        "\n".join(found)
    )


def test_db_run_figure_edited(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    run = ProbeRun.objects.filter(lease=month, verdict="fail", kind="throughput").first()
    ProbeRun.objects.filter(pk=run.pk).update(measured_bps=99 * 10**9)
    found = fresh(month)
    assert any(f"(run {run.pk})" in m for m in found), "\n".join(found)


def test_db_rollup_edited(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    HourlyRollup.objects.filter(lease=month, kind="throughput", failed__gt=0).update(
        failed=0, passed=1
    )
    found = fresh(month)
    assert any("hourly rollup" in m for m in found), "\n".join(found)


def test_db_assignment_moved(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    assignment = NodeAssignment.objects.filter(lease=month).first()
    NodeAssignment.objects.filter(pk=assignment.pk).update(
        assigned_from=assignment.assigned_from + timedelta(days=5)
    )
    found = fresh(month)
    assert any("node-seconds" in m for m in found), "\n".join(found)


def test_db_run_deleted_in_the_middle(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    runs = list(ProbeRun.objects.filter(lease=month).order_by("chain_index"))
    runs[len(runs) // 2].delete()
    found = fresh(month)
    assert any("link(s) are missing" in m for m in found), "\n".join(found)


def test_db_runs_deleted_at_the_end_are_caught_by_the_kept_checkpoint(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    checkpoint, _ = checkpoints.create_checkpoint(lease=month, period=NOVEMBER, now=AFTER_NOVEMBER)
    kept = checkpoint.document()
    last = ProbeRun.objects.filter(lease=month).order_by("-chain_index")[:2]
    ProbeRun.objects.filter(pk__in=[run.pk for run in last]).delete()
    month.checkpoints.all().delete()  # the insider removes the server's copy too
    found = mismatches(signed(month), previous=kept)
    assert any("links were removed" in m for m in found), "\n".join(found)


def test_db_run_deleted_at_the_start_is_caught_by_last_months_checkpoint(month):  # noqa: F811
    """October ended with a run; the tenant kept October's checkpoint. Deleting November's
    first run leaves a bundle whose first link no checkpoint can join to October's."""
    # Setup: the October run is recorded before November's, so unlink those to link in order.
    ProbeRun.objects.filter(lease=month).update(chain_index=None, prev_hash="", run_hash="")
    make_run(month, slot=at("2026-10-31 10:00"), finished=at("2026-10-31 10:01"))
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)
    october, _ = checkpoints.create_checkpoint(
        lease=month, period="2026-10", now=at("2026-11-01 00:01")
    )
    kept = october.document()
    assert kept["checkpoint"]["head"]["index"] == 2  # terms v1, then October's run
    first_run = (
        ProbeRun.objects.filter(lease=month, slot_at__gte=at("2026-10-31 16:00"))
        .order_by("chain_index")
        .first()
    )
    first_run.delete()
    month.checkpoints.all().delete()
    found = mismatches(signed(month), previous=kept)
    assert any("cannot confirm it" in m for m in found), "\n".join(found)


def test_db_chain_rewritten_after_the_checkpoint(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    checkpoint, _ = checkpoints.create_checkpoint(lease=month, period=NOVEMBER, now=AFTER_NOVEMBER)
    kept = checkpoint.document()
    ProbeRun.objects.filter(lease=month, verdict="fail").update(verdict="pass")
    # The insider re-hashes the whole chain and re-signs the server's checkpoint.
    # Setup: the October run is recorded before November's, so unlink those to link in order.
    ProbeRun.objects.filter(lease=month).update(chain_index=None, prev_hash="", run_hash="")
    LeaseTerms.objects.filter(lease=month).update(chain_index=None, prev_hash="", terms_hash="")
    for version in LeaseTerms.objects.filter(lease=month).order_by("version"):
        link_terms(version)
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)
    month.checkpoints.all().delete()
    checkpoints.create_checkpoint(lease=month, period=NOVEMBER, now=AFTER_NOVEMBER)
    found = mismatches(signed(month), previous=kept)
    assert any("rewritten" in m or "has hash" in m for m in found), "\n".join(found)


def test_db_retroactive_amendment_slipped_in(month):  # noqa: F811
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)  # recorded runs are linked
    v1 = LeaseTerms.objects.get(lease=month, version=1)
    v2 = copy.copy(v1)
    v2.pk = None
    v2.version = 2
    v2.effective_from = at("2026-11-30 15:59:59")
    v2.credit_cap_percent = D("0")
    v2.chain_index = None
    v2.prev_hash = v2.terms_hash = ""
    v2.save()
    link_terms(v2)
    found = fresh(month)
    assert any("no tenant admin acknowledged it" in m for m in found), "\n".join(found)


# --- rejudgements: a month re-rated under corrected terms (issue 13, item 6) -------------


@pytest.fixture
def rerated(month):  # type: ignore[no-untyped-def]  # noqa: F811
    """The month re-rated from 2 November under an acknowledged amendment that contracts
    40 Gbps (threshold 95% x 40 = 38 Gbit/s): the sample at 40 Gbit/s passes by its
    rejudgement; the draft is rebuilt."""
    amend_acknowledged(
        lease=month,
        effective_from=at("2026-11-02 00:00"),
        changes={"contracted_bandwidth_gbps": "40"},
        reason="The contract says 40 Gbps.",
    )
    rerate(month, at("2026-11-02 00:00"), AFTER_NOVEMBER, now=AFTER_NOVEMBER)
    return month


def _rejudged_at_40(b: Bundle) -> dict[str, Any]:
    run = first(b, kind="throughput", measured_bps=40 * 10**9)
    return next(e for e in b["rejudgements"] if e["content"]["run_hash"] == run["run_hash"])


def rejudgement_verdict_forged(b: Bundle) -> None:
    entry = _rejudged_at_40(b)
    entry["content"]["verdict"] = "fail"
    entry["rejudgement_hash"] = link_hash(entry["content"], entry["prev_hash"])


def rejudgement_dropped(b: Bundle) -> None:
    b["rejudgements"].remove(_rejudged_at_40(b))


REJUDGEMENT_FORGERIES: list[tuple[str, Callable[[Bundle], None], str]] = [
    ("rejudgement verdict forged", rejudgement_verdict_forged, "terms v2 give 'pass'"),
    ("rejudgement dropped", rejudgement_dropped, "the bundle says passed, recomputed failed"),
]


@pytest.mark.parametrize(
    ("name", "forge", "said"), REJUDGEMENT_FORGERIES, ids=[f[0] for f in REJUDGEMENT_FORGERIES]
)
def test_a_forged_rejudgement_re_signed_is_caught(rerated, name, forge, said):  # type: ignore[no-untyped-def]
    doc = signed(rerated)
    assert mismatches(doc) == []
    assert len(doc["bundle"]["rejudgements"]) == 16  # 10 throughput and 6 link samples
    bundle = copy.deepcopy(doc["bundle"])
    forge(bundle)
    found = mismatches(audit.sign_bundle(bundle))
    assert any(said in m for m in found), "\n".join(found)


def test_db_rejudgement_verdict_edited(rerated):  # type: ignore[no-untyped-def]
    run = ProbeRun.objects.get(lease=rerated, measured_bps=40 * 10**9)
    edited = Rejudgement.objects.get(run=run)
    Rejudgement.objects.filter(pk=edited.pk).update(verdict="fail")
    found = fresh(rerated)
    assert any(
        f"(rejudgement {edited.pk})" in m
        and m.endswith("the rejudgement was changed after it was recorded")
        for m in found
    ), "\n".join(found)


def test_db_rejudgement_deleted(rerated):  # type: ignore[no-untyped-def]
    run = ProbeRun.objects.get(lease=rerated, measured_bps=40 * 10**9)
    Rejudgement.objects.filter(run=run).delete()
    found = fresh(rerated)
    assert any("hourly rollup" in m for m in found), "\n".join(found)
