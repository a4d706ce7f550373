"""Verifying a signed audit bundle from the bundle alone: the signature, the hash chain,
the compliance recomputed from the runs, the hourly rollups, the SLA credit and every
invoice line. Reads no database and imports no Django; ``manage.py audit_verify`` and the
``gpulease-verify`` console script both call ``verify_report``."""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gpulease_verify import chain, credit_base
from gpulease_verify import compliance as sla
from gpulease_verify.calculations import (
    billable_mbps,
    bytes_to_gb,
    percentile_95,
    prorate,
    sla_credit,
    traffic_charge,
)
from gpulease_verify.canonical import canonical_json, iso_utc
from gpulease_verify.contract import credit_tiers
from gpulease_verify.keys import ALGORITHM, fingerprint, load_public_key, raw_public
from gpulease_verify.money import to_fen
from gpulease_verify.periods import Period
from gpulease_verify.samples import OUTCOMES, classify_sample, link_slot_outcome

FORMAT = "gpulease-audit-bundle/2"
ZERO = Decimal("0.00")
SLA_CREDIT = "sla_credit"
# Traffic quantities (GB) on invoice lines: six decimals.
QUANTITY = Decimal("0.000001")


def canonical_bytes(bundle: Mapping[str, Any]) -> bytes:
    return canonical_json(bundle).encode("utf-8")


def hour_start(instant: datetime) -> datetime:
    return instant.replace(minute=0, second=0, microsecond=0)


def billed_lines(lines: Iterable[Mapping[str, Any]]) -> list[credit_base.BilledLine]:
    """A bundle's invoice lines as the credit base reads them."""
    return [
        credit_base.BilledLine(
            line["kind"], line["detail"].get("terms_version"), Decimal(line["amount"])
        )
        for line in lines
    ]


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _dec(text: Any) -> Decimal | None:
    if text is None:
        return None
    try:
        return Decimal(str(text))
    except InvalidOperation:
        return None


class _Checker:
    def __init__(self, bundle: Mapping[str, Any]):
        self.b = bundle
        self.mismatches: list[str] = []
        self.notes: list[str] = []

    def bad(self, text: str) -> None:
        self.mismatches.append(text)

    def same(self, what: str, stated: Any, recomputed: Any) -> None:
        a, b = _dec(stated), _dec(recomputed)
        equal = (a == b) if (a is not None and b is not None) else (stated == recomputed)
        if not equal:
            self.bad(f"{what}: the bundle says {stated}, recomputed {recomputed}")

    # --- chain ------------------------------------------------------------------------

    def chain(self) -> None:
        runs = self.b.get("runs", [])
        for problem in chain.verify_chain(runs):
            self.bad(problem)
        reference = self.b["lease"]["reference"]
        for entry in runs:
            if entry["content"].get("lease") != reference:
                self.bad(
                    f"chain link {entry['chain_index']} is a run of lease "
                    f"{entry['content'].get('lease')}, not {reference}"
                )
        meta = self.b.get("chain", {})
        indexes = [entry["chain_index"] for entry in runs]
        if indexes and (meta.get("first_index"), meta.get("last_index")) != (
            min(indexes),
            max(indexes),
        ):
            self.bad(
                f"the chain section names links {meta.get('first_index')}.."
                f"{meta.get('last_index')}, the runs are links {min(indexes)}..{max(indexes)}"
            )
        self.notes.append(f"chain: {len(runs)} link(s) checked")

    # --- compliance -------------------------------------------------------------------

    def terms_by_version(self) -> dict[int, Mapping[str, Any]]:
        return {int(t["version"]): t for t in self.b.get("terms", [])}

    def recompute(self) -> tuple[dict[str, dict[str, Any]], dict[str, int], dict[Any, Any]]:
        """Counts per kind, availability minutes, and per (kind, hour) counts, from runs."""
        compliance = self.b["compliance"]
        zone = self.b["period"]["time_zone"]
        lo, hi = _at(compliance["window_start"]), _at(compliance["window_end"])
        terms = self.terms_by_version()
        kinds: dict[str, dict[str, Any]] = defaultdict(
            lambda: {**dict.fromkeys(OUTCOMES, 0), "measured": 0}
        )
        hours: dict[tuple[str, datetime], dict[str, int]] = defaultdict(
            lambda: {**dict.fromkeys(OUTCOMES, 0), "measured": 0}
        )
        link_slots: dict[datetime, list[str]] = defaultdict(list)
        slot_minutes: dict[datetime, int] = {}
        for entry in self.b.get("runs", []):
            content = entry["content"]
            slot = _at(content["slot_at"])
            counted = content["trigger"] == "schedule" and lo <= hour_start(slot) < hi
            stated = entry.get("sla", {})
            if bool(stated.get("counted")) != counted:
                self.bad(
                    f"run {entry['id']}: the bundle says it is "
                    f"{'' if stated.get('counted') else 'not '}an SLA sample of the window, "
                    f"recomputed {'it is' if counted else 'it is not'}"
                )
            if not counted:
                continue
            version = content.get("terms_version")
            windows = None
            if version is not None:
                if version not in terms:
                    self.bad(
                        f"run {entry['id']} was judged by terms v{version}, "
                        "which the bundle does not contain"
                    )
                else:
                    windows = terms[version]["maintenance_windows"]
            outcome = classify_sample(
                state=content["state"],
                verdict=content["verdict"],
                slot_at=slot,
                maintenance_windows=windows,
                zone=zone,
            )
            if stated.get("outcome") != outcome:
                self.bad(
                    f"run {entry['id']}: the bundle says {stated.get('outcome')}, "
                    f"recomputed {outcome}"
                )
            kind = content["kind"]
            measured = content["state"] == "ok" and bool(content["measured_bps"])
            for bucket in (kinds[kind], hours[(kind, hour_start(slot))]):
                bucket[outcome] += 1
                bucket["measured"] += measured
            if kind == "link":
                link_slots[slot].append(outcome)
                deadline = _at(content["deadline_at"])
                slot_minutes[slot] = int((deadline - slot).total_seconds() // 60)
        minutes = {"available": 0, "unavailable": 0, "unknown": 0}
        per_hour_minutes: dict[datetime, dict[str, int]] = defaultdict(
            lambda: {"available": 0, "unavailable": 0, "unknown": 0}
        )
        for slot, outcomes in link_slots.items():
            given = link_slot_outcome(outcomes)
            if given is not None:
                minutes[given] += slot_minutes[slot]
                per_hour_minutes[hour_start(slot)][given] += slot_minutes[slot]
        for (kind, hour), bucket in hours.items():
            if kind == "link":
                bucket.update(
                    {f"{name}_minutes": value for name, value in per_hour_minutes[hour].items()}
                )
        return kinds, minutes, hours

    def compliance(self) -> Decimal | None:
        stated = self.b.get("compliance")
        if stated is None:
            self.notes.append("compliance: the lease was not billed in this period")
            return None
        kinds, minutes, hours = self.recompute()
        summary = sla.SlaSummary(
            lease_id=0,
            start=_at(stated["window_start"]),
            end=_at(stated["window_end"]),
            by_kind={
                kind: sla.Compliance(**{name: counts[name] for name in (*OUTCOMES, "measured")})
                for kind, counts in kinds.items()
            },
            availability=sla.Availability(
                available_minutes=minutes["available"],
                unavailable_minutes=minutes["unavailable"],
                unknown_minutes=minutes["unknown"],
            ),
        )
        for kind in sorted(set(kinds) | set(stated["by_kind"])):
            figures = summary.kind(kind)
            said = stated["by_kind"].get(kind, {})
            for name in (*OUTCOMES, "measured"):
                self.same(f"{kind} {name} samples", said.get(name, 0), getattr(figures, name))
            self.same(f"{kind} compliance percent", said.get("compliance_percent"), figures.percent)
            self.same(
                f"{kind} measured-only percent",
                said.get("measured_percent"),
                figures.measured_percent,
            )
        said = stated["availability"]
        for name in ("available", "unavailable", "unknown"):
            self.same(f"{name} minutes", said[f"{name}_minutes"], minutes[name])
        self.same("availability percent", said["percent"], summary.availability.percent)
        self.same(
            "credit compliance percent",
            stated["credit_compliance_percent"],
            summary.credit_compliance_percent,
        )
        self.rollups(hours)
        self.notes.append(
            f"compliance: {sum(k['passed'] + k['failed'] + k['unknown'] for k in kinds.values())}"
            f" sample(s) recomputed; credit compliance {summary.credit_compliance_percent}%"
        )
        return summary.credit_compliance_percent

    def rollups(self, hours: Mapping[tuple[str, datetime], Mapping[str, int]]) -> None:
        compliance = self.b["compliance"]
        lo, hi = _at(compliance["window_start"]), _at(compliance["window_end"])
        stated = {
            (row["kind"], _at(row["hour"])): row
            for row in self.b.get("rollups", [])
            if lo <= _at(row["hour"]) < hi
        }
        for key in sorted(set(stated) | set(hours), key=lambda k: (k[1], k[0])):
            row, counts = stated.get(key, {}), hours.get(key, {})
            names = [*OUTCOMES, "measured"]
            if key[0] == "link":
                names += ["available_minutes", "unavailable_minutes", "unknown_minutes"]
            differing = [
                f"{name} {row.get(name, 0)} vs {counts.get(name, 0)}"
                for name in names
                if row.get(name, 0) != counts.get(name, 0)
            ]
            if differing:
                self.bad(
                    f"hourly rollup {key[0]} {iso_utc(key[1])}: rollup vs runs: "
                    + ", ".join(differing)
                )

    # --- credit and lines ---------------------------------------------------------------

    def terms_at_end(self) -> Mapping[str, Any] | None:
        compliance = self.b.get("compliance")
        if compliance is None:
            return None
        end = _at(compliance["window_end"])
        candidates = [t for t in self.b.get("terms", []) if _at(t["effective_from"]) < end]
        return max(candidates, key=lambda t: _at(t["effective_from"])) if candidates else None

    def credit(self, compliance: Decimal | None) -> None:
        lines = self.b["invoice"]["lines"]
        if self.b.get("compliance") is None:
            return
        terms = self.terms_at_end()
        if terms is None:
            self.bad("no terms version in the bundle was in force at the end of the window")
            return
        fee = sum((Decimal(x["amount"]) for x in lines if x["kind"] == "network_fee"), ZERO)
        base = self.recomputed_base()
        result = sla_credit(
            base=base.amount,
            compliance_percent=compliance,
            tiers=credit_tiers(terms["credit_tiers"]),
            cap_percent=Decimal(terms["credit_cap_percent"]),
        )
        stated = self.b.get("credit") or {}
        self.same("credit network fee", stated.get("network_fee"), fee)
        if "credit_base" in stated:  # bundles made before credit bases were terms: none
            self.same("credit base", stated["credit_base"]["credit_base"], base.basis)
            self.same("credit base amount", stated["credit_base"]["amount"], base.amount)
        self.same("credit percent applied", stated.get("percent_applied"), result.percent_applied)
        self.same("credit amount", stated.get("amount"), result.amount)
        on_invoice = sum((Decimal(x["amount"]) for x in lines if x["kind"] == SLA_CREDIT), ZERO)
        expected = result.amount if base.amount > 0 else ZERO
        self.same("SLA credit line(s) on the invoice", on_invoice, expected)
        self.notes.append(f"credit: {result.percent_applied}% of {base.name()} = {result.amount}")

    def recomputed_base(self) -> credit_base.CreditBase:
        """The base from the bundle's terms versions over the window and its lines (a
        bundle from before credit bases were terms carries none: the network fee)."""
        window = self.b["compliance"]
        versions = [
            (
                _at(t["effective_from"]),
                int(t["version"]),
                t.get("credit_base", credit_base.NETWORK_FEE),
                Decimal(t.get("contracted_base_per_month", "0")),
            )
            for t in self.b.get("terms", [])
        ]
        spans = credit_base.cut(
            start=_at(window["window_start"]), end=_at(window["window_end"]), versions=versions
        )
        return credit_base.credit_base(
            spans=spans,
            lines=billed_lines(self.b["invoice"]["lines"]),
            month_seconds=int(self.b["period"]["month_seconds"]),
        )

    def lines(self) -> None:
        period = self.b["period"]
        seconds = int(period["month_seconds"])
        recomputed_month = Period.parse(period["period"]).seconds(period["time_zone"])
        self.same("month seconds", seconds, recomputed_month)
        bounds = Period.parse(period["period"]).bounds(period["time_zone"])
        self.same("period start", _at(period["start"]), bounds[0])
        self.same("period end", _at(period["end"]), bounds[1])
        terms = self.terms_by_version()
        samples = [
            (_at(s["slot_at"]), int(s["seconds"]), int(Decimal(s["tx_bytes"])))
            for s in self.b.get("traffic_samples", [])
        ]
        checked = 0
        for line in self.b["invoice"]["lines"]:
            detail, kind = line["detail"], line["kind"]
            name = f"invoice line {line['position']} ({kind})"
            amount = Decimal(line["amount"])
            checked += 1
            if kind in ("node_rent", "network_fee", "usage_gb", "usage_p95"):
                version = terms.get(int(detail["terms_version"]))
                if version is None:
                    self.bad(f"{name}: its terms version is not in the bundle")
                    continue
                self.segment_line(name, line, version, seconds, samples)
            elif kind == "adjustment" and "dispute" in detail:
                self.same(f"{name} amount", amount, -Decimal(detail["credit_cny"]))
            elif kind == "adjustment":
                self.same(
                    f"{name} amount",
                    amount,
                    Decimal(detail["recomputed_amount"]) - Decimal(detail["finalised_amount"]),
                )
        self.notes.append(f"invoice: {checked} line(s) recomputed")

    def segment_line(
        self,
        name: str,
        line: Mapping[str, Any],
        version: Mapping[str, Any],
        seconds: int,
        samples: list[tuple[datetime, int, int]],
    ) -> None:
        detail, kind, amount = line["detail"], line["kind"], Decimal(line["amount"])
        seg_lo, seg_hi = _at(detail["segment_start"]), _at(detail["segment_end"])
        segment = int((seg_hi - seg_lo).total_seconds())
        self.same(f"{name} segment seconds", detail["segment_seconds"], segment)
        self.same(f"{name} month seconds", detail["month_seconds"], seconds)
        if kind == "node_rent":
            rate = Decimal(version["node_rent_per_month"])
            node_seconds = sum(int(a["seconds_in_segment"]) for a in detail["assignments"])
            self.same(f"{name} node-seconds", detail["node_seconds"], node_seconds)
            self.same(f"{name} monthly rate", detail["monthly_rate"], rate)
            expected = prorate(
                monthly_amount=rate, covered_seconds=node_seconds, period_seconds=seconds
            )
        elif kind == "network_fee":
            fee = Decimal(version["network_fee_per_month"])
            self.same(f"{name} monthly fee", detail["monthly_fee"], fee)
            expected = prorate(monthly_amount=fee, covered_seconds=segment, period_seconds=seconds)
        elif kind == "usage_gb":
            total = sum(size for at, _s, size in samples if seg_lo <= at < seg_hi)
            self.same(f"{name} bytes", detail["bytes"], total)
            self.same(f"{name} GB", line["quantity"], bytes_to_gb(total).quantize(QUANTITY))
            expected = traffic_charge(
                total_bytes=total, price_per_gb=Decimal(version["price_per_gb"])
            )
        else:  # usage_p95
            rates = [
                Decimal(size) * 8 / length
                for at, length, size in samples
                if seg_lo <= at < seg_hi and length > 0
            ]
            p95 = percentile_95(rates) if rates else None
            mbps = billable_mbps(p95) if p95 is not None else ZERO
            self.same(f"{name} p95 bit/s", detail["p95_bps"], p95)
            self.same(f"{name} billable Mbps", detail["billable_mbps"], mbps)
            expected = prorate(
                monthly_amount=mbps * Decimal(version["price_per_mbps_p95"]),
                covered_seconds=segment,
                period_seconds=seconds,
            )
        self.same(f"{name} amount", amount, to_fen(expected))


def verify_report(
    doc: Mapping[str, Any], public_key: bytes | str | Ed25519PublicKey | None = None
) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of a signed bundle document; see ``verify``."""
    notes: list[str] = []
    missing = [k for k in ("bundle", "signature", "public_key", "algorithm") if k not in doc]
    if missing:
        return [f"not a signed audit bundle: {', '.join(missing)} missing"], notes
    if doc["algorithm"] != ALGORITHM:
        return [f"unknown signature algorithm {doc['algorithm']!r}"], notes
    mismatches: list[str] = []
    try:
        stated_key = load_public_key(doc["public_key"])
        if public_key is None:
            key = stated_key
            notes.append(
                f"signature checked with the key inside the bundle ({fingerprint(key)}); "
                "compare it with the provider's published key"
            )
        else:
            key = (
                public_key
                if isinstance(public_key, Ed25519PublicKey)
                else load_public_key(public_key)
            )
            if raw_public(key) != raw_public(stated_key):
                mismatches.append(
                    f"the bundle names signing key {fingerprint(stated_key)}, not the given "
                    f"key {fingerprint(key)}"
                )
        key.verify(base64.b64decode(doc["signature"]), canonical_bytes(doc["bundle"]))
        notes.append("signature: valid Ed25519 signature of the bundle's canonical JSON")
    except InvalidSignature:
        mismatches.append(
            "the signature does not verify: the bundle was changed after it was signed, or "
            "signed with another key"
        )
    except (ValueError, TypeError) as error:
        mismatches.append(f"the signature or key cannot be read: {error}")
    bundle = doc["bundle"]
    if not isinstance(bundle, Mapping) or bundle.get("format") != FORMAT:
        return [*mismatches, f"not a {FORMAT} bundle"], notes
    checker = _Checker(bundle)
    try:
        checker.chain()
        compliance = checker.compliance()
        checker.credit(compliance)
        checker.lines()
    except (KeyError, TypeError, ValueError, InvalidOperation) as error:
        checker.bad(f"the bundle is malformed: {type(error).__name__} {error}")
    return [*mismatches, *checker.mismatches], notes + checker.notes


def verify(
    doc: Mapping[str, Any], public_key: bytes | str | Ed25519PublicKey | None = None
) -> list[str]:
    """Every mismatch of a signed audit bundle, as sentences; empty when all agree.

    Reads nothing but the document (and ``public_key``, PEM or base64 raw, when given in
    place of the key the bundle names): the signature, the hash chain, the compliance per
    kind recomputed from the runs, the hourly rollups against the runs, the SLA credit and
    every invoice line's arithmetic."""
    return verify_report(doc, public_key)[0]


__all__ = ["FORMAT", "canonical_bytes", "verify", "verify_report"]
