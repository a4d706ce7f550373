"""The fabric health rules, hand-checked: each test builds a port's samples poll by poll."""

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gpulease_verify.fabric import link_state_mismatches
from gpulease_verify.health import (
    RULE_SETS,
    RULES,
    Finding,
    HealthThresholds,
    calm,
    evaluate,
    fields_of,
    mergeable,
    quiet,
    rule_set,
    unavailable_only,
    unavailable_seconds,
    witness_check,
)
from gpulease_verify.telemetry import PortSample, sample_entry
from gpulease_verify.witness import link_block, link_state_dispute

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
PORT = "mlx5_0:1"


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def sample(end: float, *, up=True, cycles=0, seconds=30.0, reset=False, **deltas) -> PortSample:
    return PortSample(PORT, t(end), seconds, up, cycles, deltas, reset)


def polls(ends, **kw):
    return [sample(end, **kw) for end in ends]


def rule(findings: list[Finding], name: str) -> list[Finding]:
    return [finding for finding in findings if finding.rule == name]


# --- flaps ----------------------------------------------------------------------------


def test_three_cycles_30_s_apart_between_two_60_s_polls_are_a_flap():
    # cycles at 10:01:10 and 10:01:40 (one 60 s interval), 10:02:10 (the next)
    samples = [
        sample(60, seconds=60),
        sample(120, seconds=60, cycles=2),
        sample(180, seconds=60, cycles=1),
    ]
    [flap] = rule(evaluate(samples, now=t(180)), "link_flap")
    assert (flap.severity, flap.version, flap.start, flap.end) == ("fatal", 1, t(60), None)
    assert flap.detail.startswith("3 down-then-up cycles between 10:01:00 and 10:03:00")


def test_two_cycles_are_not_a_flap():
    samples = [
        sample(60, seconds=60),
        sample(120, seconds=60, cycles=1),
        sample(180, seconds=60, cycles=1),
    ]
    assert rule(evaluate(samples, now=t(180)), "link_flap") == []


def test_cycles_packed_into_one_30_s_interval_count_as_at_most_two():
    assert rule(evaluate([sample(30, cycles=5)], now=t(30)), "link_flap") == []
    [flap] = rule(evaluate([sample(30, cycles=5), sample(60, cycles=1)], now=t(60)), "link_flap")
    assert flap.detail.startswith("3 down-then-up cycles")


def test_cycles_outside_the_10_minute_window_do_not_add_up():
    samples = [
        sample(30, cycles=1),
        sample(330, cycles=1, seconds=300),
        sample(660, cycles=1, seconds=330),
    ]
    assert rule(evaluate(samples, now=t(660)), "link_flap") == []


def test_a_flap_holds_down_for_10_minutes_after_the_last_cycle():
    samples = polls([30], cycles=1) + polls([60], cycles=1) + polls([90], cycles=1)
    samples += polls(range(120, 30 * 40, 30))  # up, quiet from 10:01:30 on
    # recovery: the poll at 10:01:30 that ended the last cycle interval found it up
    [open_flap] = rule(evaluate(samples, now=t(90 + 599)), "link_flap")
    assert open_flap.end is None
    [closed] = rule(evaluate(samples, now=t(30 * 39)), "link_flap")
    assert closed.end == t(90 + 600)


# --- drops ----------------------------------------------------------------------------


def test_down_for_4_minutes_is_a_drop():
    samples = polls([0, 30], seconds=30) + polls(range(60, 301, 30), up=False)
    [drop] = rule(evaluate(samples, now=t(300)), "link_drop")
    assert (drop.start, drop.end, drop.severity) == (t(30), None, "fatal")
    assert drop.detail == "down at every poll from 10:01:00 to 10:05:00 (240 s; limit 240 s)"


def test_down_for_3_minutes_is_not():
    samples = polls([0, 30]) + polls(range(60, 241, 30), up=False) + polls([270, 300])
    assert rule(evaluate(samples, now=t(300)), "link_drop") == []


def test_a_drop_stays_open_10_minutes_after_recovery_then_closes():
    samples = polls([30]) + polls(range(60, 331, 30), up=False) + polls(range(360, 1021, 30))
    # recovered at the poll of 10:06:00 (360 s)
    [still_open] = rule(evaluate(samples, now=t(959)), "link_drop")
    assert still_open.end is None
    [closed] = rule(evaluate(samples, now=t(1020)), "link_drop")
    assert (closed.start, closed.end) == (t(30), t(960))
    # no later poll, but the hold-down has passed by ``now``: closed at its end
    [closed_by_now] = rule(evaluate(samples[:-3], now=t(2000)), "link_drop")
    assert closed_by_now.end == t(960)


def test_going_down_again_within_the_hold_down_restarts_it():
    samples = (
        polls([30])
        + polls(range(60, 331, 30), up=False)
        + polls(range(360, 600, 30))
        + polls([600], up=False)  # down again at 10:10:00, inside the hold-down
        + polls(range(630, 1400, 30))
    )
    [drop] = rule(evaluate(samples, now=t(1400)), "link_drop")
    assert drop.end == t(630 + 600)


# --- counter rules --------------------------------------------------------------------


def hour_of_symbol_errors(total: int) -> list[PortSample]:
    """60 polls a minute apart over one hour, ``total`` symbol errors spread over them."""
    per_poll = [total // 60 + (1 if i < total % 60 else 0) for i in range(60)]
    return [sample(60 * (i + 1), seconds=60, symbol_error=n) for i, n in enumerate(per_poll)]


def test_121_symbol_errors_an_hour_are_fatal_119_are_not():
    [finding] = rule(evaluate(hour_of_symbol_errors(121), now=t(3600)), "ib_symbol_errors")
    assert (finding.severity, finding.start, finding.end) == ("fatal", t(3540), None)
    assert (
        finding.detail == "121 symbol errors in the 60 minutes ending 11:00:00 (limit 120 an hour)"
    )
    assert rule(evaluate(hour_of_symbol_errors(119), now=t(3600)), "ib_symbol_errors") == []
    assert rule(evaluate(hour_of_symbol_errors(120), now=t(3600)), "ib_symbol_errors") == []


def test_any_link_downed_increase_is_fatal_and_a_clean_interval_closes_it():
    samples = [sample(30), sample(60, link_downed=1), sample(90)]
    [finding] = rule(evaluate(samples, now=t(90)), "ib_fatal_counters")
    assert (finding.severity, finding.start, finding.end) == ("fatal", t(30), t(90))
    assert finding.detail == "link_downed +1 between 10:00:30 and 10:01:00"
    samples = [sample(30, local_link_integrity_errors=1, excessive_buffer_overrun_errors=2)]
    [finding] = rule(evaluate(samples, now=t(30)), "ib_fatal_counters")
    assert finding.end is None
    assert "local_link_integrity_errors +1, excessive_buffer_overrun_errors +2" in finding.detail


def test_a_reset_interval_neither_opens_nor_closes():
    samples = [sample(30, link_downed=1), sample(60, reset=True), sample(90, link_downed=1)]
    [finding] = rule(evaluate(samples, now=t(90)), "ib_fatal_counters")
    assert finding.end is None
    assert rule(evaluate([sample(30, reset=True)], now=t(30)), "ib_fatal_counters") == []


def test_link_error_recovery_above_5_a_minute():
    [finding] = rule(
        evaluate([sample(30, link_error_recovery=3)], now=t(30)), "ib_link_error_recovery"
    )
    assert (
        "3 link error recoveries in 30 s" in finding.detail and "6.0 per minute" in finding.detail
    )
    assert (
        rule(evaluate([sample(30, link_error_recovery=2)], now=t(30)), "ib_link_error_recovery")
        == []
    )


def test_roce_congestion_over_its_rate_is_degraded():
    [finding] = rule(evaluate([sample(30, tx_prio3_pause=31500)], now=t(30)), "roce_congestion")
    assert finding.severity == "degraded"
    assert finding.detail == (
        "RoCE congestion between 10:00:00 and 10:00:30: tx_prio3_pause 1050.0/s (limit 1000/s)"
    )
    assert rule(evaluate([sample(30, tx_prio3_pause=30000)], now=t(30)), "roce_congestion") == []
    [cnp] = rule(
        evaluate([sample(30, np_cnp_sent=400000, out_of_sequence=301)], now=t(30)),
        "roce_congestion",
    )
    assert "np_cnp_sent 13333.3/s (limit 10000/s)" in cnp.detail
    assert "out_of_sequence 10.0/s (limit 10/s)" in cnp.detail
    # the durations and non-congestion counters are not rated
    assert (
        rule(
            evaluate([sample(30, rx_prio3_pause_duration=10**9, rx_bytes=10**12)], now=t(30)),
            "roce_congestion",
        )
        == []
    )


def test_findings_of_several_ports_are_grouped_by_port():
    other = PortSample("eth0", t(30), 30.0, True, 0, {"link_downed": 1})
    found = evaluate([sample(30, link_downed=1), other], now=t(30))
    assert sorted(f.port for f in found) == ["eth0", PORT]


def test_rules_are_versioned_in_sets():
    assert RULE_SETS[1] == {
        "ib_symbol_errors": 1,
        "ib_link_error_recovery": 1,
        "ib_fatal_counters": 1,
        "link_flap": 1,
        "link_drop": 1,
        "roce_congestion": 1,
    }
    assert (
        RULES
        == RULE_SETS[2]
        == {
            **RULE_SETS[1],
            "link_flap": 2,
            "link_drop": 2,
            "link_speed_downgrade": 1,
            "ib_counter_saturated": 1,
        }
    )
    with pytest.raises(ValueError, match="unknown health rule set 3"):
        rule_set(3)
    # A bundle of set 1 states exactly the thresholds it always did.
    assert set(fields_of(HealthThresholds(), 1)) == {
        "symbol_errors_per_hour", "symbol_error_window_s", "link_error_recovery_per_minute",
        "flap_cycles", "flap_min_spacing_s", "flap_window_s", "drop_after_s", "hold_down_s",
        "pfc_pause_per_s", "ecn_marked_per_s", "cnp_sent_per_s", "cnp_handled_per_s",
        "out_of_sequence_per_s", "out_of_buffer_per_s", "roce_slow_restart_per_s",
    }  # fmt: skip
    assert {"flap_down_s", "flap_lookback_s", "flap_auto_clear_s"} <= set(
        fields_of(HealthThresholds(), 2)
    )
    assert "flap_window_s" not in fields_of(HealthThresholds(), 2)


# --- thresholds -----------------------------------------------------------------------


def test_thresholds_from_terms_override_the_defaults():
    limits = HealthThresholds.from_terms(
        {"drop_after_s": 120, "flap_cycles": "2", "pfc_pause_per_s": Decimal("50.5")}
    )
    assert (limits.drop_after_s, limits.flap_cycles, limits.pfc_pause_per_s) == (120.0, 2, 50.5)
    assert limits.symbol_errors_per_hour == 120 and limits.hold_down_s == 600
    samples = [sample(0, seconds=0), *polls(range(30, 151, 30), up=False)]
    assert rule(evaluate(samples, limits, now=t(150)), "link_drop")
    assert not rule(evaluate(samples, now=t(150)), "link_drop")
    assert (
        HealthThresholds.from_terms({}) == HealthThresholds() == HealthThresholds.from_terms(None)
    )


@pytest.mark.parametrize(
    ("terms", "words"),
    [
        ({"drop_after": 10}, "unknown health threshold 'drop_after'"),
        ({"drop_after_s": -1}, "must not be negative"),
        ({"drop_after_s": "soon"}, "must be a number"),
        ({"drop_after_s": True}, "must be a number"),
        ({"drop_after_s": "NaN"}, "finite"),
        ({"flap_cycles": 2.5}, "whole number"),
        ({"flap_cycles": 0}, "flap_cycles must be a whole number >= 1"),
        ({"flap_window_s": 0}, "greater than 0"),
    ],
)
def test_bad_terms_are_refused_with_a_sentence(terms, words):
    with pytest.raises(ValueError, match=words):
        HealthThresholds.from_terms(terms)


# --- unavailability -------------------------------------------------------------------


def test_unavailable_seconds_hand_checked():
    samples = [
        sample(30),  # up
        sample(60, cycles=1),  # [10:00:30, 10:01:00): a cycle, counted whole
        sample(90, up=False),  # [10:01:00, 10:01:30): down
        sample(120, up=False),  # [10:01:30, 10:02:00): down
        sample(150),  # up again
        sample(180, up=None),  # unknown: not counted
    ]
    # [10:00:45, 10:02:15): 15 s of the cycle interval + 30 + 30
    assert unavailable_seconds(samples, start=t(45), end=t(135)) == 75.0
    assert unavailable_seconds(samples, start=t(0), end=t(200)) == 90.0
    assert unavailable_seconds(samples, start=t(200), end=t(100)) == 0.0
    with pytest.raises(ValueError, match="one port"):
        unavailable_seconds(
            [*samples, PortSample("eth0", t(30), 30.0, False)], start=t(0), end=t(60)
        )


# --- witness --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "switch", "tolerance", "agrees", "difference"),
    [
        (110, 100, 10, True, 10.0),  # exactly at the tolerance agrees
        (90, 100, 10, True, 10.0),
        (Decimal("110.0001"), 100, 10, False, 10.0001),
        (89, 100, 10, False, 11.0),
        (100.3, 100, 0.3, True, 0.3),  # exact in Decimal, 0.30000000000000426 in floats
        (100.5, 100, Decimal("0.5"), True, 0.5),
        (0, 0, 0, True, 0.0),
        (0, 100, 5, False, 100.0),
    ],
)
def test_witness_tolerance_edges(host, switch, tolerance, agrees, difference):
    check = witness_check(host_value=host, switch_value=switch, tolerance_percent=tolerance)
    assert (check.agrees, check.difference_percent) == (agrees, difference)
    assert check.detail


def test_a_switch_that_saw_nothing_disagrees_with_a_busy_host():
    check = witness_check(host_value=5, switch_value=0, tolerance_percent=50)
    assert (check.agrees, math.isinf(check.difference_percent)) == (False, True)
    assert "the switch counted nothing" in check.detail


def test_witness_refuses_negative_figures():
    with pytest.raises(ValueError, match="tolerance_percent"):
        witness_check(host_value=1, switch_value=1, tolerance_percent=-1)


# --- rule set 2: gpud's flaps (store/scan_flaps.go) ------------------------------------
#
# ``states`` builds a port's polls from (seconds after T0, state): each interval runs from
# the poll before. True is ACTIVE, False down.


def states(*polls_: tuple[float, bool | None], cycles: dict[float, int] | None = None):
    found, last = [], None
    for end, up in polls_:
        seconds = 0.0 if last is None else end - last
        found.append(sample(end, up=up, seconds=seconds, cycles=(cycles or {}).get(end, 0)))
        last = end
    return found


def flap_event(start: float, down_for: float) -> list[tuple[float, bool]]:
    """Down at ``start`` and at ``start + down_for``, ACTIVE 10 s later."""
    return [(start, False), (start + down_for, False), (start + down_for + 10, True)]


def v2(samples, now, **kw):
    return evaluate(samples, now=t(now), rules=2, **kw)


def test_a_down_seen_26_s_apart_three_times_is_a_flap_24_s_is_not():
    flapping = states((0, True), *flap_event(60, 26), *flap_event(200, 26), *flap_event(400, 26))
    [flap] = rule(v2(flapping, 600), "link_flap")
    # gpud reports the poll where the third event came back (its breach of the threshold).
    assert (flap.version, flap.severity, flap.start, flap.end) == (2, "fatal", t(436), None)
    assert flap.detail == (
        "3 flaps (down at two polls at least 25 s apart, then active) within 12 h: "
        "down 10:01:00, active 10:01:36; down 10:03:20, active 10:03:56; "
        "down 10:06:40, active 10:07:16"
    )
    short = states((0, True), *flap_event(60, 24), *flap_event(200, 24), *flap_event(400, 24))
    assert rule(v2(short, 600), "link_flap") == []
    # 25 s exactly is enough ("at least", as gpud's elapsed < threshold is not).
    exact = states((0, True), *flap_event(60, 25), *flap_event(200, 25), *flap_event(400, 25))
    assert rule(v2(exact, 600), "link_flap")


def test_three_flaps_within_11_h_59_min_count_12_h_01_min_do_not():
    def day(last_start: float):
        return states(
            (0, True), *flap_event(100, 30), *flap_event(3600, 30), *flap_event(last_start, 30)
        )

    # events come back at 140 s and at last_start + 40 s
    within = 140 + 11 * 3600 + 59 * 60 - 40
    beyond = 140 + 12 * 3600 + 1 * 60 - 40
    [flap] = rule(v2(day(within), within + 100), "link_flap")
    assert flap.start == t(within + 40)
    assert rule(v2(day(beyond), beyond + 100), "link_flap") == []


def test_blips_between_polls_and_a_single_down_poll_are_not_flaps():
    # Five down-then-up cycles the counters saw between polls, and a down seen at one
    # poll only: no event of gpud's, but each still takes availability.
    series = states(
        (0, True), (30, True), (60, True), (90, False), (120, True), (150, True),
        cycles={30: 2, 60: 2, 150: 1, 90: 1},
    )  # fmt: skip
    assert rule(v2(series, 200), "link_flap") == []
    assert unavailable_seconds(series, start=t(0), end=t(200)) == 30 + 30 + 30 + 30


def test_a_flap_is_sticky_after_the_port_recovers_until_an_operator_clears_it():
    flapping = states((0, True), *flap_event(60, 30), *flap_event(200, 30), *flap_event(400, 30))
    two_days_up = [sample(440 + 300 * n, seconds=300) for n in range(1, 577)]
    [flap] = rule(v2(flapping + two_days_up, 440 + 300 * 576), "link_flap")
    assert (flap.start, flap.end) == (t(440), None)
    # gpud's set-healthy: the finding ends at the clearance...
    [cleared] = rule(v2(flapping + two_days_up, 9000, cleared=[t(5000)]), "link_flap")
    assert (cleared.start, cleared.end) == (t(440), t(5000))
    # ...and what came before it no longer counts: two events before, one after, no flap.
    before_and_after = states(
        (0, True), *flap_event(60, 30), *flap_event(200, 30), (300, True),
        *flap_event(400, 30), (500, True),
    )  # fmt: skip
    assert rule(v2(before_and_after, 600, cleared=[t(300)]), "link_flap") == []
    # three fresh events after it open a new finding
    again = flapping + states(*flap_event(1000, 30), *flap_event(1100, 30), *flap_event(1200, 30))
    first, second = rule(v2(again, 1300, cleared=[t(600)]), "link_flap")
    assert (first.end, second.start, second.end) == (t(600), t(1240), None)


def test_an_auto_clear_window_ends_a_flap_once_the_port_has_been_up_that_long():
    limits = HealthThresholds(flap_auto_clear_s=600)
    flapping = states((0, True), *flap_event(60, 30), *flap_event(200, 30), *flap_event(400, 30))
    up = [sample(440 + 30 * n) for n in range(1, 30)]
    [flap] = rule(evaluate(flapping + up, limits, now=t(440 + 30 * 29), rules=2), "link_flap")
    assert flap.end == t(440 + 600)  # up since the poll that ended the third event


# --- rule set 2: gpud's drops (store/scan_drops.go) -------------------------------------


def test_down_for_3_min_59_s_is_not_a_drop_4_min_is():
    assert rule(v2(states((0, True), (30, False), (269, False)), 269), "link_drop") == []
    [drop] = rule(v2(states((0, True), (30, False), (270, False)), 270), "link_drop")
    # from the first poll that found it down (gpud: "down since" that snapshot)
    assert (drop.version, drop.start, drop.end) == (2, t(30), None)
    assert drop.detail == "down at every poll from 10:00:30 to 10:04:30 (240 s; limit 240 s)"


def test_a_drop_is_unhealthy_10_minutes_after_recovery():
    series = states((0, True), (30, False), (300, False), (330, True))
    series += [sample(330 + 30 * n) for n in range(1, 25)]
    [still] = rule(v2(series, 929), "link_drop")
    assert still.end is None
    [drop] = rule(v2(series, 330 + 30 * 24), "link_drop")
    assert (drop.start, drop.end) == (t(30), t(930))


def test_a_bounce_while_down_starts_the_four_minutes_afresh():
    # down at 30 s; at 150 s still down, but a new down cycle in between: it came back
    # and went down again (gpud: link_downed moved, "potential flap", no drop).
    series = states(
        (0, True), (30, False), (150, False), (270, False), (390, False), cycles={150: 1}
    )
    assert rule(v2(series[:4], 270), "link_drop") == []
    [drop] = rule(v2(series, 390), "link_drop")
    assert drop.start == t(150)


def test_a_clearance_ends_a_drop_and_a_port_still_down_drops_again_4_minutes_later():
    series = states((0, True), (30, False), (300, False), (360, False), (600, False))
    first, second = rule(v2(series, 600, cleared=[t(330)]), "link_drop")
    assert (first.start, first.end) == (t(30), t(330))
    assert (second.start, second.end) == (t(360), None)


# --- rule set 2: a port below its rate, saturated counters -------------------------------


def slow(end: float, rate: float | None = 200.0, expected: float | None = 400.0, **kw):
    return replace(sample(end, **kw), rate_gbps=rate, expected_gbps=expected)


def test_a_port_up_below_its_expected_rate_is_fatal_and_closes_at_its_rate():
    series = [sample(30), slow(60), slow(360, seconds=300), sample(390, up=False), sample(420)]
    [finding] = rule(v2(series, 420), "link_speed_downgrade")
    assert (finding.severity, finding.start, finding.end) == ("fatal", t(30), t(420))
    assert finding.detail == (
        "up at 200 Gb/s, below the 400 Gb/s expected of the port (50 %), at the poll of 10:01:00"
    )
    # a share above speed_fatal_below_percent is only degraded
    limits = HealthThresholds(speed_fatal_below_percent=50)
    [degraded] = rule(evaluate(series, limits, now=t(420), rules=2), "link_speed_downgrade")
    assert degraded.severity == "degraded"
    # set 1 has no such rule
    assert rule(evaluate(series, now=t(420)), "link_speed_downgrade") == []


def test_saturated_counters_are_degraded_while_they_stay_at_their_maximum():
    stuck = replace(sample(60), saturated=("excessive_buffer_overrun_errors", "link_downed"))
    series = [sample(30, seconds=0), stuck, replace(stuck, at=t(360), seconds=300), sample(390)]
    [finding] = rule(v2(series, 390), "ib_counter_saturated")
    assert (finding.severity, finding.start, finding.end) == ("degraded", t(30), t(390))
    assert finding.detail.startswith(
        "excessive_buffer_overrun_errors at 15 (4-bit maximum), link_downed at 255 (8-bit "
        "maximum) at the poll of 10:01:00: a saturated counter counts nothing more"
    )


def test_a_steady_downgrade_or_saturation_merges_but_is_never_quiet():
    steady = slow(60)
    assert calm(steady) and not quiet(steady)
    assert mergeable(steady, slow(90), None)
    assert not mergeable(steady, sample(90), None)  # back at its rate: a new row
    assert not mergeable(steady, slow(90, rate=100.0), None)
    assert not quiet(replace(sample(60), saturated=("symbol_error",)))


# --- disputed intervals -----------------------------------------------------------------


def test_a_disputed_down_counts_for_no_rule_and_no_availability():
    invented = [
        replace(s, disputed=s.up is False)
        for s in states((0, True), *flap_event(60, 30), *flap_event(200, 30), *flap_event(400, 30))
    ]
    assert rule(v2(invented, 600), "link_flap") == []
    assert unavailable_seconds(invented, start=t(0), end=t(600)) == 0.0
    assert unavailable_only(invented) == []
    # the counter that would claim the down is not believed either
    lie = replace(sample(30, cycles=1, link_downed=1), disputed=True)
    assert rule(evaluate([lie], now=t(30)), "ib_fatal_counters") == []
    assert rule(evaluate([replace(lie, disputed=False)], now=t(30)), "ib_fatal_counters")


def witnessed_batch(*, host_up, cycles, disputed, link):
    """A bundle's telemetry batch holding one interval of n1 data0 and its switch reading."""
    host = replace(sample(30, up=host_up, cycles=cycles), port="data0", disputed=disputed)
    return {
        "id": 7,
        "content": {
            "at": "2026-12-01T10:00:30Z",
            "samples": [sample_entry("n1", host)],
            "switch": [
                {"switch": "leaf1", "port": "h1-data", "oper_up": link["oper_up"], "link": link}
            ],
        },
    }


def switch_link(*, oper_up=True, last_change=500, since_up=True, since_change=500, uptime=9000):
    return link_block(
        node="n1",
        host_port="data0",
        oper_up=oper_up,
        last_change=last_change,
        uptime=uptime,
        since_oper_up=since_up,
        since_last_change=since_change,
        since_uptime=6000,
    )


@pytest.mark.parametrize(
    ("host_up", "cycles", "link", "disputed"),
    [
        (False, 1, switch_link(), True),  # down at the poll; the switch saw nothing
        (True, 2, switch_link(), True),  # two cycles between polls; nothing either
        (False, 1, switch_link(oper_up=False), False),  # the switch port is down too
        (True, 1, switch_link(last_change=8700), False),  # it changed state in between
        (True, 1, switch_link(since_up=False), False),  # it was down at the last reading
        (True, 1, switch_link(uptime=100), False),  # the agent restarted: cannot tell
        (True, 0, switch_link(oper_up=False), False),  # up throughout: never disputed
    ],
)
def test_the_link_state_witness(host_up, cycles, link, disputed):
    host = replace(sample(30, up=host_up, cycles=cycles), port="data0")
    sentence = link_state_dispute(host, switch="leaf1", port="h1-data", link=link)
    assert (sentence is not None) == disputed
    # The verifier recomputes the mark from the bundle, and names a wrong one either way.
    right = witnessed_batch(host_up=host_up, cycles=cycles, disputed=disputed, link=link)
    assert link_state_mismatches([right]) == ([], int(disputed))
    wrong = witnessed_batch(host_up=host_up, cycles=cycles, disputed=not disputed, link=link)
    [problem], _ = link_state_mismatches([wrong])
    assert problem.startswith("telemetry batch 7: n1 data0 is ")


def test_a_disputed_mark_without_a_switch_reading_is_named():
    # A server hiding a real outage from availability by marking it disputed.
    batch = witnessed_batch(host_up=False, cycles=1, disputed=True, link=switch_link())
    batch["content"]["switch"] = []
    [problem], disputed = link_state_mismatches([batch])
    assert disputed == 0
    assert problem == (
        "telemetry batch 7: n1 data0 is marked disputed without a switch reading that witnesses it"
    )
    sentence = link_state_dispute(
        replace(sample(30, up=False, cycles=1), port="data0"),
        switch="leaf1",
        port="h1-data",
        link=switch_link(),
    )
    assert sentence == (
        "data0 reported down at the poll between 10:00:00 and 10:00:30 UTC; switch leaf1 "
        "h1-data was up at both readings and its ifLastChange stayed 500: the switch never "
        "saw the link change"
    )
