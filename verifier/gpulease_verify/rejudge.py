"""Re-judging an audit bundle's probe runs from their own figures, and re-parsing their
raw output where the bundle carries it, with the very rules the server judged them by
(``gpulease_verify.verdicts``, ``gpulease_verify.interpret``).

Per run whose state is ``ok`` and that names a terms version:

- throughput (iperf3, ib_write_bw): ``measured_bps`` against the contracted bandwidth x
  threshold; it must equal the parsed ``received_bps`` / ``bw_avg_bps`` (whole bit/s);
- latency (ping, ib_write_lat): ``latency_us`` against the ceiling;
- collective (all_reduce_perf): the parsed bus bandwidth (average, else peak; else
  ``measured_bps``) against the floor; ``measured_bps`` is its whole part. A figure the
  parsed output also states (``received_bps``, ``bw_avg_bps``) must agree with it;
- link (ethtool, ibstatus): the parsed ports (up, speed against ``expected_bps``, link-down
  counter against ``previous_link_down_count``); ports parsed before those two were
  stored are judged on up/down only, with a note;
- counters: no verdict.

A run that did not finish ok has no verdict. The recomputed verdict, rule and reason must
equal the run's. With ``raw_output`` in the entry: its sha256 must be the content's
``raw_sha256`` (``stderr`` likewise), and re-parsing it (a node check with the node's
ports from the bundle's ``nodes``) must give the content's ``parsed``, ``measured_bps`` and
``latency_us``.

Rejudgements (``check_rejudgements``): a run judged again by the terms version that a
retroactive, acknowledged amendment put in force at its slot. Each must name a run of the
bundle by its hash and come after it in the chain; the terms version it names must be in
the bundle with that hash, linked before the rejudgement, and be the version in force at
the run's slot among those linked before it (the latest ``effective_from`` not after the
slot); and judging the run's stored figures by that version (``judge_again``, the same
rules as above) must give its verdict, rule and reason. A run's effective verdict is its
latest rejudgement's (``effective``), else its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gpulease_verify import chain, probe_tax, sweep, verdicts, witness
from gpulease_verify.canonical import canonical_json, number_text
from gpulease_verify.canonical import parse_instant as _at
from gpulease_verify.interpret import (
    ALL_REDUCE_PERF,
    COUNTERS,
    ETHTOOL,
    IB_WRITE_BW,
    IB_WRITE_LAT,
    IBSTATUS,
    IPERF3,
    PING,
    PlanNode,
    PlanPort,
    interpret,
    port_state,
)
from gpulease_verify.parsers import ParseError

THROUGHPUT_FIELD = {IPERF3: "received_bps", IB_WRITE_BW: "bw_avg_bps"}
LINK_TOOLS = (ETHTOOL, IBSTATUS)


def _optional(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def terms_view(entry: Mapping[str, Any]) -> verdicts.TermsView:
    """A bundle's terms entry as the verdicts read it."""
    return verdicts.TermsView(
        version=int(entry["version"]),
        contracted_gbps=Decimal(str(entry["contracted_bandwidth_gbps"])),
        threshold_percent=Decimal(str(entry["sla_threshold_percent"])),
        busbw_floor_gbps=_optional(entry.get("collective_busbw_floor_gbps")),
        latency_ceiling_us=_optional(entry.get("latency_ceiling_us")),
    )


def plan_node(hostname: str, entry: Mapping[str, Any]) -> PlanNode:
    """A bundle's ``nodes`` entry as the link interpretation reads it."""
    return PlanNode(
        hostname=hostname,
        leaf=entry.get("leaf", ""),
        gpus=int(entry.get("gpus", 0)),
        ports=tuple(
            PlanPort(
                device=port["device"],
                port=int(port["port"]),
                netdev=port["netdev"],
                address=port.get("address"),
                link_layer=port["link_layer"],
                rate_gbps=int(port["rate_gbps"]),
            )
            for port in entry["ports"]
        ),
    )


def name(entry: Mapping[str, Any]) -> str:
    content = entry["content"]
    return f"run {entry['id']} ({content['kind']} {content['target']})"


class Rejudge:
    """The checks of one bundle's runs; ``mismatches`` and ``notes`` collect sentences."""

    def __init__(self, bundle: Mapping[str, Any]):
        self.terms = {int(t["version"]): t for t in bundle.get("terms", [])}
        self.nodes = bundle.get("nodes") or {}
        self.mismatches: list[str] = []
        self.notes: list[str] = []
        self.rate_unknown = 0

    def run(self, entry: Mapping[str, Any]) -> None:
        content = entry["content"]
        if content["pattern"] == sweep.SWEEP:
            self.sweep(entry)
            return
        if content["state"] != "ok":
            if content["verdict"] != verdicts.Verdict.NONE:
                self.mismatches.append(
                    f"{name(entry)}: the bundle says {content['verdict']}, but the run ended "
                    f"{content['state']}, which gives no verdict"
                )
            return
        if content["tool"] == COUNTERS:
            if content["verdict"] != verdicts.Verdict.NONE:
                self.mismatches.append(
                    f"{name(entry)}: the bundle says {content['verdict']}, but counters "
                    "runs are recorded for metering and have no verdict"
                )
            self.raw(entry, None)
            return
        version = content.get("terms_version")
        if version is None or int(version) not in self.terms:
            return  # the chain check names a run judged by terms the bundle lacks
        terms = terms_view(self.terms[int(version)])
        judgement = self.from_figures(entry, terms)
        if judgement is not None:
            self.compare(entry, judgement)
        self.raw(entry, terms)

    def from_figures(
        self, entry: Mapping[str, Any], terms: verdicts.TermsView
    ) -> verdicts.Judgement | None:
        content, tool = entry["content"], entry["content"]["tool"]
        parsed = json.loads(content["parsed"]) if content.get("parsed") else None
        measured = content.get("measured_bps")
        if tool in THROUGHPUT_FIELD:
            if measured is None:
                self.missing(entry, "no measured throughput")
                return None
            field = THROUGHPUT_FIELD[tool]
            if parsed is not None and field in parsed and int(parsed[field] or 0) != measured:
                self.mismatches.append(
                    f"{name(entry)}: the bundle says it measured {measured} bit/s, its parsed "
                    f"output says {int(parsed[field] or 0)} bit/s"
                )
            return witness.judge(
                verdicts.throughput(measured_bps=int(measured), terms=terms), parsed, int(measured)
            )
        if tool in (PING, IB_WRITE_LAT):
            if content.get("latency_us") is None:
                self.missing(entry, "no measured latency")
                return None
            return verdicts.latency(measured_us=float(content["latency_us"]), terms=terms)
        if tool == ALL_REDUCE_PERF:
            busbw = None
            if parsed is not None:
                busbw = parsed.get("avg_busbw_bps")
                busbw = parsed.get("peak_busbw_bps") if busbw is None else busbw
            if busbw is None:  # parsed by another shape: the hashed figure is the record
                busbw = measured
            if busbw is None:
                self.missing(entry, "no measured bus bandwidth")
                return None
            if measured != int(busbw):
                self.mismatches.append(
                    f"{name(entry)}: the bundle says it measured {measured} bit/s, its parsed "
                    f"bus bandwidth is {int(busbw)} bit/s"
                )
            return verdicts.collective(busbw_bps=busbw, terms=terms)
        if tool in LINK_TOOLS:
            if parsed is None or not isinstance(parsed.get("ports"), list):
                self.missing(entry, "no parsed ports")
                return None
            ports = [port_state(port) for port in parsed["ports"]]
            if all("expected_bps" in port for port in parsed["ports"]):
                return verdicts.link(ports=ports, terms=terms)
            self.rate_unknown += 1
            down = [port.label for port in ports if not port.up]
            if bool(down) != (content["verdict"] == verdicts.Verdict.FAIL):
                self.mismatches.append(
                    f"{name(entry)}: the bundle says {content['verdict']}, but its parsed "
                    + (f"ports show {', '.join(down)} down" if down else "ports are all up")
                )
            return None
        return None

    def sweep(self, entry: Mapping[str, Any]) -> None:
        """A sweep (``gpulease_verify.sweep``): each node judged again from its parsed
        ports, the sweep's state, verdict, rule, reason and error from theirs; with raw
        output, each node's part of the transcript re-parsed."""
        content = entry["content"]
        if not content.get("parsed"):
            if content["verdict"] != verdicts.Verdict.NONE:
                self.mismatches.append(
                    f"{name(entry)}: the bundle says {content['verdict']}, but the sweep "
                    "holds no node's result to judge"
                )
            self.raw(entry, None)
            return
        terms = None
        if content["tool"] != COUNTERS:
            version = content.get("terms_version")
            if version is None or int(version) not in self.terms:
                return  # the chain check names a run judged by terms the bundle lacks
            terms = terms_view(self.terms[int(version)])
        stated = sweep.results_of(content)
        judged = [sweep.judge_node(result, terms) for result in stated]
        for said, again in zip(stated, judged, strict=True):
            if said.verdict != again.verdict:
                self.mismatches.append(
                    f"{name(entry)}: the bundle says node {said.node} {said.verdict}, its "
                    f"parsed ports give {again.verdict}: {again.reason}"
                )
        given = sweep.judge(tool=content["tool"], results=judged, terms=terms)
        for field in ("state", "verdict", "rule", "error"):
            if content.get(field) != getattr(given, field):
                self.mismatches.append(
                    f"{name(entry)}: the bundle's {field} is {content.get(field)!r}, its "
                    f"nodes' results give {getattr(given, field)!r}"
                )
        if content.get("verdict_reason") != given.reason:
            self.mismatches.append(
                f"{name(entry)}: the bundle's reason is {content.get('verdict_reason')!r}, "
                f"its nodes' results give {given.reason!r}"
            )
        self.raw(entry, terms)

    def raw_sweep(self, entry: Mapping[str, Any], terms: verdicts.TermsView | None) -> None:
        """Each node's part of a sweep's transcript parsed again, against its entry."""
        content = entry["content"]
        try:
            outputs = sweep.read_transcript(entry["raw_output"])
        except ParseError as error:
            self.mismatches.append(f"{name(entry)}: its raw output is not a transcript: {error}")
            return
        stated = json.loads(content["parsed"]).get("nodes", {}) if content.get("parsed") else {}
        if {out.node for out in outputs} != set(stated):
            self.mismatches.append(
                f"{name(entry)}: its transcript names nodes {sorted(o.node for o in outputs)}, "
                f"its parsed result {sorted(stated)}"
            )
            return
        for output in outputs:
            if output.node not in self.nodes:
                self.mismatches.append(
                    f"{name(entry)}: the bundle carries no ports of node {output.node} "
                    "to re-read its part of the raw output with"
                )
                continue
            said = stated[output.node]
            previous = {
                port["label"]: port["previous_link_down_count"]
                for port in said.get("ports", [])
                if isinstance(said, Mapping)
                if isinstance(port, Mapping) and port.get("previous_link_down_count") is not None
            }
            again = sweep.entry(
                sweep.interpret_node(
                    tool=content["tool"],
                    output=output,
                    terms=terms,
                    node=plan_node(output.node, self.nodes[output.node]),
                    previous_link_down=previous,
                )
            )
            # The switch-side witness is gpulease's own reading, not the node's output.
            kept = witness.without_witness(said) if isinstance(said, Mapping) else said
            if canonical_json(kept) != canonical_json(again):
                self.mismatches.append(
                    f"{name(entry)}: node {output.node}'s result differs from its output "
                    f"re-parsed: the bundle says {_short(canonical_json(kept))}, re-parsed "
                    f"{_short(canonical_json(again))}"
                )

    def missing(self, entry: Mapping[str, Any], what: str) -> None:
        if entry["content"]["verdict"] != verdicts.Verdict.NONE:
            self.mismatches.append(
                f"{name(entry)}: the bundle says {entry['content']['verdict']}, but the run "
                f"carries {what} to judge"
            )
        return None

    def compare(self, entry: Mapping[str, Any], judgement: verdicts.Judgement) -> None:
        content = entry["content"]
        if content["verdict"] != judgement.verdict:
            self.mismatches.append(
                f"{name(entry)}: the bundle says {content['verdict']}, the rule gives "
                f"{judgement.verdict}: {judgement.reason}"
            )
            return
        if content.get("rule") != judgement.rule:
            self.mismatches.append(
                f"{name(entry)}: the bundle's rule is {content.get('rule')!r}, the terms "
                f"give {judgement.rule!r}"
            )
        if content.get("verdict_reason") != judgement.reason:
            self.mismatches.append(
                f"{name(entry)}: the bundle's reason is {content.get('verdict_reason')!r}, "
                f"the rule gives {judgement.reason!r}"
            )

    def raw(self, entry: Mapping[str, Any], terms: verdicts.TermsView | None) -> None:
        if "raw_output" not in entry:
            return
        content, raw = entry["content"], entry["raw_output"]
        if raw == "" and not content["raw_sha256"]:
            return  # the run never printed (missed, skipped): nothing was hashed
        digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()
        if digest != content["raw_sha256"]:
            self.mismatches.append(
                f"{name(entry)}: its raw output hashes to {digest}, the run says "
                f"{content['raw_sha256']}"
            )
            return
        stderr = entry.get("stderr") or ""
        stderr_digest = hashlib.sha256(stderr.encode("utf-8")).hexdigest() if stderr else ""
        if stderr_digest != content.get("stderr_sha256", ""):
            self.mismatches.append(f"{name(entry)}: its stderr does not hash to stderr_sha256")
        if content["pattern"] == sweep.SWEEP:
            self.raw_sweep(entry, terms)
            return
        if content["state"] != "ok" or content.get("parsed") is None:
            return
        node = None
        if content["tool"] in (*LINK_TOOLS, COUNTERS):
            if content["target"] not in self.nodes:
                self.mismatches.append(
                    f"{name(entry)}: the bundle carries no ports of node {content['target']} "
                    "to re-read its raw output with"
                )
                return
            node = plan_node(content["target"], self.nodes[content["target"]])
        stated = json.loads(content["parsed"])
        previous = {
            port["label"]: port["previous_link_down_count"]
            for port in stated.get("ports", [])
            if isinstance(port, Mapping) and port.get("previous_link_down_count") is not None
        }
        view = terms or verdicts.TermsView(0, Decimal(0), Decimal(0), None, None)
        try:
            again = interpret(
                tool=content["tool"],
                raw_output=raw,
                terms=view,
                node=node,
                previous_link_down=previous,
            )
        except (ParseError, ValueError) as error:
            self.mismatches.append(f"{name(entry)}: its raw output does not parse again: {error}")
            return
        for field, stated_value, recomputed in (
            # The switch-side witness is gpulease's own reading, not the tool's output.
            ("parsed", _tool_parsed(content["parsed"], stated), canonical_json(again.parsed)),
            ("measured_bps", content.get("measured_bps"), again.measured_bps),
            ("latency_us", content.get("latency_us"), number_text(again.latency_us)),
        ):
            if stated_value != recomputed:
                self.mismatches.append(
                    f"{name(entry)}: its {field} differs from its raw output re-parsed: the "
                    f"bundle says {_short(stated_value)}, re-parsed {_short(recomputed)}"
                )
        self.witness_bytes(entry, stated, again.parsed, raw)

    def witness_bytes(
        self,
        entry: Mapping[str, Any],
        stated: Mapping[str, Any],
        parsed: Mapping[str, Any] | None,
        raw: str,
    ) -> None:
        """A v2 switch witness holds the switch's octets against the bytes the tool says
        its client sent: re-read them from the raw output (``gpulease_verify.probe_tax``)."""
        block = stated.get(witness.KEY)
        content = entry["content"]
        if not isinstance(block, Mapping) or witness.HOST_BYTES not in block:
            return
        client = content["target"].split(">")[0]
        try:
            sent = probe_tax.bytes_sent(
                tool=content["tool"],
                state=content["state"],
                parsed=parsed,
                raw_output=raw,
                command=content["command"],
                target=content["target"],
                nodes=content["target"].split(">"),
            ).get(client)
        except ParseError as error:
            self.mismatches.append(f"{name(entry)}: its raw output gives no bytes sent: {error}")
            return
        if sent != int(block[witness.HOST_BYTES]):
            self.mismatches.append(
                f"{name(entry)}: its switch witness holds the switch against "
                f"{int(block[witness.HOST_BYTES]):,} bytes sent, its raw output says {sent}"
            )

    def summary(self, count: int, raw: int) -> None:
        self.notes.append(
            f"runs: {count} re-judged from their figures, {raw} re-parsed from raw output"
        )
        if self.rate_unknown:
            self.notes.append(
                f"runs: {self.rate_unknown} link check(s) parsed before ports carried their "
                "expected rate: judged on up/down only"
            )


def _tool_parsed(text: str, stated: Mapping[str, Any]) -> str:
    """A run's parsed result as its tool's output alone gives it: without the switch-side
    witness block, which is gpulease's own reading (``gpulease_verify.witness``)."""
    if witness.KEY not in stated:
        return text
    return canonical_json(witness.without_witness(stated))


NO_VERDICT = verdicts.Judgement(verdicts.Verdict.NONE, "", "")


def judge_again(content: Mapping[str, Any], terms: verdicts.TermsView) -> verdicts.Judgement | None:
    """The judgement ``terms`` give a run's stored figures (its hashed ``content``), by the
    rules ``Rejudge`` re-judges runs with: no verdict (empty rule and reason) for a run that
    did not end ok, a counters run, or one that carries no figure to judge. None when the
    figures alone cannot decide (a link check parsed before ports carried their rate)."""
    if content["pattern"] == sweep.SWEEP:
        if content["state"] != "ok" or content["tool"] == COUNTERS or not content.get("parsed"):
            return NO_VERDICT
        judged = [sweep.judge_node(result, terms) for result in sweep.results_of(content)]
        given = sweep.judge(tool=content["tool"], results=judged, terms=terms)
        return verdicts.Judgement(given.verdict, given.rule, given.reason)
    if content["state"] != "ok" or content["tool"] == COUNTERS:
        return NO_VERDICT
    checker = Rejudge({})
    judgement = checker.from_figures({"id": None, "content": content}, terms)
    if judgement is None:
        return None if checker.rate_unknown else NO_VERDICT
    return judgement


def rejudgement_name(entry: Mapping[str, Any]) -> str:
    return f"rejudgement {entry.get('id')} (chain link {entry.get('chain_index')})"


def effective(bundle: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Run hash -> the content of its latest rejudgement in the bundle (highest index): the
    run's effective verdict and the terms version it counts under."""
    latest: dict[str, Mapping[str, Any]] = {}
    index: dict[str, int] = {}
    for entry in bundle.get("rejudgements", []):
        content = entry.get("content") or {}
        run_hash, at = content.get("run_hash"), entry.get("chain_index")
        if isinstance(run_hash, str) and isinstance(at, int) and at > index.get(run_hash, -1):
            latest[run_hash], index[run_hash] = content, at
    return latest


def links_in_range(bundle: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The rejudgement entries whose chain index lies within the bundle's chain range (the
    runs' first to last index): links of that stretch, checked with the runs."""
    meta = bundle.get("chain") or {}
    first, last = meta.get("first_index"), meta.get("last_index")
    if first is None or last is None:
        return []
    return [
        entry
        for entry in bundle.get("rejudgements", [])
        if isinstance(entry.get("chain_index"), int) and first <= entry["chain_index"] <= last
    ]


def _in_force(
    terms: Mapping[int, Mapping[str, Any]], slot_at: str, before: int
) -> Mapping[str, Any] | None:
    """The terms version in force at ``slot_at`` among those linked before index
    ``before`` (a version from before terms were links has no index and counts)."""
    slot = _at(slot_at)
    known = [
        entry
        for entry in terms.values()
        if (entry.get("chain_index") is None or entry["chain_index"] < before)
        and _at(entry["effective_from"]) <= slot
    ]
    return max(known, key=lambda entry: _at(entry["effective_from"])) if known else None


def _outside_links(entries: list[Mapping[str, Any]]) -> list[str]:
    """The chain check of rejudgements outside the runs' stretch (re-rated after it): each
    group of consecutive indexes is a stretch of its own, anchored on its first link."""
    problems: list[str] = []
    group: list[Mapping[str, Any]] = []
    for entry in sorted(entries, key=lambda e: e["chain_index"]):
        if group and entry["chain_index"] != group[-1]["chain_index"] + 1:
            problems += chain.verify_chain(group)
            group = []
        group.append(entry)
    return problems + (chain.verify_chain(group) if group else [])


def _check_rejudgement(
    entry: Mapping[str, Any],
    reference: str,
    runs: Mapping[str, Mapping[str, Any]],
    terms: Mapping[int, Mapping[str, Any]],
) -> tuple[list[str], list[str]]:
    label = rejudgement_name(entry)
    content = entry.get("content") or {}
    if set(content) != set(chain.REJUDGEMENT_FIELDS) or content.get("link") != chain.REJUDGEMENT:
        return [f"{label}: its content is not a rejudgement's ({', '.join(sorted(content))})"], []
    problems: list[str] = []
    if content["lease"] != reference:
        problems.append(f"{label} is a rejudgement of lease {content['lease']}, not {reference}")
    run = runs.get(content["run_hash"])
    if run is None:
        return problems, [
            f"{label} re-judges run {chain.short(content['run_hash'])}, which is outside this "
            "bundle: its link is checked, its verdict is not"
        ]
    index = int(entry["chain_index"])
    label = f"{label} of {name(run)}"
    if index <= int(run["chain_index"]):
        problems.append(
            f"{label} comes before the run it re-judges (chain link {run['chain_index']})"
        )
    version = int(content["terms_version"])
    stated = terms.get(version)
    if stated is None:
        return [*problems, f"{label} names terms v{version}, which is not in the bundle"], []
    if stated.get("terms_hash") != content["terms_hash"]:
        problems.append(
            f"{label} names terms v{version} with hash {chain.short(content['terms_hash'])}, "
            f"but the bundle's terms v{version} has hash "
            f"{chain.short(stated.get('terms_hash') or '')}"
        )
    if stated.get("chain_index") is None or stated["chain_index"] >= index:
        problems.append(f"{label} names terms v{version}, which was not linked before it")
    in_force = _in_force(terms, run["content"]["slot_at"], index)
    if in_force is None or int(in_force["version"]) != version:
        problems.append(
            f"{label} names terms v{version}, but the version in force at the run's slot "
            f"({run['content']['slot_at']}) was "
            + (f"v{in_force['version']}" if in_force is not None else "none")
        )
        return problems, []
    judgement = judge_again(run["content"], terms_view(stated))
    if judgement is None:
        problems.append(f"{label}: the run's figures alone cannot be judged again")
        return problems, []
    for field, said, recomputed in (
        ("verdict", content["verdict"], judgement.verdict),
        ("rule", content["rule"], judgement.rule),
        ("reason", content["verdict_reason"], judgement.reason),
    ):
        if said != recomputed:
            problems.append(
                f"{label}: the bundle's {field} is {said!r}, terms v{version} give {recomputed!r}"
            )
    return problems, []


def check_rejudgements(bundle: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of every rejudgement the bundle carries."""
    reference = bundle["lease"]["reference"]
    runs = {entry["run_hash"]: entry for entry in bundle.get("runs", [])}
    terms = {int(t["version"]): t for t in bundle.get("terms", [])}
    in_range = {id(entry) for entry in links_in_range(bundle)}
    entries = sorted(bundle.get("rejudgements", []), key=lambda e: e.get("chain_index") or 0)
    # A link of the runs' stretch is checked with the runs (``bundle``'s chain check).
    mismatches = _outside_links([entry for entry in entries if id(entry) not in in_range])
    notes: list[str] = []
    for entry in entries:
        found, said = _check_rejudgement(entry, reference, runs, terms)
        mismatches += found
        notes += said
    if entries:
        notes.append(f"rejudgements: {len(entries)} checked against the terms in force")
    return mismatches, notes


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 120 else f"{text[:117]}..."


def check_runs(bundle: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of re-judging every run of the bundle and its acceptance."""
    checker = Rejudge(bundle)
    runs = list(bundle.get("runs", []))
    for entry in runs:
        checker.run(entry)
    checker.summary(len(runs), sum("raw_output" in entry for entry in runs))
    return checker.mismatches, checker.notes


__all__ = [
    "NO_VERDICT",
    "Rejudge",
    "check_rejudgements",
    "check_runs",
    "effective",
    "judge_again",
    "links_in_range",
    "plan_node",
    "terms_view",
]
