"""Confirm before you count (issue 34, item 1): a scheduled throughput sample whose tool
figure failed is measured again at once; the sample fails only when the confirmation
fails too (``gpulease_verify.samples.confirmed_verdict``). Rollups, incidents, the audit
bundle and the standalone verifier all count it by that rule, and an insider who invents
or back-dates a confirmation is named.

The lease: 100 Gbps at 95 %, hourly throughput samples of the pair n1>n2 on 2 November
2026 (Asia/Shanghai); a failing sample measured 80 Gbit/s, a passing one 97 Gbit/s."""

from datetime import timedelta
from decimal import Decimal

import pytest

from benchmarks.models import ProbeRun
from billing import audit, sla
from billing.ingest import ingest_all
from billing.models import HourlyRollup
from gpulease_verify.samples import confirmed_verdict
from incidents.models import Incident
from leases import services
from leases.choices import LeaseStatus
from tests.factories import NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
AFTER_NOVEMBER = at("2026-12-01 02:00")
FAIL_BPS, PASS_BPS = 80 * 10**9, 97 * 10**9


@pytest.mark.parametrize(
    ("first", "confirmation", "counted"),
    [
        ("pass", None, "pass"),
        ("fail", None, "fail"),  # no confirmation (terms without it, or it never ran)
        ("fail", "pass", "pass"),  # a one-off stall: cleared
        ("fail", "fail", "fail"),  # short twice: a breach
        ("fail", "none", "fail"),  # it measured nothing, or the switch disputed it
        ("none", "pass", "none"),  # a disputed sample stays disputed
        ("pass", "fail", "pass"),  # a passing run of the group re-run alongside
    ],
)
def test_the_rule(first, confirmation, counted):
    assert confirmed_verdict(first, confirmation) == counted


def active_lease(**terms):  # type: ignore[no-untyped-def]
    lease = make_lease(nodes=NodeFactory.create_batch(2), incident_after_violations=3, **terms)
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


@pytest.fixture
def lease():  # type: ignore[no-untyped-def]
    return active_lease()


def sample(lease, hour: int, *, first: str, again: str | None = None, state: str = "ok"):  # type: ignore[no-untyped-def]
    """A scheduled sample at 10:00 + ``hour`` (finished 20 s into its slot) and, with
    ``again``, its confirmation: started 25 s and finished 40 s into the slot."""
    slot = at("2026-11-02 10:00") + timedelta(hours=hour)
    run = make_run(
        lease, slot=slot, verdict=first, measured_bps=FAIL_BPS if first == "fail" else PASS_BPS
    )
    confirmation = None
    if again is not None:
        confirmation = make_run(
            lease,
            slot=slot,
            trigger="confirmation",
            state=state,
            verdict=again,
            measured_bps=(FAIL_BPS if again == "fail" else PASS_BPS) if state == "ok" else None,
            finished=slot + timedelta(seconds=40),
        )
        ProbeRun.objects.filter(pk=confirmation.pk).update(started_at=slot + timedelta(seconds=25))
    return run, confirmation


def throughput_counts(lease):  # type: ignore[no-untyped-def]
    rollups = HourlyRollup.objects.filter(lease=lease, kind="throughput")
    return tuple(sum(getattr(r, name) for r in rollups) for name in ("passed", "failed", "unknown"))


def bundle_of(lease):  # type: ignore[no-untyped-def]
    return audit.build_bundle(lease=lease, period=NOVEMBER, now=AFTER_NOVEMBER)


def verified(bundle):  # type: ignore[no-untyped-def]
    return audit.verify(audit.sign_bundle(bundle), audit.published_key_info()["public_key"])


def test_a_failure_cleared_by_its_confirmation_counts_as_passed_everywhere(lease):
    sample(lease, 0, first="pass")
    cleared, confirmation = sample(lease, 1, first="fail", again="pass")
    sample(lease, 2, first="fail", again="fail")
    sample(lease, 3, first="fail", again="none", state="timeout")
    ingest_all(notify=False)
    # 10:00 passed; 11:00 cleared; 12:00 short twice; 13:00's confirmation timed out.
    assert throughput_counts(lease) == (2, 2, 0)
    summary = sla.evaluate(lease=lease, start=at("2026-11-02 10:00"), end=at("2026-11-02 14:00"))
    assert summary.throughput.percent == Decimal("50.000")
    # The confirmation is evidence, never a sample of its own: four samples, not seven.
    assert summary.throughput.samples == 4
    bundle = bundle_of(lease)
    entries = {entry["id"]: entry for entry in bundle["runs"]}
    assert entries[cleared.pk]["sla"] == {"counted": True, "outcome": "passed"}
    assert entries[confirmation.pk]["sla"] == {"counted": False, "outcome": None}
    assert entries[confirmation.pk]["content"]["trigger"] == "confirmation"
    assert verified(bundle) == []


def test_failures_cleared_by_confirmations_open_no_incident_and_confirmed_ones_do(lease):
    for hour in range(3):
        sample(lease, hour, first="fail", again="pass")
    ingest_all(notify=False)
    assert not Incident.objects.filter(lease=lease).exists()
    for hour in range(3, 6):
        sample(lease, hour, first="fail", again="fail")
    ingest_all(notify=False)
    incident = Incident.objects.get(lease=lease)
    assert incident.opened_at == at("2026-11-02 13:00")
    assert incident.violations == 3


def test_the_verifier_recounts_a_sample_whose_confirmation_was_dropped_from_the_bundle(lease):
    """The server's stated outcome 'passed' needs the confirmation: a bundle edited to say
    the fail was never confirmed (the confirmation's verdict changed to fail) is named,
    even signed with the provider's key."""
    cleared, confirmation = sample(lease, 1, first="fail", again="pass")
    ingest_all(notify=False)
    bundle = bundle_of(lease)
    entry = next(e for e in bundle["runs"] if e["id"] == confirmation.pk)
    entry["content"]["verdict"] = "fail"
    problems = verified(bundle)
    assert f"run {cleared.pk}: the bundle says passed, recomputed failed" in problems


def test_a_confirmation_under_terms_that_do_not_confirm_is_named():
    """An insider who adds a passing 'confirmation' to a lease whose terms do not confirm
    failures (and lets the server link, count and sign it) turns a failed sample into a
    pass: the verifier names the confirmation and counts the sample as failed."""
    lease = active_lease(confirm_failures=False)
    failed, forged = sample(lease, 1, first="fail", again="pass")
    ingest_all(notify=False)
    bundle = bundle_of(lease)
    terms = next(t for t in bundle["terms"] if t["version"] == 1)
    assert terms["confirm_failures"] is False
    problems = verified(bundle)
    assert (
        f"run {forged.pk} is a confirmation, but terms v1 it was judged by do not confirm "
        "failures" in problems
    )
    assert f"run {failed.pk}: the bundle says passed, recomputed failed" in problems


def test_a_confirmation_that_started_before_its_sample_finished_is_named(lease):
    failed, early = sample(lease, 1, first="fail", again="pass")
    ProbeRun.objects.filter(pk=early.pk).update(
        started_at=failed.finished_at - timedelta(seconds=1)
    )
    ingest_all(notify=False)
    problems = verified(bundle_of(lease))
    assert f"run {early.pk} confirms run {failed.pk}, but did not start after it finished" in (
        problems
    )
    assert f"run {failed.pk}: the bundle says passed, recomputed failed" in problems
