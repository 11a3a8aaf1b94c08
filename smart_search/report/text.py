"""The report as plain text: the tables, every line at most TEXT_WIDTH columns."""

from __future__ import annotations

from typing import Any

from smart_search.report.tables import Table, report_tables

TEXT_WIDTH = 100


def render_text(report: dict[str, Any], width: int = TEXT_WIDTH) -> str:
    """The report as plain text, every line at most `width` columns."""
    out = [
        _clip(f"smart-search report  {report['since']} to {report['until']}  "
              f"(agent: {report['agent'] or 'all'})", width),
        "",
    ]  # fmt: skip
    for table in report_tables(report):
        out.append(_clip(table.title, width))
        out.append(_clip("-" * len(table.title), width))
        if not table.rows:
            out.append("(none)")
        else:
            out.extend(_grid(table, width))
        if table.note:
            out.append(_clip(f"({table.note})", width))
        out.append("")
    return "\n".join(out)


def _grid(table: Table, width: int) -> list[str]:
    header = table.columns if any(table.columns) else None
    grid = ([header] if header else []) + table.rows
    widths = [max(len(row[i]) for row in grid) for i in range(len(table.columns))]
    # The first column (a day, an agent, a label) gives way when the line would pass `width`.
    rest = sum(widths[1:]) + 2 * (len(widths) - 1)
    widths[0] = max(8, min(widths[0], width - rest))
    lines = []
    for n, row in enumerate(grid):
        cells = []
        for i, cell in enumerate(row):
            if i == 0:
                cells.append(_clip(cell, widths[0]).ljust(widths[0]))
            elif header is None or (i < len(table.align) and table.align[i] == "l"):
                cells.append(cell.ljust(widths[i]))
            else:
                cells.append(cell.rjust(widths[i]))
        lines.append(_clip("  ".join(cells).rstrip(), width))
        if header and n == 0:
            lines.append(_clip("  ".join("-" * w for w in widths), width))
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"
