import json
import re
from decimal import Decimal

import pytest

from accounts.choices import Role
from portal import charts
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    amend_acknowledged,
    at,
    make_lease,
    make_run,
)
from tests.portal.support import active, client_for


def chart_json(page: str, element_id: str) -> dict:
    found = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page)
    return json.loads(found.group(1))


def points_of(svg: str) -> list[list[str]]:
    return [found.split() for found in re.findall(r'<polyline[^>]* points="([^"]*)"', svg)]


def test_downsample_keeps_at_most_300_points_and_the_extremes():
    points = [(float(i), 100.0 - (i % 97)) for i in range(10_000)]
    points[5_000] = (5_000.0, 1.0)  # one deep dip must survive
    kept = charts.downsample(points)
    assert len(kept) <= 300
    assert (5_000.0, 1.0) in kept
    assert [x for x, _ in kept] == sorted(x for x, _ in kept)


def test_short_series_are_kept_as_they_are():
    points = [(0.0, 1.0), (1.0, 2.0)]
    assert charts.downsample(points) == points


def test_svg_has_a_polyline_of_at_most_300_points_for_10000_samples_and_a_dashed_threshold():
    samples = [(float(i), 95.0 + (i % 7)) for i in range(10_000)]
    svg = charts.line_chart(
        [charts.Series("n1>n2", samples)],
        lines=[
            charts.Line.level("threshold 95%", 95.0),
            charts.Line.level("contracted", 100.0, False),
        ],
        x_labels=[(0.0, "11-01"), (9_999.0, "11-30")],
        title="throughput <per pair>",
    )
    assert svg.startswith("<svg")
    (polyline,) = points_of(svg)
    assert 2 < len(polyline) <= 300
    assert 'stroke-dasharray="6 4"' in svg
    assert "threshold 95% 95 Gbit/s" in svg
    assert "Gbit/s" in svg and "11-30" in svg
    assert "&lt;per pair&gt;" in svg  # labels are escaped


def test_an_empty_chart_still_renders_axes():
    svg = charts.line_chart([], lines=[charts.Line.level("threshold", 95.0)])
    assert "<polyline" not in svg
    assert "</svg>" in svg


# --- link state timeline ------------------------------------------------------------------


def test_bucket_states_marks_a_slice_down_when_any_sample_in_it_was_down():
    counts = [(0.0, 3, 0), (10.0, 2, 1), (25.0, 0, 0), (39.0, 1, 0), (40.0, 0, 9), (-1.0, 0, 5)]
    # Four slices of 10 over [0, 40): the sample at 40 and the one before 0 fall outside.
    assert charts.bucket_states(counts, start=0.0, end=40.0, buckets=4) == [
        charts.UP,
        charts.DOWN,
        charts.NO_DATA,
        charts.UP,
    ]


def test_bucket_states_of_nothing():
    assert charts.bucket_states([], start=0.0, end=10.0, buckets=2) == [charts.NO_DATA] * 2
    assert charts.bucket_states([(1.0, 1, 0)], start=5.0, end=5.0, buckets=3) == []


def test_runs_of_merges_equal_neighbours():
    states = ["up", "up", "down", "none", "none", "none", "up"]
    assert charts.runs_of(states) == [(0, 2, "up"), (2, 1, "down"), (3, 3, "none"), (6, 1, "up")]
    assert charts.runs_of([]) == []


def test_timeline_draws_one_rectangle_per_run_whatever_the_number_of_slices():
    states = [charts.UP] * 1000 + [charts.DOWN] * 3 + [charts.UP] * 997
    svg = charts.timeline_chart(
        [charts.Band("gz-01", states), charts.Band("mlx5_0:1", states, sub=True)],
        start=0.0,
        end=2000.0,
        state_labels={charts.UP: "up", charts.DOWN: "port down", charts.NO_DATA: "none"},
        span_text=lambda a, b: f"{a:.0f}-{b:.0f}",
        title="Link <state>",
    )
    assert svg.count('<rect class="up"') == 4 and svg.count('<rect class="down"') == 2
    # x from 150 to 700 over [0, 2000): the down run covers [1000, 1003).
    assert '<rect class="down" x="425.0" y="12" width="0.8"' in svg
    assert "<title>mlx5_0:1: port down, 1000-1003</title>" in svg
    assert "Link &lt;state&gt;" in svg and "<state>" not in svg


# --- steps, gaps, axis, legend -------------------------------------------------------------

DAY = 86_400.0


def contrast_on_white(colour: str) -> float:
    """WCAG 2 contrast ratio of ``#rrggbb`` on white."""

    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    luminance = 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)
    return 1.05 / (luminance + 0.05)


def test_the_contract_line_steps_up_where_the_amendment_takes_effect():
    """100 Gbit/s until day 10, 200 after, over 30 days. The plot runs from x=70 to 630
    (860 - 70 - 230 = 560 px), so day 10 is at 70 + 560 / 3 = 256.7. Values 98 to 200 start
    the axis at 0 (98 is below half of 200); the nice step for 200 / 5 = 40 is 50, and 200
    touches the top so the axis goes to 250: y = 20 + 210 - v / 250 x 210, 100 -> 146.0,
    200 -> 62.0."""
    samples = [(DAY * day, 98.0) for day in range(10)] + [
        (DAY * day, 195.0) for day in range(10, 30)
    ]
    contract = charts.Line("contracted", [(0.0, 100.0), (10 * DAY, 200.0)], dashed=False)
    svg = charts.line_chart(
        [charts.Series("n1>n2", samples)],
        lines=[contract],
        x_range=(0.0, 30 * DAY),
        max_gap=2.5 * DAY,
    )
    (path,) = re.findall(r'<path class="reference" d="([^"]*)"', svg)
    assert path == "M70.0,146.0H256.7V62.0H630.0"
    assert "contracted 100 → 200 Gbit/s" in svg
    data = charts.chart_data([], lines=[contract], x_range=(0.0, 30 * DAY))
    (line,) = data["series"]
    assert line["step"] is True
    assert line["points"] == [
        [0, 100.0],
        [864_000_000, 100.0],
        [864_000_000, 200.0],
        [2_592_000_000, 200.0],
    ]


def test_a_step_before_the_window_starts_at_the_window_and_none_leaves_a_hole():
    line = charts.Line("floor", [(-5.0, 150.0), (10.0, None), (20.0, 160.0)])
    data = charts.chart_data([], lines=[line], x_range=(0.0, 30.0))
    assert data["series"][0]["points"] == [
        [0, 150.0],
        [10_000, 150.0],
        [10_000, None],
        [20_000, 160.0],
        [30_000, 160.0],
    ]
    svg = charts.line_chart([], lines=[line], x_range=(0.0, 30.0))
    (path,) = re.findall(r'<path class="reference" d="([^"]*)"', svg)
    assert path.count("M") == 2  # two pieces: no line where no floor is set


def test_a_gap_breaks_the_line():
    """Hourly points for hours 0-5 and 20-25: more than 2.5 hours apart at 5 -> 20."""
    hours = [(3600.0 * hour, 100.0 + hour) for hour in (*range(6), *range(20, 26))]
    broken = charts.line_chart([charts.Series("n1>n2", hours)], max_gap=2.5 * 3600)
    assert [len(points) for points in points_of(broken)] == [6, 6]
    joined = charts.line_chart([charts.Series("n1>n2", hours)])
    assert [len(points) for points in points_of(joined)] == [12]
    data = charts.chart_data([charts.Series("n1>n2", hours)], max_gap=2.5 * 3600)
    points = data["series"][0]["points"]
    assert len(points) == 13 and points[6] == [(5 * 3_600_000 + 20 * 3_600_000) // 2, None]


def test_ticks_are_nice_and_the_axis_leaves_out_zero_for_data_far_from_it():
    # 180 to 200: step 20 / 5 = 4 -> 5; both ends touch a tick so each gets one more.
    assert charts.y_axis([180.0, 200.0]).ticks == (175, 180, 185, 190, 195, 200, 205)
    assert charts.y_axis([180.0, 200.0]).from_zero is False
    # 0 to 192 (the old axis: 38.4, 76.8, ...): step 38.4 -> 50.
    assert charts.y_axis([0.0, 192.0]).ticks == (0, 50, 100, 150, 200)
    # 0.2 to 0.31 Gbit/s: step 0.022 -> 0.025 (2.5 x 10^-2); 0.2 is above half of 0.31,
    # so the axis starts a step below 0.2.
    assert charts.y_axis([0.2, 0.31]).ticks == (0.175, 0.2, 0.225, 0.25, 0.275, 0.3, 0.325)
    svg = charts.line_chart([charts.Series("n1>n2", [(0.0, 180.0), (1.0, 200.0)])])
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)
    assert ticks == [f"{value} Gbit/s" for value in range(175, 206, 5)]


def test_legend_names_every_line_and_its_text_is_readable_on_white():
    series = [charts.Series(f"n{i}>n{i + 1}", [(0.0, 1.0), (1.0, 2.0)]) for i in range(7)]
    lines = [
        charts.Line.level("threshold 95%", 1.9),
        charts.Line.level("contracted", 2.0, False, charts.CONTRACT_COLOUR),
    ]
    svg = charts.line_chart(series, lines=lines)
    legend = re.findall(r'<text class="legend"[^>]* fill="(#[0-9a-f]{6})">([^<]*)</text>', svg)
    assert [text for _colour, text in legend] == [
        *(f"n{i}&gt;n{i + 1}" for i in range(7)),
        "threshold 95% 1.9 Gbit/s",
        "contracted 2 Gbit/s",
    ]
    assert "all" not in [text for _colour, text in legend]
    for colour, text in legend:
        assert contrast_on_white(colour) >= 4.5, (text, colour, contrast_on_white(colour))
    for colour in (*charts.COLOURS, charts.THRESHOLD_COLOUR, charts.CONTRACT_COLOUR):
        assert contrast_on_white(colour) >= 4.5, colour


def test_down_is_hatched_not_only_red():
    svg = charts.timeline_chart(
        [charts.Band("gz-01", [charts.UP, charts.DOWN, charts.NO_DATA])], start=0.0, end=3.0
    )
    assert f'<pattern id="{charts.DOWN_PATTERN}"' in svg
    assert re.search(r'<rect class="down"[^>]* fill="url\(#timeline-down\)"', svg)
    assert svg.count('fill="url(#timeline-down)"') == 2  # the band and the legend


# --- on the lease page ---------------------------------------------------------------------


@pytest.mark.django_db
def test_lease_page_contract_line_follows_the_amendment_and_the_timeline_the_range():
    """Contracted 100 Gbit/s from the lease's start (2026-11-01), 200 from 2026-11-10; the
    30-day window runs from 2026-10-21 12:00 to NOW (2026-11-20 12:00): no contract line
    before the lease, 100 from 11-01, 200 from 11-10. The NCCL run (target "all") is named
    "bus bandwidth"."""
    member = MembershipFactory(role=Role.VIEWER)
    lease = active(make_lease(tenant=member.tenant, nodes=[NodeFactory()]))
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-10 00:00"),
        changes={"contracted_bandwidth_gbps": Decimal("200")},
        reason="Upgrade.",
    )
    make_run(lease, slot=at("2026-11-05 00:00"), measured_bps=98 * 10**9)
    make_run(
        lease,
        kind="collective",
        tool="all_reduce_perf",
        target="all",
        pattern="all_nodes",
        slot=at("2026-11-18 00:00"),
        measured_bps=170 * 10**9,
    )
    client = client_for(member.user)
    page = client.get(f"/leases/{lease.pk}/").content.decode()
    data = chart_json(page, "throughput-data")

    def ms(text: str) -> int:
        return round(at(text).timestamp() * 1000)

    contract = next(one for one in data["series"] if one["name"] == "contracted")
    assert contract["points"] == [
        [ms("2026-10-21 12:00"), None],
        [ms("2026-11-01 00:00"), 100.0],
        [ms("2026-11-10 00:00"), 100.0],
        [ms("2026-11-10 00:00"), 200.0],
        [ms("2026-11-20 12:00"), 200.0],
    ]
    threshold = next(one for one in data["series"] if one["name"].startswith("threshold"))
    assert [y for _x, y in threshold["points"]] == [None, 95.0, 95.0, 190.0, 190.0]
    assert "contracted 100 → 200 Gbit/s" in page
    assert [one["name"] for one in chart_json(page, "busbw-data")["series"]] == ["bus bandwidth"]
    assert '<figure id="throughput" data-chart="throughput-data">' in page
    assert "portal/vendor/charts.min.js" in page
    week = client.get(f"/leases/{lease.pk}/?days=7").content.decode()
    assert "No link check in the last 7 days." in week
