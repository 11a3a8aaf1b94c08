"""The report as one self-contained HTML page: the charts, then the same tables the text prints.
No script and no external resource: the page's Content-Security-Policy forbids any."""

from __future__ import annotations

from typing import Any

from smart_search.report.svg import esc, report_charts
from smart_search.report.tables import report_tables

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;
background:#fff;margin:0;padding:24px 32px;max-width:1000px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px}
.meta{color:#555;margin:0 0 16px}.note{color:#666;font-size:12px;margin:4px 0 0}
figure{margin:0 0 18px}svg.chart{max-width:100%;height:auto;display:block}
svg .ct{font-size:14px;font-weight:600;fill:#222}svg .lg{font-size:12px;fill:#333}
svg .yt{font-size:11px;fill:#555;text-anchor:end}svg .xt{font-size:11px;fill:#555;
text-anchor:middle}svg .al{font-size:11px;fill:#555;text-anchor:middle}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #e6e6e6;text-align:right;white-space:nowrap}
th.l,td.l{text-align:left}th{background:#f4f4f4;font-weight:600}
tr.total td{font-weight:600;border-top:2px solid #bbb}
"""


_LEFT = ' class="l"'


def render_html(report: dict[str, Any]) -> str:
    """One self-contained page: no script, no external resource (its CSP forbids any)."""
    title = f"smart-search report {report['since']} to {report['until']}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">agent: {esc(report["agent"] or "all")} · ledger days in '
        f"{esc(report['timezone'])} · generated {esc(report['generated_at'])}</p>",
        '<section id="charts">',
    ]
    for svg in report_charts(report):
        parts.append(f"<figure>{svg}</figure>")
    parts.append("</section>")
    for table in report_tables(report):
        parts.append(f'<section class="table" id="table-{esc(table.key)}">')
        parts.append(f"<h2>{esc(table.title)}</h2>")
        if not table.rows:
            parts.append("<p>(none)</p>")
        else:
            parts.append(f'<table data-key="{esc(table.key)}">')
            left = [
                not any(table.columns) or (i < len(table.align) and table.align[i] == "l")
                for i in range(len(table.columns))
            ]
            if any(table.columns):
                header = "".join(
                    f"<th{_LEFT if left[i] else ''}>{esc(c)}</th>"
                    for i, c in enumerate(table.columns)
                )
                parts.append(f"<thead><tr>{header}</tr></thead>")
            parts.append("<tbody>")
            for n, row in enumerate(table.rows):
                css = ' class="total"' if table.total and n == len(table.rows) - 1 else ""
                cells = "".join(
                    f"<td{_LEFT if left[i] else ''}>{esc(c)}</td>" for i, c in enumerate(row)
                )
                parts.append(f"<tr{css}>{cells}</tr>")
            parts.append("</tbody></table>")
        if table.note:
            parts.append(f'<p class="note">{esc(table.note)}</p>')
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
