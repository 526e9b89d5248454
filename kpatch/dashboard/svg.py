"""Inline SVG charts drawn by kpatch itself: sparklines and a line chart over dates (no library, nothing fetched).

Every point is a `<circle class="pt">` with its data in `data-*` attributes (a test counts them, a person hovers
them for the `<title>`); every text is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class Point:
    date: str  # YYYY-MM-DD
    value: int | None  # None: not known that night (drawn on the baseline, hollow)


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]


def _attr(value: object) -> str:
    return escape(str(value), quote=True)


def _scale(value: float, top: float, low: float, high: float) -> float:
    """`value` in 0..top onto the pixel range low..high (high is the top of the chart: SVG's y grows down)."""
    return round(low + (high - low) * (value / top if top else 0.0), 1)


def sparkline(points: Sequence[Point], kind: str, label: str, width: int = 100, height: int = 26) -> str:
    """A small line of `points` in order, its last value emphasised."""
    top = max((p.value or 0 for p in points), default=0) or 1
    step = (width - 6) / max(len(points) - 1, 1)
    xy = [(round(3 + i * step, 1), _scale(p.value or 0, top, height - 3, 3)) for i, p in enumerate(points)]
    line = " ".join(f"{x},{y}" for x, y in xy)
    circles = "".join(
        f'<circle class="pt{" unknown" if p.value is None else ""}" cx="{x}" cy="{y}" r="2" '
        f'data-date="{_attr(p.date)}" data-value="{"" if p.value is None else p.value}">'
        f"<title>{_attr(p.date)}: {'unknown' if p.value is None else p.value}</title></circle>"
        for p, (x, y) in zip(points, xy, strict=True))
    return (f'<svg class="spark spark-{_attr(kind)}" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
            f' role="img" aria-label="{_attr(label)}"><polyline points="{line}"/>{circles}</svg>')


def line_chart(series: Sequence[Series], chart_id: str, label: str, width: int = 720, height: int = 260) -> str:
    """One line per series over the union of their dates (a date axis with one slot per night)."""
    dates = sorted({p.date for s in series for p in s.points})
    top = max((p.value or 0 for s in series for p in s.points), default=0) or 1
    left, right, upper, lower = 48, width - 12, 16, height - 40
    step = (right - left) / max(len(dates) - 1, 1)
    x_of = {d: round(left + i * step, 1) for i, d in enumerate(dates)}
    parts = [f'<svg id="{_attr(chart_id)}" class="chart" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{_attr(label)}">',
             f'<line class="axis" x1="{left}" y1="{lower}" x2="{right}" y2="{lower}"/>',
             f'<line class="axis" x1="{left}" y1="{upper}" x2="{left}" y2="{lower}"/>',
             f'<text class="tick" x="{left - 6}" y="{lower + 4}" text-anchor="end">0</text>',
             f'<text class="tick" x="{left - 6}" y="{upper + 4}" text-anchor="end">{top}</text>']
    for i, d in enumerate(dates):
        if i in (0, len(dates) - 1) or len(dates) <= 8:
            anchor = "start" if i == 0 else "end" if i == len(dates) - 1 else "middle"
            parts.append(f'<text class="tick" x="{x_of[d]}" y="{lower + 16}" text-anchor="{anchor}">{_attr(d)}</text>')
    for index, s in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        xy = [(x_of[p.date], _scale(p.value or 0, top, lower, upper)) for p in s.points]
        parts.append(f'<g class="series" data-series="{_attr(s.name)}" style="stroke:{colour};fill:{colour}">')
        parts.append(f'<polyline fill="none" points="{" ".join(f"{x},{y}" for x, y in xy)}"/>')
        parts += [f'<circle class="pt" cx="{x}" cy="{y}" r="3.5" data-series="{_attr(s.name)}" '
                  f'data-date="{_attr(p.date)}" data-value="{"" if p.value is None else p.value}">'
                  f"<title>{_attr(s.name)} {_attr(p.date)}: {p.value}</title></circle>"
                  for p, (x, y) in zip(s.points, xy, strict=True)]
        parts.append("</g>")
        legend_y = height - 8
        legend_x = left + index * 170
        parts.append(f'<rect x="{legend_x}" y="{legend_y - 9}" width="10" height="10" style="fill:{colour}"/>'
                     f'<text class="legend" x="{legend_x + 14}" y="{legend_y}">{_attr(s.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
