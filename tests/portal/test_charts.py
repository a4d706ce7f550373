import re

from portal import charts


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
        lines=[charts.Line("threshold 95%", 95.0), charts.Line("contracted", 100.0, False)],
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
    svg = charts.line_chart([], lines=[charts.Line("threshold", 95.0)])
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
