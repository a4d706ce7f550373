"""Verdicts: a parsed measurement against the terms in force at its instant.

Each judgement names its rule (what was compared with what, under which terms version) and
a reason a customer can read, with the measured figure in it."""

from dataclasses import dataclass
from decimal import Decimal

from gpulease_verify.units import format_bps, one_decimal, plain

GIGA = Decimal(10) ** 9


class Verdict:
    """The verdict values stored on runs (``benchmarks.choices.Verdict`` names them)."""

    PASS = "pass"
    FAIL = "fail"
    NONE = "none"


@dataclass(frozen=True)
class TermsView:
    """The parts of a LeaseTerms version that verdicts read."""

    version: int
    contracted_gbps: Decimal
    threshold_percent: Decimal
    busbw_floor_gbps: Decimal | None
    latency_ceiling_us: Decimal | None

    @property
    def threshold_bps(self) -> Decimal:
        return self.contracted_gbps * GIGA * self.threshold_percent / 100


@dataclass(frozen=True)
class Judgement:
    verdict: str
    rule: str
    reason: str


def throughput(*, measured_bps: float, terms: TermsView) -> Judgement:
    threshold = terms.threshold_bps
    rule = (
        f"throughput >= {plain(terms.threshold_percent)}% of {plain(terms.contracted_gbps)} "
        f"Gbps contracted (terms v{terms.version})"
    )
    if Decimal(str(measured_bps)) >= threshold:
        reason = f"measured {format_bps(measured_bps)}, at or above {format_bps(threshold)}"
        return Judgement(Verdict.PASS, rule, reason)
    share = Decimal(str(measured_bps)) / (terms.contracted_gbps * GIGA) * 100
    reason = (
        f"measured {format_bps(measured_bps)} ({plain(one_decimal(share))}% of contracted), "
        f"below {format_bps(threshold)}"
    )
    return Judgement(Verdict.FAIL, rule, reason)


@dataclass(frozen=True)
class PortState:
    label: str
    up: bool
    speed_bps: float | None
    expected_bps: float
    link_down_count: int | None
    previous_link_down_count: int | None


def link_rule(terms: TermsView) -> str:
    return f"every contracted port up at its rate, no link flap (terms v{terms.version})"


def link(*, ports: list[PortState], terms: TermsView) -> Judgement:
    rule = link_rule(terms)
    if not ports:
        return Judgement(Verdict.FAIL, rule, "no contracted port was found on the node")
    problems = []
    for port in ports:
        if not port.up:
            problems.append(f"{port.label} is down")
        elif port.speed_bps is None:
            problems.append(f"{port.label} reports no speed")
        elif port.speed_bps < port.expected_bps:
            problems.append(
                f"{port.label} runs at {format_bps(port.speed_bps)}, "
                f"below its {format_bps(port.expected_bps)}"
            )
        if (
            port.link_down_count is not None
            and port.previous_link_down_count is not None
            and port.link_down_count > port.previous_link_down_count
        ):
            flaps = port.link_down_count - port.previous_link_down_count
            problems.append(f"{port.label} went down {flaps} time(s) since the last check")
    if problems:
        return Judgement(Verdict.FAIL, rule, "; ".join(problems))
    return Judgement(Verdict.PASS, rule, f"{len(ports)} port(s) up at their rate")


def latency(*, measured_us: float, terms: TermsView) -> Judgement:
    if terms.latency_ceiling_us is None:
        return Judgement(
            Verdict.NONE, "no latency ceiling in the contract", f"measured {measured_us:.1f} µs"
        )
    rule = f"latency <= {plain(terms.latency_ceiling_us)} µs (terms v{terms.version})"
    ok = Decimal(str(measured_us)) <= terms.latency_ceiling_us
    return Judgement(
        Verdict.PASS if ok else Verdict.FAIL,
        rule,
        f"measured {measured_us:.1f} µs, {'within' if ok else 'above'} the ceiling",
    )


def collective(*, busbw_bps: float, terms: TermsView) -> Judgement:
    if terms.busbw_floor_gbps is None:
        return Judgement(
            Verdict.NONE,
            "no bus bandwidth floor in the contract",
            f"bus bandwidth {format_bps(busbw_bps)}",
        )
    floor = terms.busbw_floor_gbps * GIGA
    rule = f"NCCL bus bandwidth >= {plain(terms.busbw_floor_gbps)} Gbps (terms v{terms.version})"
    ok = Decimal(str(busbw_bps)) >= floor
    return Judgement(
        Verdict.PASS if ok else Verdict.FAIL,
        rule,
        f"bus bandwidth {format_bps(busbw_bps)}, {'at or above' if ok else 'below'} "
        f"{format_bps(floor)}",
    )
