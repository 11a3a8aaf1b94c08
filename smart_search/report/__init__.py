"""`smart-search report`: where the budget went, read from the JSONL search logs.

One module per job, imports flowing one way (cli → build → summary → budgets, aggregate →
reading, window; the renderers read only the document):

- `reading`: lists `<state_dir>/logs` once and streams each file in 1 MiB chunks (a line longer
  than 1 MiB is skipped as `oversized`, never held in memory).
- `aggregate`: counts lines (the one module that reads a log line's fields, all of them declared
  by `schemas/search-log.json`) into a bucket per (day, agent) and API units per provider and
  local day. Every line that cannot be counted is counted instead, by reason (`truncated`,
  `oversized`, `not_json`, `foreign`, `malformed`, `unknown_version`); nothing in a log
  directory can crash the report.
- `window`: the report's days, agent filter and the providers' clocks.
- `summary`: the document (the `--json` output, `schemas/report.result.json`): totals, days and
  agents merged from the buckets. `budgets`: per provider and month, use, burn and projection.
- `build`: list, pick the window's files, count (a forked child reads half of a big report's
  files and sends its counts back pickled), shape.
- `tables` (the cells), `text` and `page` (both print those same cells, so they always agree),
  `svg` (the page's inline charts, no plotting library: README, "Reports").
- `cli`: the command line.

Rules (README, "Reports", documents them for operators):
- A line's day is the day in its file name (the ledger's day: UTC or `timezone`).
- A line's API units: per-attempt `units` when any attempt carries them (they say which provider
  and quota source paid), else the line's `units`, else (log version 1) one unit when
  `provider_used` is gemini or brave and `quota_source` is not `none`. A cache hit without `units`
  costs nothing.
- The report's months are the calendar months of its days. Each provider's month runs from
  midnight on the 1st in its `reset_timezone`; a line belongs to it by its `timestamp`, or by its
  file's day when the timestamp is missing or unreadable. The burn-down counts every agent (the
  budget is the provider's), also under `--agent`.
- Percentiles are nearest-rank over the attempts that ran (outcome `success` or `failed`).
- A line is a deep call when its `mode` says so (log version 4 on); older lines are first mode.
"""

from __future__ import annotations

from smart_search.report.aggregate import (
    LOG_VERSIONS,
    OUTCOMES,
    SKIP_REASONS,
    SOURCES,
    Aggregator,
    Bucket,
)
from smart_search.report.budgets import budgets
from smart_search.report.build import build_report
from smart_search.report.cli import ReportError, main, resolve_days
from smart_search.report.page import render_html
from smart_search.report.reading import FileStats, list_log_files, read_batches
from smart_search.report.summary import REPORT_VERSION, document, percentiles, summarize
from smart_search.report.svg import (
    AGENT_COLORS,
    COLORS,
    burn_down,
    report_charts,
    stacked_bars,
    tier_bars,
)
from smart_search.report.tables import Table, label_of, report_tables
from smart_search.report.text import render_text
from smart_search.report.window import Window

__all__ = [
    "AGENT_COLORS",
    "COLORS",
    "LOG_VERSIONS",
    "OUTCOMES",
    "REPORT_VERSION",
    "SKIP_REASONS",
    "SOURCES",
    "Aggregator",
    "Bucket",
    "FileStats",
    "ReportError",
    "Table",
    "Window",
    "budgets",
    "build_report",
    "burn_down",
    "document",
    "label_of",
    "list_log_files",
    "main",
    "percentiles",
    "read_batches",
    "render_html",
    "render_text",
    "report_charts",
    "report_tables",
    "resolve_days",
    "stacked_bars",
    "summarize",
    "tier_bars",
]
