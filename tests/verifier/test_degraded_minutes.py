"""The pure rule of degraded minutes (``gpulease_verify.compliance``), without a database:
which minutes of a link-check slot a failed throughput slot covers, and what a slot gives
availability under each weight."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

from gpulease_verify.compliance import Availability, ShortSpans, slot_availability
from gpulease_verify.samples import short_spans


def utc(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 2, hour, minute, tzinfo=UTC)


def test_a_throughput_slot_is_short_when_a_sample_failed_and_none_was_excluded():
    hour = timedelta(hours=1)
    slots = [
        (utc(10), utc(10) + hour, "passed"),
        (utc(10), utc(10) + hour, "failed"),  # one pair of the 10:00 batch failed
        (utc(11), utc(11) + hour, "passed"),
        (utc(12), utc(12) + hour, "failed"),
        (utc(12), utc(12) + hour, "excluded"),  # in a maintenance window: not short
        (utc(13), utc(13) + hour, "unknown"),  # measured nothing: no evidence of a shortfall
    ]
    assert short_spans(slots) == [(utc(10), utc(11))]


def test_spans_merge_and_a_minute_counts_when_it_begins_inside_one():
    spans = ShortSpans([(utc(10, 30), utc(12)), (utc(10), utc(11)), (utc(13), utc(13))])
    # [10:00, 11:00) and [10:30, 12:00) are one span [10:00, 12:00); [13:00, 13:00) is empty.
    assert (spans.starts, spans.ends) == ([utc(10)], [utc(12)])
    assert spans.covers(utc(10)) and spans.covers(utc(11, 59))
    assert not spans.covers(utc(12)) and not spans.covers(utc(9, 59))
    # A 5-minute slot from 11:58: minutes 11:58 and 11:59 begin inside, 12:00..12:02 not.
    assert spans.minutes_within(start=utc(11, 58), minutes=5) == 2


def test_what_a_slot_gives_under_each_weight():
    spans = ShortSpans([(utc(10), utc(11))])
    # A 5-minute slot at 10:57 with the links up: 3 minutes degraded (10:57..10:59), 2 pass.
    up = slot_availability(
        outcome="available", slot=utc(10, 57), minutes=5, short=spans, degraded_weight=D("0.5")
    )
    assert up.counts() == {
        "pass_minutes": 2,
        "degraded_minutes": 3,
        "down_minutes": 0,
        "no_evidence_minutes": 0,
    }
    assert up.degraded_weighted == D("1.5")
    # Down and no evidence are never degraded, whatever throughput measured.
    down = slot_availability(outcome="unavailable", slot=utc(10), minutes=5, short=spans)
    unknown = slot_availability(outcome="unknown", slot=utc(10, 5), minutes=5, short=spans)
    assert (down.down_minutes, down.degraded_minutes) == (5, 0)
    assert (unknown.no_evidence_minutes, unknown.degraded_minutes) == (5, 0)
    assert slot_availability(outcome=None, slot=utc(10), minutes=5, short=spans) == Availability()
    # Together: 15 minutes, 5 available of which 3 degraded at 0.5:
    # (5 - 1.5) / 15 = 23.333 %; weight 0 would give 5 / 15 = 33.333 %.
    total = up + down + unknown
    assert total.percent == D("23.333")
    assert (up + down + unknown).total_minutes == 15
    unweighted = slot_availability(outcome="available", slot=utc(10, 57), minutes=5, short=spans)
    assert (unweighted + down + unknown).percent == D("33.333")
