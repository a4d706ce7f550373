"""Server-rendered SVG line charts: pure, no Django. Points are (x, y) floats; a series is
downsampled to at most ``max_points`` with min/max buckets, so spikes and dips survive."""

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

MAX_POINTS = 300
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")

Point = tuple[float, float]


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[Point]


@dataclass(frozen=True)
class Line:
    """A horizontal reference line, e.g. the SLA threshold (dashed) or the contract."""

    label: str
    y: float
    dashed: bool = True


def downsample(points: Sequence[Point], max_points: int = MAX_POINTS) -> list[Point]:
    """At most ``max_points`` points, in x order: each of max_points // 2 buckets of
    consecutive points keeps its lowest and its highest point."""
    if len(points) <= max_points:
        return list(points)
    buckets = max(1, max_points // 2)
    size = len(points) / buckets
    kept: list[Point] = []
    for index in range(buckets):
        bucket = points[int(index * size) : int((index + 1) * size)]
        if not bucket:
            continue
        low = min(bucket, key=lambda point: point[1])
        high = max(bucket, key=lambda point: point[1])
        kept.extend(sorted({low, high}))
    return kept


def _ticks(top: float, count: int = 5) -> list[float]:
    step = top / count
    return [step * index for index in range(count + 1)]


def _number(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def line_chart(
    series: Sequence[Series],
    *,
    lines: Sequence[Line] = (),
    x_labels: Sequence[tuple[float, str]] = (),
    y_unit: str = "Gbit/s",
    title: str = "",
    width: int = 720,
    height: int = 260,
    max_points: int = MAX_POINTS,
) -> str:
    """An inline <svg> document fragment: one polyline per series, y from 0, labelled in
    ``y_unit``; ``lines`` are horizontal reference lines, ``x_labels`` (x, text) ticks."""
    left, right, top_margin, bottom = 70, 150, 20, 30
    plot_w, plot_h = width - left - right, height - top_margin - bottom
    sampled = [(one, downsample(one.points, max_points)) for one in series]
    xs = [x for _, points in sampled for x, _y in points] + [x for x, _ in x_labels]
    ys = [y for _, points in sampled for _x, y in points] + [line.y for line in lines]
    x_min, x_max = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_max == x_min:
        x_max = x_min + 1
    y_top = (max(ys) if ys else 1.0) * 1.1 or 1.0

    def px(x: float) -> float:
        return left + (x - x_min) / (x_max - x_min) * plot_w

    def py(y: float) -> float:
        return top_margin + plot_h - y / y_top * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{left}" y="{top_margin}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#999"/>',
    ]
    for tick in _ticks(y_top / 1.1 if ys else 1.0):
        y = py(tick)
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
            f"{_number(tick)} {escape(y_unit)}</text>"
        )
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
    for x, text in x_labels:
        parts.append(
            f'<text x="{px(x):.1f}" y="{height - 8}" text-anchor="middle" font-size="11">'
            f"{escape(text)}</text>"
        )
    legend_y = top_margin + 12
    for index, (one, points) in enumerate(sampled):
        colour = COLOURS[index % len(COLOURS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}">'
            f"<title>{escape(one.label)}</title></polyline>"
        )
        parts.append(
            f'<text x="{left + plot_w + 8}" y="{legend_y}" font-size="11" fill="{colour}">'
            f"{escape(one.label)}</text>"
        )
        legend_y += 14
    for line in lines:
        y = py(line.y)
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        parts.append(
            f'<line class="reference" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" '
            f'y2="{y:.1f}" stroke="#d62728"{dash}/>'
        )
        parts.append(
            f'<text x="{left + plot_w + 8}" y="{y + 4:.1f}" font-size="11" fill="#d62728">'
            f"{escape(line.label)} {_number(line.y)} {escape(y_unit)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
