"""Server-rendered SVG line charts of a job's progress history (the health page's plots).

No JavaScript and nothing fetched at run time: each chart is an inline ``<svg>`` whose points carry
their numbers (``data-series``, ``data-batch``, ``data-value``; Python's ``repr`` of the float, so
they read back exactly) and a ``<title>`` tooltip. :func:`job_charts` turns ``streaming_progress``
rows into the charts a person wants: input rate against processing rate, batch duration and its
parts, rows per batch per table, quarantine rate, state rows and memory, watermark gap, backlog.
No pyspark here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
# Spark's durationMs parts worth plotting, in the order a micro-batch runs them.
DURATION_PARTS = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "commitBatch")


@dataclass
class Series:
    """One line: ``points`` are (batch id, value); a None value leaves a gap."""

    name: str
    points: list[tuple[int, float | None]]


@dataclass
class Chart:
    """One chart: ``key`` names it in the page (``data-chart``); ``empty`` is said when it has no points."""

    key: str
    title: str
    unit: str
    series: list[Series] = field(default_factory=list)
    empty: str = "no data yet"

    def has_points(self) -> bool:
        return any(v is not None for s in self.series for _, v in s.points)


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.3g}"


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    """Round axis values from at most ``low`` to at least ``high`` (about ``count`` steps)."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    ticks = [math.floor(low / step) * step]
    while ticks[-1] < high - step * 1e-9:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def render(chart: Chart, width: int = 520, height: int = 190) -> str:
    """The chart as an inline SVG (with its legend), or a note when it has no points."""
    if not chart.has_points():
        return (f'<div class="chart empty" data-chart="{escape(chart.key)}"><h4>{escape(chart.title)}</h4>'
                f'<p class="note">{escape(chart.empty)}</p></div>')
    left, right, top, bottom = 56, 12, 10, 28
    values = [v for s in chart.series for _, v in s.points if v is not None]
    batches = [b for s in chart.series for b, v in s.points if v is not None]
    ticks = _ticks(min(0.0, min(values)), max(values))
    low, high = ticks[0], ticks[-1]
    first, last = min(batches), max(batches)
    span = max(last - first, 1)

    def x(batch: int) -> float:
        return left + (batch - first) / span * (width - left - right)

    def y(value: float) -> float:
        return top + (high - value) / (high - low) * (height - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(chart.title)}">']
    for tick in ticks:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
                     f'<text x="{left - 4}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{_number(tick)}</text>')
    for batch in sorted({first, last}):
        parts.append(f'<text x="{x(batch):.1f}" y="{height - 10}" class="tick" text-anchor="middle">{batch}</text>')
    parts.append(f'<text x="{(left + width - right) / 2:.1f}" y="{height - 1}" class="axis" '
                 f'text-anchor="middle">micro-batch</text>')
    for index, series in enumerate(chart.series):
        color = COLORS[index % len(COLORS)]
        runs, current = [], []
        for batch, value in series.points:
            if value is None:
                if current:
                    runs.append(current)
                current = []
            else:
                current.append((batch, value))
        if current:
            runs.append(current)
        for run in runs:
            path = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in run)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        for batch, value in series.points:
            if value is None:
                continue
            parts.append(f'<circle cx="{x(batch):.1f}" cy="{y(value):.1f}" r="2.4" fill="{color}" '
                         f'data-series="{escape(series.name)}" data-batch="{batch}" data-value="{value!r}">'
                         f'<title>{escape(series.name)}, batch {batch}: {_number(value)} {escape(chart.unit)}</title>'
                         f'</circle>')
    parts.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{COLORS[i % len(COLORS)]}"></i>{escape(s.name)}</span>'
                     for i, s in enumerate(chart.series))
    return (f'<div class="chart" data-chart="{escape(chart.key)}"><h4>{escape(chart.title)} '
            f'<small>({escape(chart.unit)})</small></h4>{"".join(parts)}<div class="legend">{legend}</div></div>')


def _points(rows: list[dict], value) -> list[tuple[int, float | None]]:
    out = []
    for row in rows:
        got = value(row)
        out.append((row["batch_id"], float(got) if got is not None else None))
    return out


def current_generation(rows: list[dict]) -> tuple[list[dict], int]:
    """The rows of the newest checkpoint (its ``query_id``; a checkpoint reset starts a new query with batch ids from
    0 again), and how many older rows were left out: one axis of batch ids never mixes two checkpoints."""
    if not rows:
        return rows, 0
    newest = rows[-1].get("query_id")
    mine = [row for row in rows if row.get("query_id") == newest]
    return mine, len(rows) - len(mine)


def job_charts(rows: list[dict], tables: list[str]) -> list[Chart]:
    """The charts of one stream's progress rows (oldest first).

    :param tables: the job's tables, in registry order (a series each in the rows chart).
    """
    parts = [p for p in DURATION_PARTS if any(p in (r.get("duration_ms") or {}) for r in rows)]

    def gap(row: dict) -> float | None:
        if row.get("watermark") is None or row.get("timestamp") is None:
            return None
        return (row["timestamp"] - row["watermark"]).total_seconds()

    return [
        Chart("rates", "Input rate vs processing rate", "rows/s", [
            Series("input", _points(rows, lambda r: r.get("input_rows_per_second"))),
            Series("processed", _points(rows, lambda r: r.get("processed_rows_per_second")))]),
        Chart("duration", "Batch duration and its parts", "ms",
              [Series("batch", _points(rows, lambda r: r.get("batch_duration_ms")))]
              + [Series(p, _points(rows, lambda r, p=p: (r.get("duration_ms") or {}).get(p))) for p in parts]),
        Chart("rows", "Rows per batch per table", "rows",
              [Series(t, _points(rows, lambda r, t=t: (r.get("rows") or {}).get(t))) for t in tables]),
        Chart("quarantine", "Quarantine rate", "% of the batch's rows",
              [Series("quarantined", _points(rows, lambda r: None if r.get("quarantine_rate") is None
                                             else r["quarantine_rate"] * 100))]),
        Chart("state_rows", "State rows", "rows",
              [Series("state rows", _points(rows, lambda r: r.get("state_rows_total")))],
              empty="no stateful operators in this job"),
        Chart("state_memory", "State memory", "MiB",
              [Series("state memory", _points(rows, lambda r: None if r.get("state_memory_bytes") is None
                                              else r["state_memory_bytes"] / 2 ** 20))],
              empty="no stateful operators in this job"),
        Chart("watermark", "Watermark gap (trigger time - watermark)", "s",
              [Series("gap", _points(rows, gap))], empty="no event-time watermark in this job"),
        Chart("backlog", "Backlog", "input files waiting",
              [Series("backlog", _points(rows, lambda r: r.get("backlog_files")))]),
    ]
