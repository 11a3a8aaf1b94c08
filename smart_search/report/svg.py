"""The page's charts, drawn as inline SVG here (no plotting library: README, "Reports"): API
units per day by provider and by agent, attempts by tier and outcome, and one burn-down per
provider and month. Colors are from the Okabe-Ito palette."""

from __future__ import annotations

import math
from typing import Any

from smart_search.host.config import PROVIDERS
from smart_search.report.aggregate import OUTCOMES
from smart_search.report.tables import label_of

# A colour-blind-safe palette (Okabe-Ito); each API provider takes the next in its order.
_PROVIDER_PALETTE = ("#0072b2", "#e69f00", "#56b4e9", "#cc79a7", "#f0e442", "#000000")
COLORS = {
    **{p: _PROVIDER_PALETTE[i % len(_PROVIDER_PALETTE)] for i, p in enumerate(PROVIDERS)},
    "success": "#009e73",
    "failed": "#d55e00",
    "skipped": "#9a9a9a",
    "limit": "#c0392b",
    "grid": "#e3e3e3",
    "axis": "#555555",
}
AGENT_COLORS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442")
OTHER_COLOR = "#b0b0b0"
CHART_W, CHART_H = 920, 260
PAD_L, PAD_R, PAD_T, PAD_B = 60, 20, 34, 44


def esc(text: Any) -> str:
    return (
        str(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
    )


def _scale(value: float) -> tuple[int, int]:
    """(top, step) of a count axis: a 1, 2 or 5 × 10^k step, at most four steps to the top."""
    if value <= 0:
        return 4, 1
    step = 1
    while step * 4 < value:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2  # 1, 2, 5, 10, 20, 50, ...
    return step * math.ceil(value / step), step


def _svg_open(title: str, key: str, legend: list[tuple[str, str, str]]) -> list[str]:
    parts = [
        f'<svg class="chart" id="chart-{esc(key)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{CHART_W}" height="{CHART_H}" viewBox="0 0 {CHART_W} {CHART_H}" role="img" '
        f'aria-label="{esc(title)}">',
        f"<title>{esc(title)}</title>",
        f'<text x="{PAD_L}" y="18" class="ct">{esc(title)}</text>',
    ]
    x = CHART_W - PAD_R
    for label, color, dash in reversed(legend):
        x -= 12 + 7 * len(label) + 18
        if dash:
            parts.append(
                f'<line x1="{x}" y1="14" x2="{x + 12}" y2="14" stroke="{color}" '
                f'stroke-width="2" stroke-dasharray="{dash}"/>'
            )
        else:
            parts.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16}" y="18" class="lg">{esc(label)}</text>')
    return parts


def _y_axis(top: int, step: int, label: str) -> list[str]:
    plot_h = CHART_H - PAD_T - PAD_B
    parts = []
    for value in range(0, top + 1, step):
        y = CHART_H - PAD_B - plot_h * value / top
        parts.append(
            f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{CHART_W - PAD_R}" y2="{y:.1f}" '
            f'stroke="{COLORS["grid"]}"/>'
        )
        text = f"{value:,.0f}"
        parts.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" class="yt">{text}</text>')
    parts.append(
        f'<text x="14" y="{PAD_T + plot_h / 2:.0f}" class="al" '
        f'transform="rotate(-90 14 {PAD_T + plot_h / 2:.0f})">{esc(label)}</text>'
    )
    return parts


def _x_labels(labels: list[str], centers: list[float]) -> list[str]:
    every = max(1, math.ceil(len(labels) * 44 / (CHART_W - PAD_L - PAD_R)))
    return [
        f'<text x="{x:.1f}" y="{CHART_H - PAD_B + 16}" class="xt">{esc(label)}</text>'
        for i, (label, x) in enumerate(zip(labels, centers, strict=True))
        if i % every == 0
    ]


def stacked_bars(
    key: str, title: str, labels: list[str], series: list[tuple[str, str, list[int]]], unit: str
) -> str:
    """Vertical stacked bars: one bar per label, one colored part per series."""
    totals = [sum(s[2][i] for s in series) for i in range(len(labels))]
    top, step = _scale(max(totals, default=0))
    plot_w = CHART_W - PAD_L - PAD_R
    plot_h = CHART_H - PAD_T - PAD_B
    slot = plot_w / max(1, len(labels))
    bar_w = max(1.0, slot * 0.7)
    parts = _svg_open(title, key, [(name, color, "") for name, color, _ in series])
    parts += _y_axis(top, step, unit)
    parts.append('<g class="plot">')
    centers = []
    for i, label in enumerate(labels):
        x = PAD_L + slot * i + (slot - bar_w) / 2
        centers.append(x + bar_w / 2)
        base = CHART_H - PAD_B
        for name, color, values in series:
            value = values[i]
            if value <= 0:
                continue
            h = plot_h * value / top
            base -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{color}"><title>{esc(label)} {esc(name)}: {value:,}</title></rect>'
            )
    parts.append("</g>")
    parts += _x_labels(labels, centers)
    parts.append(_axis_line())
    parts.append("</svg>")
    return "\n".join(parts)


def tier_bars(key: str, title: str, tiers: dict[str, dict[str, Any]]) -> str:
    """Horizontal stacked bars: per tier, attempts that succeeded, failed, were skipped."""
    names = list(tiers)
    totals = [sum(tiers[t][o] for o in OUTCOMES) for t in names]
    top = max(totals, default=0) or 1
    left = 110
    plot_w = CHART_W - left - PAD_R - 60
    plot_h = CHART_H - PAD_T - 20
    row = plot_h / max(1, len(names))
    bar_h = min(28.0, row * 0.7)
    parts = _svg_open(title, key, [(o, COLORS[o], "") for o in OUTCOMES])
    parts.append('<g class="plot">')
    for i, tier in enumerate(names):
        name = esc(label_of(tier))
        y = PAD_T + row * i + (row - bar_h) / 2
        x = float(left)
        for outcome in OUTCOMES:
            n = tiers[tier][outcome]
            if n <= 0:
                continue
            w = plot_w * n / top
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{bar_h:.1f}" '
                f'fill="{COLORS[outcome]}"><title>{name} {outcome}: {n:,}</title></rect>'
            )
            x += w
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + bar_h / 2 + 4:.1f}" class="lg">{totals[i]:,}</text>'
        )
    parts.append("</g>")
    for i, tier in enumerate(names):
        y = PAD_T + row * i + row / 2 + 4
        parts.append(f'<text x="{left - 8}" y="{y:.1f}" class="yt">{esc(label_of(tier))}</text>')
    if not names:
        parts.append(f'<text x="{left}" y="{PAD_T + 40}" class="lg">no attempts</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def burn_down(key: str, budget: dict[str, Any]) -> str:
    """Cumulative units over the month, the budget line, and the projection to month end."""
    days = budget["days_in_month"]
    used, limit, projected = budget["used"], budget["limit"], budget["projected"]
    top, step = _scale(max(used, limit, projected or 0) * 1.05)
    plot_w = CHART_W - PAD_L - PAD_R
    plot_h = CHART_H - PAD_T - PAD_B

    def px(day: float) -> str:
        return f"{PAD_L + plot_w * day / days:.1f}"

    def py(units: float) -> str:
        return f"{CHART_H - PAD_B - plot_h * units / top:.1f}"

    title = (
        f"{budget['provider']} {budget['month']} ({budget['reset_timezone']}): "
        f"{used:,} of {limit:,} units"
    )
    color = COLORS[budget["provider"]]
    legend = [("used", color, ""), ("projection", "#333333", "6 4"),
              ("budget", COLORS["limit"], "2 3")]  # fmt: skip
    parts = _svg_open(title, key, legend)
    parts += _y_axis(top, step, "units")
    parts.append('<g class="plot">')
    daily = budget["daily"]
    points = [f"{px(0)},{py(0)}"]
    # A day's point sits at its end, or at the report's moment for the day still running.
    elapsed = budget["elapsed_days"]
    points += [f"{px(min(i + 1, elapsed))},{py(d['cumulative'])}" for i, d in enumerate(daily)]
    area = " ".join([*points, f"{px(min(len(daily), elapsed))},{py(0)}"])
    parts.append(f'<polygon points="{area}" fill="{color}" fill-opacity="0.18"/>')
    parts.append(
        f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" '
        f'stroke-width="2.5"><title>used: {used:,}</title></polyline>'
    )
    if projected is not None and not budget["complete"]:
        parts.append(
            f'<line x1="{px(budget["elapsed_days"])}" y1="{py(used)}" x2="{px(days)}" '
            f'y2="{py(projected)}" stroke="#333333" stroke-width="2" stroke-dasharray="6 4">'
            f"<title>projected: {projected:,}</title></line>"
        )
    parts.append(
        f'<line x1="{PAD_L}" y1="{py(limit)}" x2="{CHART_W - PAD_R}" y2="{py(limit)}" '
        f'stroke="{COLORS["limit"]}" stroke-width="2" stroke-dasharray="2 3">'
        f"<title>budget: {limit:,}</title></line>"
    )
    parts.append("</g>")
    labels = [str(i) for i in range(1, days + 1)]
    centers = [PAD_L + plot_w * (i + 0.5) / days for i in range(days)]
    parts += _x_labels(labels, centers)
    parts.append(_axis_line())
    parts.append("</svg>")
    return "\n".join(parts)


def _axis_line() -> str:
    return (
        f'<line x1="{PAD_L}" y1="{CHART_H - PAD_B}" x2="{CHART_W - PAD_R}" '
        f'y2="{CHART_H - PAD_B}" stroke="{COLORS["axis"]}"/>'
    )


def report_charts(report: dict[str, Any]) -> list[str]:
    """The page's charts, as SVG strings."""
    days = report["by_day"]
    labels = [d["day"][5:] for d in days]
    charts = [
        stacked_bars(
            "units-by-provider",
            "API units per day, by provider",
            labels,
            [(p, COLORS[p], [d["units"][p]["total"] for d in days]) for p in PROVIDERS],
            "units",
        )
    ]
    agents = sorted(report["by_agent"], key=lambda a: (-a["units_total"], a["agent_id"]))
    top = [a["agent_id"] for a in agents[: len(AGENT_COLORS)] if a["units_total"] > 0]
    per_day: dict[str, list[int]] = {a: [0] * len(days) for a in top}
    others = [0] * len(days)
    for i, d in enumerate(days):
        for agent, units in d["units_by_agent"].items():
            if agent in per_day:
                per_day[agent][i] += units
            else:
                others[i] += units
    series = [(label_of(a), AGENT_COLORS[n], per_day[a]) for n, a in enumerate(top)]
    if any(others):
        series.append(("other agents", OTHER_COLOR, others))
    charts.append(stacked_bars("units-by-agent", "API units per day, by agent", labels, series,
                               "units"))  # fmt: skip
    charts.append(tier_bars("outcomes-by-tier", "Attempts by tier and outcome",
                            report["totals"]["tiers"]))  # fmt: skip
    for b in report["budgets"]:
        charts.append(burn_down(f"burn-{b['provider']}-{b['month']}", b))
    return charts
