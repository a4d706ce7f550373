"""An invoice or credit note line as a person reads it, in the active language.

A line's stored ``description`` is English on purpose: a re-draft must be identical whatever
language it ran in, and the audit bundle hashes what was stored. Pages and documents in
another language compose the text from the line's kind, lease, terms version, billed span
and figures instead, so a Chinese invoice reads Chinese throughout."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.translation import get_language, gettext, gettext_lazy, pgettext

from billing.choices import LineKind
from gpulease_verify.lines import fraction
from leases.choices import BillingMode

UNITS = {
    "node-month": lambda: pgettext("invoice unit", "node-month"),
    "month": lambda: pgettext("invoice unit", "month"),
    "GB": lambda: "GB",
    "Mbps": lambda: "Mbit/s",
    "percent": lambda: "%",
    "adjustment": lambda: pgettext("invoice unit", "item"),
}


def unit_text(unit: str) -> str:
    """An invoice unit in the active language ("Mbps" is written Mbit/s, as everywhere)."""
    label = UNITS.get(unit)
    return label() if label else unit


def _local(value: str | None, zone: str) -> str:
    if not value:
        return ""
    instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M")


def _number(value: Any) -> str:
    text = f"{Decimal(str(value)).normalize():f}"
    return text


def line_text(line: Any) -> str:
    """The description of an invoice line (or a credit note line, through its original
    line) in the active language."""
    if (get_language() or "en").startswith("en"):
        return str(line.description)
    original = getattr(line, "original_line", None)
    if original is not None:
        return gettext("Correction of line %(position)s: %(text)s") % {
            "position": original.position,
            "text": line_text(original),
        }
    detail = line.detail or {}
    zone = detail.get("time_zone") or "Asia/Shanghai"
    reference = line.lease.reference if getattr(line, "lease", None) else ""
    kind = str(LineKind(line.kind).label)
    if line.kind == LineKind.ADJUSTMENT:
        if "dispute" in detail:
            return gettext("Credit for dispute #%(dispute)s on %(lease)s") % {
                "dispute": detail["dispute"],
                "lease": reference,
            }
        adjusted = detail.get("adjusted_kind")
        return gettext(
            "Adjustment for %(period)s: %(kind)s of %(lease)s recomputed from late results: "
            "%(old)s → %(new)s"
        ) % {
            "period": detail.get("adjusted_period", ""),
            "kind": str(LineKind(adjusted).label) if adjusted else kind,
            "lease": reference,
            "old": detail.get("finalised_amount", ""),
            "new": detail.get("recomputed_amount", ""),
        }
    if line.kind == LineKind.SLA_CREDIT:
        # The same facts as the stored English: the base named with its amount, the cap.
        basis = detail.get("credit_base", "")
        text = gettext(
            "%(kind)s, %(lease)s: compliance %(compliance)s%% from %(start)s to %(end)s, "
            "%(percent)s%% of %(base)s %(amount)s"
        ) % {
            "kind": kind,
            "lease": reference,
            "compliance": detail.get("compliance_percent", ""),
            "start": _local(detail.get("window_start"), zone),
            "end": _local(detail.get("window_end"), zone),
            "percent": detail.get("percent_applied", ""),
            "base": CREDIT_BASES.get(basis, basis),
            "amount": detail.get("credit_base_amount", ""),
        }
        if detail.get("capped"):
            text += gettext(" (tier %(tier)s%% capped)") % {"tier": detail.get("tier_percent")}
        repair = detail.get("repair")
        if repair:
            # As billing.invoicing.lines.repair_text words the repair-time objective.
            misses = [row for row in repair.get("incidents", []) if row.get("missed")]
            text += gettext(
                "; repair-time objective %(objective)s min: %(misses)s of %(faults)s fault(s) "
                "over it"
            ) % {
                "objective": repair.get("objective_minutes"),
                "misses": len(misses),
                "faults": len(repair.get("incidents", [])),
            }
            if misses:
                listed = gettext(", ").join(
                    gettext("#%(id)s %(minutes)s min")
                    % {"id": row["id"], "minutes": row["repair_minutes"]}
                    for row in misses
                )
                text += gettext(" (faults over it: %(faults)s)") % {"faults": listed}
            text += gettext(", %(percent)s%% of %(base)s %(amount)s") % {
                "percent": repair.get("percent_applied"),
                "base": CREDIT_BASES.get(basis, basis),
                "amount": detail.get("credit_base_amount", ""),
            }
            if repair.get("capped"):
                text += gettext(" (capped at the whole base)")
        return text
    text = gettext(
        "%(kind)s, %(lease)s (terms v%(version)s), %(start)s to %(end)s: "
        "%(quantity)s %(unit)s at ¥%(price)s"
    ) % {
        "kind": kind,
        "lease": reference,
        "version": detail.get("terms_version", ""),
        "start": _local(detail.get("segment_start"), zone),
        "end": _local(detail.get("segment_end"), zone),
        "quantity": _number(line.quantity),
        "unit": unit_text(line.unit),
        "price": _number(line.unit_price),
    }
    if line.kind == LineKind.NETWORK_FEE and detail.get("contracted_bandwidth_gbps"):
        mode = detail.get("billing_mode", "")
        text += gettext(" (%(bandwidth)s Gbps contracted, %(mode)s)") % {
            "bandwidth": detail["contracted_bandwidth_gbps"],
            "mode": BillingMode(mode).label if mode in BillingMode.values else mode,
        }
    if line.kind == LineKind.USAGE_P95 and detail.get("month_seconds"):
        share = fraction(int(detail.get("segment_seconds", 0)), int(detail["month_seconds"]))
        text += gettext(" for %(share)s month") % {"share": share}
        # As billing.invoicing.lines._p95_rule_note words a 95th that is not the default.
        words = []
        if detail.get("p95_direction", "tx") != "tx":
            words.append(
                gettext("direction %(direction)s") % {"direction": detail["p95_direction"]}
            )
        if detail.get("p95_window", "monthly") != "monthly":
            words.append(
                gettext("daily 95th averaged over %(days)s day(s)") % {"days": detail.get("days")}
            )
        if words:
            text += gettext(" (%(words)s)") % {"words": gettext(", ").join(words)}
    if detail.get("switch_node_slots"):
        source = METERED_FROM.get(detail.get("metered_from", ""), detail.get("metered_from"))
        text += gettext(" (metered from %(source)s)") % {"source": source}
    return text


# The credit base an SLA credit is a percent of (gpulease_verify.credit_base.NAMES).
CREDIT_BASES = {
    "network_fee": gettext_lazy("network fee"),
    "usage": gettext_lazy("usage charge"),
    "contracted_base": gettext_lazy("contracted base fee"),
    "mixed": gettext_lazy("credit base"),
}

# How a usage line was metered (billing.invoicing.lines.metered_from), in words.
METERED_FROM = {
    "switch counters": gettext_lazy("switch counters"),
    "switch counters, host counters where no switch port was read": gettext_lazy(
        "switch counters, host counters where no switch port was read"
    ),
    "host counters": gettext_lazy("host counters"),
}
