"""Verifying a signed audit bundle from the bundle alone: the signature, the hash chain,
every run re-judged (``rejudge``), the billed window (``window``), the compliance
recomputed from the runs, the hourly rollups, the traffic samples rebuilt from the counters
and probe runs (``traffic``), the SLA credit and every invoice line derived again from
terms, assignments and the rebuilt samples (``lines``), a credit given as a voucher and the
vouchers the invoice used (``vouchers``), the invoice's credit notes and lifecycle events
(``credit_notes``). Reads no database
and imports no Django; ``manage.py audit_verify`` and the ``gpulease-verify`` console
script both call ``verify_report``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gpulease_verify import (
    chain,
    checkpoints,
    cosign,
    credit_base,
    credit_notes,
    fabric,
    health,
    rejudge,
    traffic,
    vouchers,
)
from gpulease_verify import compliance as sla
from gpulease_verify import lines as invoice_lines
from gpulease_verify import repair as repair_rules
from gpulease_verify import terms as terms_chain
from gpulease_verify import window as billed_window
from gpulease_verify.canonical import canonical_json, iso_utc
from gpulease_verify.canonical import parse_instant as _at
from gpulease_verify.charges import (
    CreditResult,
    Totals,
    invoice_totals,
    invoice_totals_by_rate,
    sla_credit,
)
from gpulease_verify.contract import credit_tiers
from gpulease_verify.keys import ALGORITHM
from gpulease_verify.p95 import TrafficRate
from gpulease_verify.periods import Period
from gpulease_verify.samples import (
    CONFIRMATION,
    OUTCOMES,
    classify_sample,
    confirmation_key,
    confirmed_verdict,
    link_slot_outcome,
    short_spans,
    telemetry_slot_outcome,
)
from gpulease_verify.trust import Trust

FORMAT = "gpulease-audit-bundle/2"
TRAFFIC_SHOWN = 5  # differing traffic samples (and probe runs) named one by one
ZERO = Decimal("0.00")
SLA_CREDIT = "sla_credit"
DETAIL_NAMES = {
    "node_seconds": "node-seconds",
    "segment_seconds": "segment seconds",
    "bytes": "bytes",
    "p95_bps": "p95 bit/s",
    "billable_mbps": "billable Mbps",
    "p95_direction": "95th percentile direction",
    "p95_window": "95th percentile window",
    "tx_p95_bps": "p95 bit/s sent",
    "rx_p95_bps": "p95 bit/s received",
    "days": "days with samples",
    "daily_p95_bps": "daily p95 bit/s",
}
# Detail a line written before the field existed does not state: read as the rule it was
# billed by (a 95th percentile line from before directions and windows: sent, monthly).
DETAIL_DEFAULTS = {"p95_direction": "tx", "p95_window": "monthly"}


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


def _same_count(stated: Any, recomputed: Any) -> bool:
    """A stated count or weighted sum against the recomputed one, as numbers (a weighted
    sum is written as text)."""
    a, b = _dec(stated), _dec(recomputed)
    return (a == b) if (a is not None and b is not None) else stated == recomputed


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
        self.billed: tuple[datetime, datetime] | None = None
        self.base = credit_base.CreditBase(parts=())
        self.repair: repair_rules.RepairCredit | None = None
        self.samples: list[TrafficRate] = []

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
        terms_links = terms_chain.links_in_range(self.b)
        terms_links += rejudge.links_in_range(self.b)  # rejudgements linked in the stretch
        meta = self.b.get("chain", {})
        first, last = meta.get("first_index"), meta.get("last_index")
        telemetry = self.b.get("telemetry", [])
        tenant_links = self.b.get("tenant_links") or []
        within = [
            e
            for e in [*telemetry, *tenant_links]
            if first is not None and first <= e["chain_index"] <= last
        ]
        for problem in chain.verify_chain([*runs, *terms_links, *within]):
            self.bad(problem)
        # Batches of the month and tenant records outside the runs' stretch: each checked
        # against its own hash.
        for entry in [*telemetry, *tenant_links]:
            if entry not in within:
                for problem in chain.verify_chain([entry]):
                    self.bad(problem)
        for entry in telemetry:
            if entry["content"].get("lease") != self.b["lease"]["reference"]:
                self.bad(
                    f"chain link {entry['chain_index']} is a telemetry batch of lease "
                    f"{entry['content'].get('lease')}, not {self.b['lease']['reference']}"
                )
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
        self.notes.append(
            f"chain: {len(runs) + len(terms_links) + len(telemetry) + len(tenant_links)} link(s)"
            " checked"
        )

    def fabric_health(self) -> None:
        """The health findings recomputed from the telemetry batches' intervals, with the
        thresholds of the terms version the section names: they must be the ones stated."""
        stated = self.b.get("fabric_health")
        if stated is None:
            return
        version = stated.get("terms_version")
        terms = self.terms_by_version()
        if version is not None and version not in terms:
            self.bad(f"fabric health is judged by terms v{version}, which the bundle lacks")
            return
        thresholds = health.HealthThresholds.from_terms(
            terms[version].get("health_thresholds") or {} if version is not None else {}
        )
        # The rule set is the terms version's (an entry written before sets existed: 1).
        rules = (
            int(terms_chain.defaulted_field(terms[version], "health_rules"))
            if version is not None
            else 1
        )
        if stated.get("rules") is not None and stated["rules"] != health.rule_set(rules):
            self.bad(
                f"fabric health states rules {stated['rules']}, not those of set {rules} "
                f"({health.rule_set(rules)}) that its terms version names"
            )
        if fabric.thresholds_doc(thresholds, rules) != stated.get("thresholds"):
            self.bad(
                "fabric health states thresholds that are not those of its terms version: "
                f"{stated.get('thresholds')} against {fabric.thresholds_doc(thresholds, rules)}"
            )
        batches = self.b.get("telemetry", [])
        ports = fabric.ports_of(batches)
        problems, disputed = fabric.link_state_mismatches(batches)
        for problem in problems:
            self.bad(f"link-state witness: {problem}")
        recomputed = fabric.findings(
            ports,
            thresholds,
            _at(stated["as_of"]),
            rules=rules,
            cleared=fabric.clearances_of(batches),
        )
        listed = stated.get("findings", [])
        for finding in recomputed:
            if finding not in listed:
                self.bad(
                    f"fabric health: the telemetry gives {finding['rule']} on "
                    f"{finding['node']} {finding['port']} from {finding['start']} "
                    f"({finding['detail']}), which the bundle does not list"
                )
        for finding in listed:
            if finding not in recomputed:
                self.bad(
                    f"fabric health: the bundle lists {finding.get('rule')} on "
                    f"{finding.get('node')} {finding.get('port')} from {finding.get('start')}, "
                    "which its telemetry does not give"
                )
        self.notes.append(
            f"fabric health: {len(recomputed)} finding(s) recomputed by rule set {rules} from "
            f"{sum(len(s) for s in ports.values())} telemetry interval(s) of {len(ports)} "
            f"port(s); {disputed} interval(s) disputed by the switch"
        )

    # --- runs, window ---------------------------------------------------------------

    def runs(self) -> None:
        """Every run re-judged from its figures, and re-parsed where raw output is carried;
        every rejudgement checked against the terms in force at its run's slot."""
        found, notes = rejudge.check_runs(self.b)
        self.mismatches.extend(found)
        self.notes.extend(notes)
        found, notes = rejudge.check_rejudgements(self.b)
        self.mismatches.extend(found)
        self.notes.extend(notes)

    def requires_acceptance(self) -> bool:
        """The lease's first terms version decides; a bundle without it states the rule."""
        first = [t for t in self.b.get("terms", []) if int(t["version"]) == 1]
        if first:
            return bool(first[0].get("billing_starts_on_acceptance"))
        return bool(self.b.get("billing_window", {}).get("requires_acceptance"))

    def acceptance(self) -> datetime | None:
        """The billing start the bundle's acceptance attempt proves, None without one."""
        attempt = self.b.get("acceptance_run")
        if not attempt:
            return None
        entries = attempt.get("runs", [])
        reference = self.b["lease"]["reference"]
        by_index = {entry["chain_index"]: entry for entry in self.b.get("runs", [])}
        judge = rejudge.Rejudge(self.b)
        slots = {entry["content"]["slot_at"] for entry in entries}
        for entry in entries:
            content, label = entry["content"], rejudge.name(entry)
            if chain.link_hash(content, entry["prev_hash"]) != entry["run_hash"]:
                self.bad(f"acceptance {label}: its hash does not match its content")
            same = by_index.get(entry["chain_index"])
            if same is not None and same["run_hash"] != entry["run_hash"]:
                self.bad(
                    f"acceptance {label}: chain link {entry['chain_index']} in the runs is "
                    "another run"
                )
            if content.get("lease") != reference or content.get("trigger") != "acceptance":
                self.bad(f"acceptance {label}: not an acceptance run of lease {reference}")
            judge.run(entry)
        self.mismatches.extend(f"acceptance {m}" for m in judge.mismatches)
        rows = [
            (e["content"]["state"], e["content"]["verdict"], e["content"]["finished_at"])
            for e in entries
        ]
        if len(slots) != 1 or not billed_window.attempt_passes(rows):
            self.bad(
                "the acceptance attempt in the bundle did not pass: every run of one slot "
                "must finish ok with a pass verdict"
            )
            return None
        return max(_at(finished) for _s, _v, finished in rows if finished)

    def window(self) -> None:
        """The billed window recomputed from the period, the lease's dates, the acceptance
        and the terms versions; compared with the window the bundle states."""
        period = self.b["period"]
        bounds = Period.parse(period["period"]).bounds(period["time_zone"])
        lease = self.b["lease"]
        accepted = self.acceptance() if self.requires_acceptance() else None
        stated_start = self.b.get("billing_window", {}).get("billing_start")
        if accepted is not None and stated_start is not None and _at(stated_start) != accepted:
            self.bad(
                f"billing start: the bundle says {stated_start}, its acceptance attempt "
                f"finished at {iso_utc(accepted)}"
            )
        if self.requires_acceptance() and accepted is None and stated_start is not None:
            self.bad(
                f"billing start: the bundle says {stated_start}, but it carries no passing "
                "acceptance attempt to prove it"
            )
        self.billed = billed_window.billed_window(
            period=bounds,
            lease=(
                _at(lease["starts_at"]),
                _at(lease["ends_at"]) if lease.get("ends_at") else None,
            ),
            effective_from=[_at(t["effective_from"]) for t in self.b.get("terms", [])],
            requires_acceptance=self.requires_acceptance(),
            accepted=accepted,
        )
        recomputed = _span(self.billed)
        compliance = self.b.get("compliance")
        if compliance is None:
            if self.billed is not None:
                self.bad(f"compliance: the bundle says none, but the lease was billed {recomputed}")
        else:
            stated = _span((_at(compliance["window_start"]), _at(compliance["window_end"])))
            if stated != recomputed:
                self.bad(f"compliance window: the bundle says {stated}, recomputed {recomputed}")
        if self.b.get("credit") is None and self.billed is not None:
            self.bad(f"credit: the bundle says none, but the lease was billed {recomputed}")
        self.notes.append(f"billed window: {recomputed}")

    # --- compliance -------------------------------------------------------------------

    def terms_by_version(self) -> dict[int, Mapping[str, Any]]:
        return {int(t["version"]): t for t in self.b.get("terms", [])}

    def recompute(
        self,
    ) -> tuple[dict[str, dict[str, Any]], sla.Availability, dict[Any, Any]]:
        """Counts per kind, availability minutes (``gpulease_verify.compliance``: pass,
        degraded, down, no evidence), and per (kind, hour) counts, from runs (over the
        recomputed window)."""
        zone = self.b["period"]["time_zone"]
        assert self.billed is not None
        lo, hi = self.billed
        terms = self.terms_by_version()
        rejudged = rejudge.effective(self.b)
        kinds: dict[str, dict[str, Any]] = defaultdict(
            lambda: {**dict.fromkeys(OUTCOMES, 0), "measured": 0}
        )
        hours: dict[tuple[str, datetime], dict[str, Any]] = defaultdict(
            lambda: {**dict.fromkeys(OUTCOMES, 0), "measured": 0}
        )
        link_slots: dict[datetime, list[str]] = defaultdict(list)
        slot_minutes: dict[datetime, int] = {}
        slot_weight: dict[datetime, Decimal] = {}
        throughput: list[tuple[datetime, datetime, str]] = []
        confirmations = self.confirmations(rejudged)
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
            # A throughput sample outside the window (its slot began before it) still
            # degrades the window's link minutes its slot reaches.
            spans = (
                content["trigger"] == "schedule"
                and content["kind"] == "throughput"
                and bool(content.get("deadline_at"))
            )
            if not counted and not spans:
                continue
            # The effective judgement: the run's latest rejudgement's, else its own.
            judged = rejudged.get(entry["run_hash"], content)
            version = judged.get("terms_version")
            windows = None
            if version is not None:
                if version not in terms:
                    if counted:
                        self.bad(
                            f"run {entry['id']} was judged by terms v{version}, "
                            "which the bundle does not contain"
                        )
                else:
                    windows = terms[version]["maintenance_windows"]
            outcome = classify_sample(
                state=content["state"],
                verdict=confirmed_verdict(judged["verdict"], confirmations.get(_key(content))),
                slot_at=slot,
                maintenance_windows=windows,
                zone=zone,
            )
            kind = content["kind"]
            if spans:
                throughput.append((slot, _at(content["deadline_at"]), outcome))
            if not counted:
                continue
            if stated.get("outcome") != outcome:
                self.bad(
                    f"run {entry['id']}: the bundle says {stated.get('outcome')}, "
                    f"recomputed {outcome}"
                )
            measured = content["state"] == "ok" and bool(content["measured_bps"])
            for bucket in (kinds[kind], hours[(kind, hour_start(slot))]):
                bucket[outcome] += 1
                bucket["measured"] += measured
            if kind == "link":
                link_slots[slot].append(outcome)
                deadline = _at(content["deadline_at"])
                slot_minutes[slot] = int((deadline - slot).total_seconds() // 60)
                # A slot's runs count under one version; were they not, the highest
                # weight (as billing.ingest takes it).
                weight = (
                    Decimal(terms_chain.defaulted_field(terms[version], "degraded_weight"))
                    if version in terms
                    else Decimal(0)
                )
                slot_weight[slot] = max(slot_weight.get(slot, weight), weight)
        short = sla.ShortSpans(short_spans(throughput))
        minutes = sla.Availability()
        per_hour_minutes: dict[datetime, sla.Availability] = defaultdict(sla.Availability)
        down = fabric.down_only(fabric.ports_of(self.b.get("telemetry", [])))
        for slot, outcomes in link_slots.items():
            given = telemetry_slot_outcome(
                link_slot_outcome(outcomes),
                telemetry_down=health.unavailable_within(
                    down, start=slot, end=slot + timedelta(minutes=slot_minutes[slot])
                ),
            )
            gives = sla.slot_availability(
                outcome=given,
                slot=slot,
                minutes=slot_minutes[slot],
                short=short,
                degraded_weight=slot_weight[slot],
            )
            minutes += gives
            per_hour_minutes[hour_start(slot)] += gives
        for (kind, hour), bucket in hours.items():
            if kind == "link":
                figures = per_hour_minutes[hour]
                bucket.update(
                    available_minutes=figures.available_minutes,
                    unavailable_minutes=figures.unavailable_minutes,
                    unknown_minutes=figures.unknown_minutes,
                    degraded_minutes=figures.degraded_minutes,
                    degraded_weighted=figures.degraded_weighted,
                )
        return kinds, minutes, hours

    def confirmations(self, rejudged: Mapping[str, Mapping[str, Any]]) -> dict[tuple, str]:
        """The key of each scheduled run that was confirmed -> its confirmation's
        effective verdict (``gpulease_verify.samples``). A confirmation must follow the
        run it confirms, under terms that confirm failures."""
        terms = self.terms_by_version()
        scheduled = {
            _key(entry["content"]): entry
            for entry in self.b.get("runs", [])
            if entry["content"]["trigger"] == "schedule"
        }
        found: dict[tuple, str] = {}
        for entry in self.b.get("runs", []):
            content = entry["content"]
            if content["trigger"] != CONFIRMATION:
                continue
            version = content.get("terms_version")
            if version in terms and not terms_chain.defaulted_field(
                terms[version], "confirm_failures"
            ):
                self.bad(
                    f"run {entry['id']} is a confirmation, but terms v{version} it was judged "
                    "by do not confirm failures"
                )
                continue
            first = scheduled.get(_key(content))
            if first is not None and (
                not content["started_at"]
                or not first["content"]["finished_at"]
                or _at(content["started_at"]) < _at(first["content"]["finished_at"])
            ):
                self.bad(
                    f"run {entry['id']} confirms run {first['id']}, but did not start after "
                    "it finished"
                )
                continue
            found[_key(content)] = rejudged.get(entry["run_hash"], content)["verdict"]
        return found

    def compliance(self) -> Decimal | None:
        stated = self.b.get("compliance")
        if stated is None or self.billed is None:
            if stated is None and self.billed is None:
                self.notes.append("compliance: the lease was not billed in this period")
            return None
        kinds, minutes, hours = self.recompute()
        summary = sla.SlaSummary(
            lease_id=0,
            start=self.billed[0],
            end=self.billed[1],
            by_kind={
                kind: sla.Compliance(**{name: counts[name] for name in (*OUTCOMES, "measured")})
                for kind, counts in kinds.items()
            },
            availability=minutes,
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
            field = f"{name}_minutes"
            self.same(f"{name} minutes", said[field], getattr(minutes, field))
        self.minute_counts(said, minutes)
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

    def minute_counts(self, said: Mapping[str, Any], minutes: sla.Availability) -> None:
        """The four minute counts and the weighted degraded minutes the bundle states,
        against those recomputed from its link checks and throughput samples. A bundle
        written before degraded minutes were counted states none of them; its
        availability percent is still checked."""
        labels = {
            "pass_minutes": "pass minutes (links up, no failed throughput sample)",
            "degraded_minutes": (
                "degraded minutes (links up while a failed throughput sample covered them)"
            ),
            "down_minutes": "down minutes (a link check failed or telemetry saw a port down)",
            "no_evidence_minutes": "no-evidence minutes (the link checks measured nothing)",
        }
        for name, recomputed in minutes.counts().items():
            if name in said and not _same_count(said[name], recomputed):
                self.bad(
                    f"{labels[name]}: the bundle says {said[name]}, recomputed {recomputed} "
                    "from the link checks and throughput samples in the chain"
                )
        if "degraded_weighted" in said:
            self.same(
                "degraded minutes counted as down (degraded minutes x degraded_weight)",
                said["degraded_weighted"],
                minutes.degraded_weighted,
            )

    def rollups(self, hours: Mapping[tuple[str, datetime], Mapping[str, Any]]) -> None:
        assert self.billed is not None
        lo, hi = self.billed
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
                # Rollups written before degraded minutes were counted have neither.
                names += [name for name in ("degraded_minutes", "degraded_weighted") if name in row]
            differing = [
                f"{name} {row.get(name, 0)} vs {counts.get(name, 0)}"
                for name in names
                if not _same_count(row.get(name, 0), counts.get(name, 0))
            ]
            if differing:
                self.bad(
                    f"hourly rollup {key[0]} {iso_utc(key[1])}: rollup vs runs: "
                    + ", ".join(differing)
                )

    # --- credit and lines ---------------------------------------------------------------

    def terms_at_end(self) -> Mapping[str, Any] | None:
        if self.billed is None:
            return None
        end = self.billed[1]
        candidates = [t for t in self.b.get("terms", []) if _at(t["effective_from"]) < end]
        return max(candidates, key=lambda t: _at(t["effective_from"])) if candidates else None

    def credit(self, compliance: Decimal | None) -> CreditResult | None:
        """The credit recomputed (tiers and cap of the terms at the window's end, base from
        the lines); None when nothing was billed or the base is 0."""
        lines = self.b["invoice"]["lines"]
        if self.billed is None:
            return None
        terms = self.terms_at_end()
        if terms is None:
            self.bad("no terms version in the bundle was in force at the end of the window")
            return None
        fee = sum((Decimal(x["amount"]) for x in lines if x["kind"] == "network_fee"), ZERO)
        base = self.recomputed_base()
        result = sla_credit(
            base=base.amount,
            compliance_percent=compliance,
            tiers=credit_tiers(terms["credit_tiers"]),
            cap_percent=Decimal(terms["credit_cap_percent"]),
        )
        self.base = base
        repair, problems, notes = repair_rules.check(
            self.b, self.billed, terms, base.amount, result.percent_applied, result.amount
        )
        self.repair = repair
        self.mismatches.extend(problems)
        self.notes.extend(notes)
        stated = self.b.get("credit")
        if stated is None:
            return result if base.amount > 0 else None
        self.same("credit network fee", stated.get("network_fee"), fee)
        if "credit_base" in stated:  # bundles made before credit bases were terms: none
            self.same("credit base", stated["credit_base"]["credit_base"], base.basis)
            self.same("credit base amount", stated["credit_base"]["amount"], base.amount)
        self.same("credit percent applied", stated.get("percent_applied"), result.percent_applied)
        self.same("credit amount", stated.get("amount"), result.amount)
        on_invoice = sum((Decimal(x["amount"]) for x in lines if x["kind"] == SLA_CREDIT), ZERO)
        # Given as a voucher where the terms say so: no line (gpulease_verify.vouchers).
        as_line = vouchers.credit_mode(terms) == vouchers.LINE
        whole = self.credit_line(result)[1]
        expected = whole if base.amount > 0 and as_line else ZERO
        self.same("SLA credit line(s) on the invoice", on_invoice, expected)
        self.notes.append(f"credit: {result.percent_applied}% of {base.name()} = {result.amount}")
        return result if base.amount > 0 else None

    def credit_line(self, credit: CreditResult) -> tuple[Decimal, Decimal]:
        """(quantity, amount) of the credit line: the SLA credit plus the repair credit."""
        return repair_rules.credit_line(credit.percent_applied, credit.amount, self.repair)

    def recomputed_base(self) -> credit_base.CreditBase:
        """The base from the bundle's terms versions over the window and its lines (a
        bundle from before credit bases were terms carries none: the network fee)."""
        assert self.billed is not None
        versions = [
            (
                _at(t["effective_from"]),
                int(t["version"]),
                t.get("credit_base", credit_base.NETWORK_FEE),
                Decimal(t.get("contracted_base_per_month", "0")),
            )
            for t in self.b.get("terms", [])
        ]
        spans = credit_base.cut(start=self.billed[0], end=self.billed[1], versions=versions)
        return credit_base.credit_base(
            spans=spans,
            lines=billed_lines(self.b["invoice"]["lines"]),
            month_seconds=int(self.b["period"]["month_seconds"]),
        )

    def expected(self, credit: CreditResult | None) -> list[invoice_lines.Expected]:
        period = self.b["period"]
        start, end = Period.parse(period["period"]).bounds(period["time_zone"])
        seconds = Period.parse(period["period"]).seconds(period["time_zone"])
        lease_end = self.b["lease"].get("ends_at")
        billed = self.b["lease"]["status"] in billed_window.BILLED_STATUSES
        found = invoice_lines.expected_lines(
            window=self.billed if billed else None,
            terms=self.b.get("terms", []),
            month=(start, end, seconds),
            assignments=self.b.get("assignments", []),
            lease_end=_at(lease_end) if lease_end else None,
            samples=self.samples,
            zone_name=period["time_zone"],
        )
        as_line = vouchers.credit_mode(self.terms_at_end()) == vouchers.LINE
        quantity, amount = self.credit_line(credit) if credit is not None else (None, ZERO)
        if credit is not None and amount != 0 and as_line:
            found.append(
                invoice_lines.Expected(
                    SLA_CREDIT,
                    None,
                    None,
                    None,
                    quantity,
                    self.base.amount,
                    amount,
                    {},
                    self._credit_rate(),
                )
            )
        return found

    # --- traffic samples ---------------------------------------------------------------

    def traffic(self) -> None:
        """Rebuild the period's traffic samples from the chained runs (``traffic.rebuild``)
        and name every slot where the bundle's differ: per-GB and 95th-percentile lines
        are recomputed from the rebuilt ones."""
        rebuilt = traffic.rebuild(self.b)
        for problem in rebuilt.problems[:TRAFFIC_SHOWN]:
            self.bad(problem)
        if len(rebuilt.problems) > TRAFFIC_SHOWN:
            more = len(rebuilt.problems) - TRAFFIC_SHOWN
            self.bad(f"probe bytes: {more} more run(s) differ from their outputs")
        figures = {
            s.slot_at: (s.seconds, s.bytes, s.nodes, s.resets, s.wraps) for s in rebuilt.samples
        }
        stated = {
            _at(s["slot_at"]): (
                int(s["seconds"]),
                int(Decimal(s["tx_bytes"])),
                int(s["nodes"]),
                int(s["resets"]),
                int(s["wraps"]),
            )
            for s in self.b.get("traffic_samples", [])
        }
        differ = sorted(
            slot for slot in figures.keys() | stated.keys() if figures.get(slot) != stated.get(slot)
        )
        for slot in differ[:TRAFFIC_SHOWN]:
            self.bad(
                f"traffic sample {iso_utc(slot)}: the bundle says {_sample_text(stated.get(slot))},"
                f" rebuilt from the runs {_sample_text(figures.get(slot))}"
            )
        if len(differ) > TRAFFIC_SHOWN:
            self.bad(f"traffic samples: {len(differ) - TRAFFIC_SHOWN} more slot(s) differ")
        # Received bytes: checked where the bundle states them (a sample stored before
        # they were metered states null, a bundle from before them none).
        received = {s.slot_at: s.rx_bytes for s in rebuilt.samples}
        stated_rx = {
            _at(s["slot_at"]): int(Decimal(s["rx_bytes"]))
            for s in self.b.get("traffic_samples", [])
            if s.get("rx_bytes") is not None
        }
        differ_rx = sorted(slot for slot, count in stated_rx.items() if received.get(slot) != count)
        for slot in differ_rx[:TRAFFIC_SHOWN]:
            count = received.get(slot)
            self.bad(
                f"traffic sample {iso_utc(slot)}: the bundle says {stated_rx[slot]} B "
                "received, rebuilt from the runs "
                + ("no sample" if count is None else f"{count} B received")
            )
        if len(differ_rx) > TRAFFIC_SHOWN:
            more = len(differ_rx) - TRAFFIC_SHOWN
            self.bad(f"traffic samples: {more} more slot(s) differ in bytes received")
        self.samples = [
            TrafficRate(s.slot_at, s.seconds, s.bytes, s.rx_bytes) for s in rebuilt.samples
        ]
        self.notes.append(
            f"traffic: {len(rebuilt.samples)} sample(s) rebuilt from the counters runs"
            + (
                f"; the probe bytes of {rebuilt.taken_as_stated} iperf3 run(s) taken as the"
                " bundle states them (fetch it with raw=1 to re-read them)"
                if rebuilt.taken_as_stated
                else ""
            )
        )
        for gap in rebuilt.gaps:
            self.notes.append(
                f"traffic: metering gap, {gap.node} not read from {iso_utc(gap.start)} to "
                f"{iso_utc(gap.end)} (more than {traffic.READING_REACH.days} days): its "
                f"{gap.bytes} B are billed by time over the gap"
            )

    def _credit_rate(self) -> Decimal | None:
        terms = self.terms_at_end()
        return None if terms is None else invoice_lines.service_rate(terms)

    def lines(self, credit: CreditResult | None = None) -> None:
        period = self.b["period"]
        seconds = int(period["month_seconds"])
        recomputed_month = Period.parse(period["period"]).seconds(period["time_zone"])
        self.same("month seconds", seconds, recomputed_month)
        bounds = Period.parse(period["period"]).bounds(period["time_zone"])
        self.same("period start", _at(period["start"]), bounds[0])
        self.same("period end", _at(period["end"]), bounds[1])
        if "assignments" not in self.b:
            self.bad("the bundle carries no node assignments to recompute node rent from")
        expected = {line.key: line for line in self.expected(credit)}
        seen: dict[tuple[Any, ...], int] = {}
        stated_lines = self.b["invoice"]["lines"]
        for line in stated_lines:
            detail, kind = line["detail"], line["kind"]
            name = f"invoice line {line['position']} ({kind})"
            amount = Decimal(line["amount"])
            if kind not in invoice_lines.KINDS:
                self.bad(f"invoice line {line['position']}: unknown kind {kind!r}")
                continue
            if kind == "adjustment" and "dispute" in detail:
                self.same(f"{name} amount", amount, -Decimal(detail["credit_cny"]))
                continue
            if kind == "adjustment":
                self.same(
                    f"{name} amount",
                    amount,
                    Decimal(detail["recomputed_amount"]) - Decimal(detail["finalised_amount"]),
                )
                continue
            key = invoice_lines.stated_key(line)
            if key in seen:
                self.bad(
                    f"{name}: a duplicate of invoice line {seen[key]} (same kind, terms "
                    "version and segment)"
                )
                continue
            seen[key] = line["position"]
            due = expected.get(key)
            if due is None:
                self.bad(f"{name}: no such line is due for the billed window")
                continue
            if kind in invoice_lines.SEGMENT_KINDS:
                self.same(f"{name} month seconds", detail["month_seconds"], seconds)
            for field, recomputed in due.detail.items():
                self.same(
                    f"{name} {DETAIL_NAMES[field]}",
                    detail.get(field, DETAIL_DEFAULTS.get(field)),
                    recomputed,
                )
            self.same(f"{name} quantity", line["quantity"], due.quantity)
            self.same(f"{name} unit price", line["unit_price"], due.unit_price)
            self.same(f"{name} amount", amount, due.amount)
            if "tax_rate_percent" in line:  # bundles from before tax per line: none
                self.same(
                    f"{name} tax rate percent", line["tax_rate_percent"], due.tax_rate_percent
                )
        for key, due in expected.items():
            if key not in seen:
                self.bad(f"invoice: a {due.label()} line of {due.amount} is due but missing")
        self.mismatches.extend(invoice_lines.overlapping(stated_lines))
        self.totals()
        self.notes.append(
            f"invoice: {len(stated_lines)} line(s) checked against {len(expected)} recomputed"
        )

    def totals(self) -> None:
        """The whole invoice's subtotal, tax and total from every line on it: tax per rate
        group, rounded once per group (``invoice_totals_by_rate``), and its own tax rate the
        one its lines share, or null when they differ. A bundle from before tax per line
        (lines without ``tax_rate_percent``): one rate, the highest
        ``terms_tax_rate_percent`` of its lines, on the subtotal."""
        invoice = self.b["invoice"]
        if invoice.get("source") != "invoice" or "other_lines" not in invoice:
            return
        every = [*invoice["lines"], *invoice["other_lines"]]
        if all("tax_rate_percent" in line for line in every):
            totals = invoice_totals_by_rate(
                [(Decimal(line["amount"]), Decimal(line["tax_rate_percent"])) for line in every]
            )
            rates = [group.tax_rate_percent for group in totals.groups]
            stated_rate = invoice.get("tax_rate_percent")
            if every and len(rates) == 1:  # an empty invoice states no rate
                self.same("invoice tax rate percent", stated_rate, rates[0])
            elif len(rates) > 1 and stated_rate is not None:
                self.bad(
                    f"invoice tax rate percent: the bundle says {stated_rate}, but its lines "
                    f"have {len(rates)} rates ({', '.join(str(rate) for rate in rates)}): null"
                )
        else:
            totals = self._single_rate_totals(invoice, every)
        stated = [_dec(invoice[f"invoice_{name}"]) for name in ("subtotal", "tax", "total")]
        if stated != [totals.subtotal, totals.tax, totals.total]:
            groups = ", ".join(
                f"{group.tax} on {group.subtotal} at {group.tax_rate_percent}%"
                for group in totals.groups
            )
            self.bad(
                "invoice totals: the bundle says subtotal {}, tax {}, total {}; its lines give "
                "{}, {}, {} (tax per rate: {})".format(
                    *(invoice[f"invoice_{n}"] for n in ("subtotal", "tax", "total")),
                    totals.subtotal,
                    totals.tax,
                    totals.total,
                    groups or "none",
                )
            )

    def _single_rate_totals(
        self, invoice: Mapping[str, Any], every: list[Mapping[str, Any]]
    ) -> Totals:
        rates = [
            Decimal(line["detail"]["terms_tax_rate_percent"])
            if "detail" in line
            else Decimal(line["terms_tax_rate_percent"])
            for line in every
            if line["kind"] != "adjustment"
            and (line.get("detail") or line).get("terms_tax_rate_percent") is not None
        ]
        rate = Decimal(invoice["tax_rate_percent"])
        if rates:
            self.same("invoice tax rate percent", rate, max(rates))
        return invoice_totals(
            lines=[Decimal(line["amount"]) for line in every], tax_rate_percent=rate
        )


def _key(content: Mapping[str, Any]) -> tuple:
    return confirmation_key(
        kind=content["kind"],
        tool=content["tool"],
        pattern=content["pattern"],
        target=content["target"],
        slot_at=_at(content["slot_at"]),
    )


def _sample_text(figures: tuple[int, int, int, int, int] | None) -> str:
    if figures is None:
        return "no sample"
    seconds, count, nodes, resets, wraps = figures
    return f"{count} B over {seconds} s from {nodes} node(s), {resets} reset(s), {wraps} wrap(s)"


def _span(window: tuple[datetime, datetime] | None) -> str:
    if window is None:
        return "nothing (not billed)"
    return f"from {iso_utc(window[0])} to {iso_utc(window[1])}"


def verify_report(
    doc: Mapping[str, Any],
    public_key: bytes | str | Mapping[str, Any] | Ed25519PublicKey | None = None,
    *,
    fingerprint: str | None = None,
    trust_embedded_key: bool = False,
    previous: Mapping[str, Any] | None = None,
    tenant_keys: set[str] | None = None,
) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of a signed bundle document; see ``verify``. The signature is
    checked with ``public_key`` (PEM, base64, or the public-key endpoint's JSON listing
    every key with its validity), or with the key inside the bundle once its fingerprint
    equals ``fingerprint``, or, with ``trust_embedded_key``, with the key inside (a warning
    note). Raises ``trust.NoTrustedKey`` when none of the three is given. ``previous``: an
    earlier checkpoint or signed bundle whose head this bundle must still contain.
    ``tenant_keys``: the fingerprints of the keys the tenant published (``--tenant-keys``),
    the only keys its co-signed records may be signed with."""
    key_trust = Trust.of(public_key, fingerprint=fingerprint, trust_embedded_key=trust_embedded_key)
    missing = [k for k in ("bundle", "signature", "public_key", "algorithm") if k not in doc]
    if missing:
        return [f"not a signed audit bundle: {', '.join(missing)} missing"], []
    if doc["algorithm"] != ALGORITHM:
        return [f"unknown signature algorithm {doc['algorithm']!r}"], []
    try:
        signed = canonical_bytes(doc["bundle"])
    except (TypeError, ValueError) as error:
        return [f"the bundle cannot be written as canonical JSON: {error}"], []
    generated_at = doc["bundle"].get("generated_at") if isinstance(doc["bundle"], Mapping) else None
    mismatches, notes = key_trust.check(doc, signed, what="the bundle", at=generated_at)
    bundle = doc["bundle"]
    if not isinstance(bundle, Mapping) or bundle.get("format") != FORMAT:
        return [*mismatches, f"not a {FORMAT} bundle"], notes
    checker = _Checker(bundle)
    try:
        checker.chain()
        checker.mismatches.extend(terms_chain.check_terms(bundle))
        cosigned = cosign.check_cosigned(bundle, tenant_keys)
        checker.mismatches.extend(cosigned[0])
        checker.notes.extend(cosigned[1])
        checker.runs()
        checker.fabric_health()
        checker.window()
        compliance = checker.compliance()
        checker.traffic()
        credit = checker.credit(compliance)
        checker.lines(credit)
        given = vouchers.check(
            bundle,
            None if credit is None else checker.credit_line(credit)[1],
            checker.terms_at_end(),
        )
        checker.mismatches.extend(given[0])
        checker.notes.extend(given[1])
        documents = credit_notes.check(bundle)
        checker.mismatches.extend(documents[0])
        checker.notes.extend(documents[1])
        anchored = checkpoints.check_bundle(bundle, key_trust, previous, _signed_or_none(previous))
        checker.mismatches.extend(anchored[0])
        checker.notes.extend(anchored[1])
    except (KeyError, TypeError, ValueError, InvalidOperation) as error:
        checker.bad(f"the bundle is malformed: {type(error).__name__} {error}")
    return [*mismatches, *checker.mismatches], notes + checker.notes


def _signed_or_none(doc: Mapping[str, Any] | None) -> bytes | None:
    if doc is None or not isinstance(doc.get("bundle"), Mapping):
        return None
    return canonical_bytes(doc["bundle"])


def verify(
    doc: Mapping[str, Any],
    public_key: bytes | str | Mapping[str, Any] | Ed25519PublicKey | None = None,
    **trust: Any,
) -> list[str]:
    """Every mismatch of a signed audit bundle, as sentences; empty when all agree.

    Reads nothing but the document (and ``public_key``, PEM or base64 raw, when given in
    place of the key the bundle names): the signature, the hash chain, the compliance per
    kind recomputed from the runs, the hourly rollups against the runs, the SLA credit and
    every invoice line's arithmetic. ``trust``: ``fingerprint``, ``trust_embedded_key``,
    ``previous`` as for ``verify_report``."""
    return verify_report(doc, public_key, **trust)[0]


__all__ = ["FORMAT", "canonical_bytes", "verify", "verify_report"]
