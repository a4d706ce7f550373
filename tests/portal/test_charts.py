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
