"""Server-rendered SVG line charts: pure, no Django. Points are (x, y) floats; a series is
downsampled to at most ``max_points`` with min/max buckets, so spikes and dips survive.

``chart_data`` describes the same chart (the same points, steps and axis) for the lease
page's interactive charts (portal/assets/charts.js), which replace the SVG when JavaScript
runs."""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

MAX_POINTS = 300
# Series colours: each at least 4.5:1 on white (WCAG AA), so the legend written in them
# stays readable; the test computes the ratios.
COLOURS = ("#1f77b4", "#b35806", "#237b23", "#7b4fa8", "#8c564b", "#b2337f", "#0e7c86")
THRESHOLD_COLOUR = "#c62828"  # 5.6:1
CONTRACT_COLOUR = "#333333"  # 12.6:1
AXIS_TICKS = 5
# A gap of more than this many times the expected spacing between points is drawn as a
# gap (the line breaks) rather than as a straight line across it.
GAP_FACTOR = 2.5

Point = tuple[float, float]
Step = tuple[float, float | None]
# An incident drawn behind the lines: translucent, so the lines stay readable on it.
BAND_FILL = "#c62828"
BAND_OPACITY = 0.12


@dataclass(frozen=True)
class Span:
    """A shaded band across the plot from ``start`` to ``end`` (x), e.g. an incident from
    its opening to its closing (or now); ``label`` names it on hover, ``href`` its page."""

    start: float
    end: float
    label: str
    href: str = ""


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[Point]


@dataclass(frozen=True)
class Line:
    """A reference line, e.g. the SLA threshold (dashed) or the contract, drawn as steps:
    each (x, y) holds from x until the next step's x (y None: no line there), so a line
    follows the terms versions across an amendment."""

    label: str
    steps: Sequence[Step]
    dashed: bool = True
    colour: str = THRESHOLD_COLOUR

    @classmethod
    def level(
        cls, label: str, y: float, dashed: bool = True, colour: str = THRESHOLD_COLOUR
    ) -> "Line":
        """The same value over the whole chart."""
        return cls(label, ((-math.inf, y),), dashed, colour)

    def legend(self, y_unit: str) -> str:
        """The label and the values it takes, in order: "contracted 100 → 200 Gbit/s"."""
        values: list[float] = []
        for _x, y in self.steps:
            if y is not None and (not values or values[-1] != y):
                values.append(y)
        if not values:
            return self.label
        return f"{self.label} {' → '.join(_number(y) for y in values)} {y_unit}"


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


def split_at_gaps(points: Sequence[Point], max_gap: float | None) -> list[list[Point]]:
    """The points (in x order) cut wherever two consecutive ones lie more than ``max_gap``
    apart: each run is drawn as its own line, so a period without samples stays empty."""
    runs: list[list[Point]] = []
    for point in points:
        if runs and (max_gap is None or point[0] - runs[-1][-1][0] <= max_gap):
            runs[-1].append(point)
        else:
            runs.append([point])
    return runs


def _nice_step(raw: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^n at least ``raw``."""
    base = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * base >= raw * (1 - 1e-9):
            return factor * base
    return 10 * base  # pragma: no cover (the loop always returns)


@dataclass(frozen=True)
class Axis:
    bottom: float
    top: float
    ticks: tuple[float, ...]

    @property
    def from_zero(self) -> bool:
        return self.bottom == 0


def y_axis(values: Sequence[float], count: int = AXIS_TICKS) -> Axis:
    """A y axis for these values with about ``count`` intervals of a "nice" step (1, 2,
    2.5 or 5 x 10^n). It starts at 0 when the lowest value is at most half the highest
    (or the values are not all positive); otherwise it starts just below the lowest, so
    180 to 200 is read on 175 ... 205, not squeezed on 0 ... 220. The highest and lowest
    values keep a little room from the frame."""
    if not values:
        return Axis(0.0, 1.0, (0.0, 0.25, 0.5, 0.75, 1.0))
    low, high = min(values), max(values)
    if 0 <= low <= high / 2 or low <= 0 <= high:
        low = min(low, 0.0)
    if high == low:
        pad = abs(high) / 10 or 1.0
        low, high = (low, high + pad) if low == 0 else (low - pad, high + pad)
    step = _nice_step((high - low) / count)
    bottom = math.floor(low / step + 1e-9) * step
    top = math.ceil(high / step - 1e-9) * step
    if low != 0 and low - bottom < step / 20:
        bottom -= step
    if top - high < step / 20:
        top += step
    intervals = round((top - bottom) / step)
    return Axis(
        bottom, top, tuple(round(bottom + step * index, 9) for index in range(intervals + 1))
    )


def _text_width(text: str, font_size: float = 11) -> float:
    """Roughly how wide ``text`` is drawn: CJK characters take a full em, others about
    0.58 of one (enough to keep legend entries apart)."""
    return sum(font_size if ord(char) >= 0x2E80 else font_size * 0.58 for char in text)


def _number(value: float) -> str:
    text = f"{round(value, 6):.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


@dataclass(frozen=True)
class _Layout:
    """What the SVG and the interactive chart share: the runs of each series (split at
    gaps, then downsampled), each line's steps inside the x range, the ranges and axis."""

    runs: list[tuple[Series, list[list[Point]]]]
    steps: list[tuple[Line, list[tuple[float, float, float | None]]]]
    x_min: float
    x_max: float
    axis: Axis


def _layout(
    series: Sequence[Series],
    lines: Sequence[Line],
    x_range: tuple[float, float] | None,
    x_labels: Sequence[tuple[float, str]],
    max_gap: float | None,
    max_points: int,
) -> _Layout:
    runs: list[tuple[Series, list[list[Point]]]] = []
    for one in series:
        # Each series keeps at most max_points, shared by its runs as their lengths go.
        pieces = split_at_gaps(one.points, max_gap)
        budget = max_points / max(1, len(one.points))
        runs.append(
            (one, [downsample(piece, max(2, round(budget * len(piece)))) for piece in pieces])
        )
    if x_range is not None:
        x_min, x_max = x_range
    else:
        xs = [x for _one, pieces in runs for piece in pieces for x, _y in piece]
        xs += [x for x, _text in x_labels]
        x_min, x_max = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_max <= x_min:
        x_max = x_min + 1
    steps: list[tuple[Line, list[tuple[float, float, float | None]]]] = []
    for line in lines:
        ordered = sorted(line.steps, key=lambda step: step[0])
        visible = []
        for index, (x, y) in enumerate(ordered):
            until = ordered[index + 1][0] if index + 1 < len(ordered) else x_max
            a, b = max(x, x_min), min(until, x_max)
            if a < b:
                visible.append((a, b, y))
        steps.append((line, visible))
    ys = [y for _one, pieces in runs for piece in pieces for _x, y in piece]
    ys += [y for _line, visible in steps for _a, _b, y in visible if y is not None]
    return _Layout(runs, steps, x_min, x_max, y_axis(ys))


def span_rects(
    spans: Sequence[Span],
    *,
    x_min: float,
    x_max: float,
    px: Callable[[float], float],
    y: float,
    height: float,
    css: str = "incident-band",
    hover: bool = True,
) -> list[str]:
    """The incidents' bands of a chart (the line charts and the link timeline alike):
    one translucent rectangle per span, cut to [x_min, x_max], named on hover; with
    ``hover`` False it lets the pointer through to what lies under it."""
    rects = []
    for span in spans:
        a, b = max(span.start, x_min), min(span.end, x_max)
        if a >= b:
            continue
        through = ' pointer-events="none"' if not hover else ""
        rects.append(
            f'<rect class="{css}" x="{px(a):.1f}" y="{y}" '
            f'width="{max(px(b) - px(a), 1):.1f}" height="{height}" fill="{BAND_FILL}" '
            f'fill-opacity="{BAND_OPACITY}"{through}><title>{escape(span.label)}</title></rect>'
        )
    return rects


def line_chart(
    series: Sequence[Series],
    *,
    lines: Sequence[Line] = (),
    x_labels: Sequence[tuple[float, str]] = (),
    x_range: tuple[float, float] | None = None,
    max_gap: float | None = None,
    y_unit: str = "Gbit/s",
    title: str = "",
    width: int = 860,
    height: int = 260,
    max_points: int = MAX_POINTS,
    bands: Sequence[Span] = (),
) -> str:
    """An inline <svg> document fragment: one line per series, broken wherever two
    consecutive points lie more than ``max_gap`` apart, on a y axis of nice ticks in
    ``y_unit`` (``y_axis``); ``lines`` are reference lines drawn as steps, ``x_labels``
    (x, text) ticks; ``x_range`` (default: the points' and labels') the x span."""
    left, right, top_margin, bottom = 70, 230, 20, 30
    plot_w, plot_h = width - left - right, height - top_margin - bottom
    layout = _layout(series, lines, x_range, x_labels, max_gap, max_points)
    x_min, x_max, axis = layout.x_min, layout.x_max, layout.axis

    def px(x: float) -> float:
        return left + (x - x_min) / (x_max - x_min) * plot_w

    def py(y: float) -> float:
        return top_margin + plot_h - (y - axis.bottom) / (axis.top - axis.bottom) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{left}" y="{top_margin}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#999"/>',
    ]
    parts += span_rects(bands, x_min=x_min, x_max=x_max, px=px, y=top_margin, height=plot_h)
    for tick in axis.ticks:
        y = py(tick)
        parts.append(
            f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'font-size="11">{_number(tick)} {escape(y_unit)}</text>'
        )
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
    for x, text in x_labels:
        parts.append(
            f'<text x="{px(x):.1f}" y="{height - 8}" text-anchor="middle" font-size="11">'
            f"{escape(text)}</text>"
        )
    legend_x, legend_y = left + plot_w + 8, top_margin + 12

    def legend(text: str, colour: str, dash: str) -> None:
        nonlocal legend_y
        parts.append(
            f'<line x1="{legend_x}" y1="{legend_y - 4}" x2="{legend_x + 14}" '
            f'y2="{legend_y - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text class="legend" x="{legend_x + 18}" y="{legend_y}" font-size="11" '
            f'fill="{colour}">{escape(text)}</text>'
        )
        legend_y += 14

    for index, (one, pieces) in enumerate(layout.runs):
        colour = COLOURS[index % len(COLOURS)]
        for piece in pieces:
            if len(piece) == 1:  # a lone point between two gaps
                ((x, y),) = piece
                parts.append(
                    f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2" fill="{colour}">'
                    f"<title>{escape(one.label)}</title></circle>"
                )
                continue
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in piece)
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}">'
                f"<title>{escape(one.label)}</title></polyline>"
            )
        legend(one.label, colour, "")
    for line, visible in layout.steps:
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        path: list[str] = []
        end: tuple[float, float] | None = None  # where the previous step ended
        for a, b, y in visible:
            if y is None:
                end = None
                continue
            if end is not None and end[0] == a:
                path.append(f"V{py(y):.1f}H{px(b):.1f}")
            else:
                path.append(f"M{px(a):.1f},{py(y):.1f}H{px(b):.1f}")
            end = (b, y)
        if path:
            parts.append(
                f'<path class="reference" d="{"".join(path)}" fill="none" '
                f'stroke="{line.colour}" stroke-width="1.5"{dash}>'
                f"<title>{escape(line.legend(y_unit))}</title></path>"
            )
        # Named in the legend, below the series: at the line's own height the labels of
        # two close lines (contract and threshold) would overwrite each other.
        legend(line.legend(y_unit), line.colour, dash)
    parts.append("</svg>")
    return "".join(parts)


def chart_data(
    series: Sequence[Series],
    *,
    lines: Sequence[Line] = (),
    x_range: tuple[float, float] | None = None,
    max_gap: float | None = None,
    y_unit: str = "Gbit/s",
    title: str = "",
    zone: str = "UTC",
    max_points: int = MAX_POINTS,
    bands: Sequence[Span] = (),
    bands_label: str = "",
) -> dict[str, Any]:
    """The chart ``line_chart`` draws, as data for the interactive chart (json_script):
    x in milliseconds since the epoch; a null point where a series or a line breaks;
    each line's steps as (start, y), (end, y) pairs, drawn as steps."""
    layout = _layout(series, lines, x_range, (), max_gap, max_points)

    def ms(x: float) -> int:
        return round(x * 1000)

    out: list[dict[str, Any]] = []
    for index, (one, pieces) in enumerate(layout.runs):
        points: list[list[float | None]] = []
        for piece in pieces:
            if points:
                points.append([(points[-1][0] + ms(piece[0][0])) // 2, None])  # type: ignore[operator]
            points.extend([ms(x), round(y, 6)] for x, y in piece)
        out.append(
            {
                "name": one.label,
                "colour": COLOURS[index % len(COLOURS)],
                "points": points,
                "step": False,
                "dashed": False,
            }
        )
    for line, visible in layout.steps:
        points = []
        for a, b, y in visible:
            if y is None:
                points.append([ms(a), None])
            else:
                points.extend([[ms(a), y], [ms(b), y]])
        out.append(
            {
                "name": line.label,
                "colour": line.colour,
                "points": points,
                "step": True,
                "dashed": line.dashed,
            }
        )
    return {
        "title": title,
        "unit": y_unit,
        "zone": zone,
        "x_min": ms(layout.x_min),
        "x_max": ms(layout.x_max),
        "from_zero": layout.axis.from_zero,
        "series": out,
        "bands_label": bands_label,
        "bands": [
            {
                "from": ms(max(band.start, layout.x_min)),
                "to": ms(min(band.end, layout.x_max)),
                "name": band.label,
                "href": band.href,
            }
            for band in bands
            if max(band.start, layout.x_min) < min(band.end, layout.x_max)
        ],
    }


# --- link state timeline ------------------------------------------------------------------

UP, DOWN, NO_DATA = "up", "down", "none"
STATE_COLOURS = {UP: "#2ca02c", DOWN: "#d62728", NO_DATA: "#dddddd"}
# Down is hatched as well as red, so it is told from up without seeing colour.
DOWN_PATTERN = "timeline-down"
STATE_FILLS = {**STATE_COLOURS, DOWN: f"url(#{DOWN_PATTERN})"}

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


def hour_counts(hours: Sequence[int], start: float, end: float, buckets: int) -> list[int]:
    """How many of ``hours`` (epoch seconds) fall in each of ``buckets`` equal slices of
    [start, end)."""
    counts = [0] * max(buckets, 0)
    if buckets <= 0 or end <= start:
        return counts
    width = (end - start) / buckets
    for x in hours:
        if start <= x < end:
            counts[min(buckets - 1, int((x - start) / width))] += 1
    return counts


def hour_states(
    base: Sequence[int],
    checked: frozenset[int],
    down: frozenset[int],
    silent: frozenset[int],
    *,
    start: float,
    end: float,
    buckets: int,
) -> list[str]:
    """``bucket_states`` of one timeline row given as exceptions to the shared checked
    hours (``base``: their count per slice): a checked hour is up unless it is down or
    silent. The same answer in time proportional to the exceptions, not the hours."""
    if buckets <= 0 or end <= start:
        return []
    ups = list(base)
    downs = [0] * buckets
    width = (end - start) / buckets
    for x in (down | silent) & checked:
        if start <= x < end:
            index = min(buckets - 1, int((x - start) / width))
            ups[index] -= 1
            if x in down:
                downs[index] += 1
    return [DOWN if d else UP if u else NO_DATA for u, d in zip(ups, downs, strict=True)]


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
    incidents: Sequence[Span] = (),
) -> str:
    """An inline <svg>: one horizontal band per row, coloured by state, consecutive equal
    buckets drawn as one rectangle (so the size depends on state changes, not on samples);
    down is red with white hatching, never colour alone.
    ``state_labels`` names the states in the legend and tooltips; ``span_text(x0, x1)``
    writes a tooltip's time span; ``incidents`` are shaded as on the line charts
    (``span_rects``)."""
    labels = state_labels or {UP: UP, DOWN: DOWN, NO_DATA: NO_DATA}
    left, right, top_margin, bottom = 150, 20, 10, 48  # the top margin holds the incidents
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
        f'<defs><pattern id="{DOWN_PATTERN}" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)">'
        f'<rect width="6" height="6" fill="{STATE_COLOURS[DOWN]}"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2.5"/></pattern></defs>',
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
                f'fill="{STATE_FILLS.get(state, "#999")}"><title>{escape(tip)}</title></rect>'
            )
    axis_y = top_margin + len(bands) * row_height
    # Incidents: a marker above the rows, named on hover, and a shade over them that lets
    # the pointer through to the rows' own tooltips.
    window = {"x_min": start, "x_max": end, "px": px}
    parts += span_rects(incidents, **window, y=1, height=top_margin - 2, css="incident-mark")
    parts += span_rects(incidents, **window, y=top_margin, height=axis_y - top_margin, hover=False)
    for x, text in x_labels:
        parts.append(
            f'<text x="{px(x):.1f}" y="{axis_y + 14}" text-anchor="middle" font-size="11">'
            f"{escape(text)}</text>"
        )
    legend_x = left
    for state in (UP, DOWN, NO_DATA):
        parts.append(
            f'<rect x="{legend_x}" y="{axis_y + 24}" width="14" height="14" '
            f'fill="{STATE_FILLS[state]}" stroke="#767676" stroke-width="0.5"/>'
            f'<text x="{legend_x + 18}" y="{axis_y + 35}" font-size="11">'
            f"{escape(labels.get(state, state))}</text>"
        )
        legend_x += 38 + _text_width(labels.get(state, state))
    parts.append("</svg>")
    return "".join(parts)
