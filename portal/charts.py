"""Server-rendered SVG line charts: pure, no Django. Points are (x, y) floats; a series is
downsampled to at most ``max_points`` with min/max buckets, so spikes and dips survive."""

from collections.abc import Callable, Sequence
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


def _text_width(text: str, font_size: float = 11) -> float:
    """Roughly how wide ``text`` is drawn: CJK characters take a full em, others about
    0.58 of one (enough to keep legend entries apart)."""
    return sum(font_size if ord(char) >= 0x2E80 else font_size * 0.58 for char in text)


def _number(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def line_chart(
    series: Sequence[Series],
    *,
    lines: Sequence[Line] = (),
    x_labels: Sequence[tuple[float, str]] = (),
    y_unit: str = "Gbit/s",
    title: str = "",
    width: int = 860,
    height: int = 260,
    max_points: int = MAX_POINTS,
) -> str:
    """An inline <svg> document fragment: one polyline per series, y from 0, labelled in
    ``y_unit``; ``lines`` are horizontal reference lines, ``x_labels`` (x, text) ticks."""
    left, right, top_margin, bottom = 70, 230, 20, 30
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
        # Named in the legend, below the series: at the line's own height the labels of
        # two close lines (contract and threshold) would overwrite each other.
        parts.append(
            f'<line x1="{left + plot_w + 8}" y1="{legend_y - 4}" x2="{left + plot_w + 22}" '
            f'y2="{legend_y - 4}" stroke="#d62728"{dash}/>'
            f'<text x="{left + plot_w + 26}" y="{legend_y}" font-size="11" fill="#d62728">'
            f"{escape(line.label)} {_number(line.y)} {escape(y_unit)}</text>"
        )
        legend_y += 14
    parts.append("</svg>")
    return "".join(parts)


# --- link state timeline ------------------------------------------------------------------

UP, DOWN, NO_DATA = "up", "down", "none"
STATE_COLOURS = {UP: "#2ca02c", DOWN: "#d62728", NO_DATA: "#dddddd"}

Count = tuple[float, int, int]  # (x, samples up, samples down)


def bucket_states(counts: Sequence[Count], *, start: float, end: float, buckets: int) -> list[str]:
    """The state of each of ``buckets`` equal slices of [start, end): down when any sample
    in it was down, up when it had samples and all were up, no data otherwise. Counts
    outside [start, end) are ignored; ``counts`` may already be pre-aggregated (an hour's
    totals at the hour's start), so a year of 5-minute samples arrives as a few rows."""
    if buckets <= 0 or end <= start:
        return []
    ups = [0] * buckets
    downs = [0] * buckets
    width = (end - start) / buckets
    for x, up, down in counts:
        if not start <= x < end:
            continue
        index = min(buckets - 1, int((x - start) / width))
        ups[index] += up
        downs[index] += down
    return [DOWN if down else UP if up else NO_DATA for up, down in zip(ups, downs, strict=True)]


def runs_of(states: Sequence[str]) -> list[tuple[int, int, str]]:
    """Consecutive equal states merged: (first index, length, state)."""
    merged: list[tuple[int, int, str]] = []
    for index, state in enumerate(states):
        if merged and merged[-1][2] == state:
            first, length, _ = merged[-1]
            merged[-1] = (first, length + 1, state)
        else:
            merged.append((index, 1, state))
    return merged


@dataclass(frozen=True)
class Band:
    """One row of a timeline: a node (``sub`` False) or one of its ports (``sub`` True)."""

    label: str
    states: Sequence[str]
    sub: bool = False


def timeline_chart(
    bands: Sequence[Band],
    *,
    start: float,
    end: float,
    x_labels: Sequence[tuple[float, str]] = (),
    state_labels: dict[str, str] | None = None,
    span_text: Callable[[float, float], str] | None = None,
    title: str = "",
    width: int = 720,
    row_height: int = 16,
) -> str:
    """An inline <svg>: one horizontal band per row, coloured by state, consecutive equal
    buckets drawn as one rectangle (so the size depends on state changes, not on samples).
    ``state_labels`` names the states in the legend and tooltips; ``span_text(x0, x1)``
    writes a tooltip's time span."""
    labels = state_labels or {UP: UP, DOWN: DOWN, NO_DATA: NO_DATA}
    left, right, top_margin, bottom = 150, 20, 10, 48
    plot_w = width - left - right
    height = top_margin + max(1, len(bands)) * row_height + bottom
    span = (end - start) or 1.0

    def px(x: float) -> float:
        return left + (x - start) / span * plot_w

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        'class="timeline">',
        f"<title>{escape(title)}</title>",
    ]
    for row, band in enumerate(bands):
        y = top_margin + row * row_height
        indent, weight = (16, "normal") if band.sub else (0, "bold")
        parts.append(
            f'<text x="{4 + indent}" y="{y + row_height - 4}" font-size="11" '
            f'font-weight="{weight}">{escape(band.label)}</text>'
        )
        count = len(band.states)
        if not count:
            continue
        step = span / count
        for first, length, state in runs_of(band.states):
            x0, x1 = start + first * step, start + (first + length) * step
            tip = f"{band.label}: {labels.get(state, state)}"
            if span_text is not None:
                tip += f", {span_text(x0, x1)}"
            parts.append(
                f'<rect class="{escape(state)}" x="{px(x0):.1f}" y="{y + 2}" '
                f'width="{max(px(x1) - px(x0), 0.5):.1f}" height="{row_height - 4}" '
                f'fill="{STATE_COLOURS.get(state, "#999")}"><title>{escape(tip)}</title></rect>'
            )
    axis_y = top_margin + len(bands) * row_height
    for x, text in x_labels:
        parts.append(
            f'<text x="{px(x):.1f}" y="{axis_y + 14}" text-anchor="middle" font-size="11">'
            f"{escape(text)}</text>"
        )
    legend_x = left
    for state in (UP, DOWN, NO_DATA):
        parts.append(
            f'<rect x="{legend_x}" y="{axis_y + 26}" width="10" height="10" '
            f'fill="{STATE_COLOURS[state]}"/>'
            f'<text x="{legend_x + 14}" y="{axis_y + 35}" font-size="11">'
            f"{escape(labels.get(state, state))}</text>"
        )
        legend_x += 34 + _text_width(labels.get(state, state))
    parts.append("</svg>")
    return "".join(parts)
