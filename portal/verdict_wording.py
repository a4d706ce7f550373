"""A customer's measurement's verdict in the page's language.

The verdict itself is ``gpulease_verify.verdicts``' (stored on the evidence with its English
rule and reason, which the API and the audit bundle carry unchanged). Here the same rule and
reason are worded again, from the figures stored with the verdict, through gettext: in
English the words are exactly the stored ones (a test holds every kind to that), so a
translation can never say something the verdict did not. Evidence this does not know how
to word keeps its stored English.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.utils.translation import gettext as _

from benchmarks.recording import terms_view
from billing.models import Evidence, EvidenceTool
from gpulease_verify.units import format_bps, one_decimal, plain
from gpulease_verify.verdicts import GIGA, TermsView, Verdict


@dataclass(frozen=True)
class Wording:
    rule: str
    reason: str


def _throughput(measured_bps: int, passed: bool, terms: TermsView) -> Wording:
    threshold = terms.threshold_bps
    rule = _(
        "throughput >= %(percent)s%% of %(contracted)s Gbps contracted (terms v%(version)s)"
    ) % {
        "percent": plain(terms.threshold_percent),
        "contracted": plain(terms.contracted_gbps),
        "version": terms.version,
    }
    if passed:
        reason = _("measured %(measured)s, at or above %(threshold)s") % {
            "measured": format_bps(measured_bps),
            "threshold": format_bps(threshold),
        }
        return Wording(rule, reason)
    share = Decimal(str(measured_bps)) / (terms.contracted_gbps * GIGA) * 100
    reason = _("measured %(measured)s (%(share)s%% of contracted), below %(threshold)s") % {
        "measured": format_bps(measured_bps),
        "share": plain(one_decimal(share)),
        "threshold": format_bps(threshold),
    }
    return Wording(rule, reason)


def _latency(measured_us: float, verdict: str, terms: TermsView) -> Wording:
    measured = f"{measured_us:.1f}"
    if terms.latency_ceiling_us is None or verdict == Verdict.NONE:
        return Wording(
            _("no latency ceiling in the contract"),
            _("measured %(measured)s µs") % {"measured": measured},
        )
    rule = _("latency <= %(ceiling)s µs (terms v%(version)s)") % {
        "ceiling": plain(terms.latency_ceiling_us),
        "version": terms.version,
    }
    if verdict == Verdict.PASS:
        reason = _("measured %(measured)s µs, within the ceiling")
    else:
        reason = _("measured %(measured)s µs, above the ceiling")
    return Wording(rule, reason % {"measured": measured})


def _collective(busbw_bps: float, verdict: str, terms: TermsView) -> Wording:
    if terms.busbw_floor_gbps is None or verdict == Verdict.NONE:
        return Wording(
            _("no bus bandwidth floor in the contract"),
            _("bus bandwidth %(busbw)s") % {"busbw": format_bps(busbw_bps)},
        )
    rule = _("NCCL bus bandwidth >= %(floor)s Gbps (terms v%(version)s)") % {
        "floor": plain(terms.busbw_floor_gbps),
        "version": terms.version,
    }
    if verdict == Verdict.PASS:
        reason = _("bus bandwidth %(busbw)s, at or above %(floor)s")
    else:
        reason = _("bus bandwidth %(busbw)s, below %(floor)s")
    values = {"busbw": format_bps(busbw_bps), "floor": format_bps(terms.busbw_floor_gbps * GIGA)}
    return Wording(rule, reason % values)


def _busbw(parsed: dict) -> float | None:  # type: ignore[type-arg]
    # As gpulease_verify.interpret judges nccl-tests: the average, else the peak.
    for key in ("avg_busbw_bps", "peak_busbw_bps"):
        if isinstance(parsed.get(key), int | float):
            return float(parsed[key])
    return None


def wording(evidence: Evidence) -> Wording:
    """The evidence's rule and reason in the active language."""
    stored = Wording(evidence.rule, evidence.verdict_reason)
    terms = terms_view(evidence.terms)
    if evidence.tool == EvidenceTool.NCCL_TESTS:
        busbw = _busbw(evidence.parsed if isinstance(evidence.parsed, dict) else {})
        return stored if busbw is None else _collective(busbw, evidence.verdict, terms)
    if evidence.measured_bps is not None:
        return _throughput(evidence.measured_bps, evidence.verdict == Verdict.PASS, terms)
    if evidence.latency_us is not None:
        return _latency(evidence.latency_us, evidence.verdict, terms)
    return stored
