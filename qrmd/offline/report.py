"""``qrmd journal report DIR --html OUT``: one self-contained page of a node's history.

Four charts, drawn by plotly (its JavaScript embedded once, so the page opens with no
network — an on-call laptop, an incident ticket's attachment): the CPUs given to containers
per NUMA node over time, pool sizes over time, the balancer's rounds (each stored round's
status and source NUMA node), and the timeline of every record by cause kind, its one-line
rendering (``qrmd.offline.renderers``) on hover. Each series is sampled at every record that
changed it, drawn as steps: the state holds from one record to the next.

plotly is an optional dependency (``pip install 'qrmd[forensics]'``).
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from policy.topology.cpuset import CPUSet
from qrmd.offline.changes import pool_changes, touched_containers
from qrmd.offline.renderers import cause_kind, render_cause
from qrmd.offline.state_view import container_views
from qrmd.offline.walk import ForensicsError, Step

__all__ = ["ReportSeries", "collect_series", "render_html"]


@dataclass(slots=True)
class ReportSeries:
    """What the charts draw, gathered in one pass over the journal."""

    numa_times: list[dt.datetime] = field(default_factory=list)
    numa_held: dict[int, list[int]] = field(default_factory=dict)
    numa_total: dict[int, int] = field(default_factory=dict)
    pool_points: dict[str, tuple[list[dt.datetime], list[int]]] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[tuple[dt.datetime, str, int, str]] = field(default_factory=list)
    first_seq: int | None = None
    last_seq: int | None = None


def _moment(wall_time: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(wall_time, dt.UTC)


def collect_series(steps: Iterable[Step]) -> ReportSeries:
    """Sample every series at the records that changed it (module docstring)."""
    series = ReportSeries()
    for step in steps:
        record, before, after = step.record, step.before.cpu, step.after.cpu
        when = _moment(record.wall_time)
        series.first_seq = series.first_seq if series.first_seq is not None else record.seq
        series.last_seq = record.seq
        series.timeline.append((when, cause_kind(record.cause), record.seq, render_cause(record)))
        for change in pool_changes(before, after):
            times, sizes = series.pool_points.setdefault(change.name, ([], []))
            times.append(when)
            sizes.append(0 if change.after is None else len(change.after))
        if not series.numa_times or touched_containers(before, after):
            held = CPUSet.union_all(v.cpuset for v in container_views(after).values())
            series.numa_times.append(when)
            for numa in after.topology.numa_nodes():
                cpus = after.topology.cpus_in_numa(numa)
                series.numa_total[numa] = len(cpus)
                series.numa_held.setdefault(numa, []).append(len(held.intersection(cpus)))
        current, previous = step.after.balance.current, step.before.balance.current
        # A new round is a new detect time; advice or eviction taken mark the same round.
        is_new = previous is None or (
            current is not None and previous.detect_time != current.detect_time
        )
        if current is not None and is_new:
            fields = current.to_json()
            source = fields.get("sourceNuma")
            series.rounds.append(
                {
                    "time": when,
                    "seq": record.seq,
                    "status": str(fields.get("status")),
                    "source": source.get("NumaID") if isinstance(source, dict) else None,
                    "level": str(fields.get("balanceLevel")),
                    "evict": len(current.evict_pods),
                    "migrate": len(current.balance_pods),
                }
            )
    _hold_to_the_end(series)
    return series


def _hold_to_the_end(series: ReportSeries) -> None:
    """Extend each step line to the newest record: a value holds until something changes it."""
    if not series.timeline:
        return
    end = series.timeline[-1][0]
    if series.numa_times and series.numa_times[-1] != end:
        series.numa_times.append(end)
        for held in series.numa_held.values():
            held.append(held[-1])
    for times, sizes in series.pool_points.values():
        if times[-1] != end:
            times.append(end)
            sizes.append(sizes[-1])


def _figures(series: ReportSeries) -> list[tuple[str, Any]]:
    try:
        import plotly.graph_objects as go  # noqa: PLC0415 (optional extra)
    except ImportError as err:
        raise ForensicsError("report needs plotly: pip install 'qrmd[forensics]'") from err
    numa = go.Figure()
    for node, held in sorted(series.numa_held.items()):
        numa.add_trace(
            go.Scatter(
                x=series.numa_times,
                y=held,
                mode="lines+markers",
                line_shape="hv",
                name=f"NUMA {node} (of {series.numa_total[node]})",
            )
        )
    numa.update_layout(yaxis_title="CPUs given to containers", xaxis_title="time (UTC)")
    pools = go.Figure()
    for name, (times, sizes) in sorted(series.pool_points.items()):
        pools.add_trace(
            go.Scatter(x=times, y=sizes, mode="lines+markers", line_shape="hv", name=name)
        )
    pools.update_layout(yaxis_title="CPUs", xaxis_title="time (UTC)")
    rounds = go.Figure()
    for status in sorted({r["status"] for r in series.rounds}):
        mine = [r for r in series.rounds if r["status"] == status]
        rounds.add_trace(
            go.Scatter(
                x=[r["time"] for r in mine],
                y=[-1 if r["source"] is None else r["source"] for r in mine],
                mode="markers",
                name=status,
                text=[
                    f"seq {r['seq']}: {r['level']}, evict {r['evict']}, migrate {r['migrate']}"
                    for r in mine
                ],
                hoverinfo="text+x",
            )
        )
    rounds.update_layout(
        yaxis_title="source NUMA node (-1: none)",
        xaxis_title="time (UTC)",
        annotations=[]
        if series.rounds
        else [{"text": "no balance round in this range", "showarrow": False}],
    )
    timeline = go.Figure()
    for kind in sorted({k for _, k, _, _ in series.timeline}):
        events = [t for t in series.timeline if t[1] == kind]
        timeline.add_trace(
            go.Scatter(
                x=[t[0] for t in events],
                y=[kind] * len(events),
                mode="markers",
                name=kind,
                text=[f"seq {t[2]}: {t[3]}" for t in events],
                hoverinfo="text+x",
            )
        )
    timeline.update_layout(xaxis_title="time (UTC)", showlegend=False)
    return [
        ("CPUs per NUMA node", numa),
        ("Pool sizes", pools),
        ("Balance rounds", rounds),
        ("Event timeline", timeline),
    ]


def render_html(series: ReportSeries, title: str) -> str:
    """The whole page: a heading, then each chart with plotly's JavaScript inlined once.

    Raises:
        ForensicsError: plotly is not installed, or the journal has no records.
    """
    if series.last_seq is None:
        raise ForensicsError("the journal has no records: there is nothing to draw")
    parts = []
    for index, (heading, figure) in enumerate(_figures(series)):
        figure.update_layout(title=heading, height=380, margin={"t": 50, "b": 40})
        chart = figure.to_html(
            full_html=False,
            include_plotlyjs=index == 0,  # inline once: no network, one copy
            div_id=f"chart-{index}",
            config={"displaylogo": False},
        )
        parts.append(f'<section class="chart">{chart}</section>')
    first = series.timeline[0][0].isoformat()
    last = series.timeline[-1][0].isoformat()
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:1.5em;}"
        "section.chart{margin-bottom:1em;}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>records {series.first_seq}–{series.last_seq}, {html.escape(first)} to "
        f"{html.escape(last)}; {len(series.rounds)} balance rounds stored</p>"
        + "".join(parts)
        + "</body></html>\n"
    )
