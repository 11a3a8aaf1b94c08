"""`smart-search report [--days N | --since DATE [--until DATE]] [--agent ID] [--json]
[--html FILE] [--state-dir DIR]`: the command line over `build_report` and the renderers.

Exit 0 with the report on stdout, 1 when it cannot be made (`ReportError`: an unusable state
directory, config or page path), 2 on a bad command line (argparse's usage and error).
"""

from __future__ import annotations

import os
import re
import sys
import time
from datetime import date, timedelta
from typing import Any

import orjson

from smart_search.report.build import build_report
from smart_search.report.page import render_html
from smart_search.report.text import render_text
from smart_search.report.window import Window

DEFAULT_DAYS = 7
MAX_DAYS = 100_000
_AGENT_ID = re.compile(r"[a-z0-9-]+")


class ReportError(Exception):
    """The report cannot be made (unreadable state directory, unwritable page); exit 1."""


USAGE = (
    "smart-search report [--days N | --since DATE [--until DATE]] [--agent ID] [--json] "
    "[--html FILE] [--state-dir DIR]"
)


def _parser() -> Any:
    import argparse

    parser = argparse.ArgumentParser(
        prog="smart-search report",
        usage=USAGE,
        description="Where the search budget went, from the JSONL search logs.",
    )
    parser.add_argument("--days", type=_positive_days, help=f"last N days (default {DEFAULT_DAYS})")
    parser.add_argument("--since", type=_iso_date, help="first day, YYYY-MM-DD")
    parser.add_argument("--until", type=_iso_date, help="last day, YYYY-MM-DD (default today)")
    parser.add_argument("--agent", type=_agent_id, help="only this agent's searches")
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    parser.add_argument("--html", metavar="FILE", help="also write the report as an HTML page")
    parser.add_argument("--state-dir", metavar="DIR", help="read this state directory's logs")
    return parser


def _positive_days(text: str) -> int:
    import argparse

    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_DAYS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_DAYS}")
    return n


def _iso_date(text: str) -> date:
    import argparse

    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a date like 2026-11-30")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a real date") from None


def _agent_id(text: str) -> str:
    import argparse

    if not _AGENT_ID.fullmatch(text):
        raise argparse.ArgumentTypeError("must contain only lowercase letters, numbers, hyphens")
    return text


def resolve_days(
    days: int | None, since: date | None, until: date | None, today: date
) -> tuple[date, date]:
    """The report's first and last day from the options (ValueError says what is wrong)."""
    if days is not None and (since is not None or until is not None):
        raise ValueError("--days cannot be combined with --since or --until")
    if since is None and until is None:
        n = days or DEFAULT_DAYS
        return today - timedelta(days=n - 1), today
    if since is None:
        assert until is not None
        return until - timedelta(days=DEFAULT_DAYS - 1), until
    until = until or today
    if since > until:
        raise ValueError(f"--since {since} is after --until {until}")
    if (until - since).days >= MAX_DAYS:
        raise ValueError(f"the report covers at most {MAX_DAYS} days")
    return since, until


def main(argv: list[str], *, now: float | None = None) -> int:
    """`smart-search report ...`: 0 on success, 1 when the report cannot be made, 2 on usage."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has printed usage and the error (or --help)
        return int(stop.code or 0)
    try:
        return _run(args, parser, now)
    except ReportError as err:
        sys.stderr.write(f"smart-search report: {err}\n")
        return 1
    except BrokenPipeError:
        # `smart-search report | head`: the reader has what it wanted; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _run(args: Any, parser: Any, now: float | None) -> int:
    from smart_search.budget.ledger import today
    from smart_search.errors import ConfigError
    from smart_search.host.config import load_settings

    try:
        settings = load_settings(os.environ)
    except ConfigError as err:
        raise ReportError(err.message) from None
    now = time.time() if now is None else now
    try:
        since, until = resolve_days(
            args.days, args.since, args.until, date.fromisoformat(today(settings, now))
        )
        if since.year < 2 or until.year > 9998:
            raise OverflowError
    except (ValueError, OverflowError) as err:
        why = "dates must fall between the years 2 and 9998" if type(err) is OverflowError else err
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"smart-search report: error: {why}\n")
        return 2
    state_dir = os.path.expanduser(args.state_dir) if args.state_dir else settings.state_dir
    if not os.path.isdir(state_dir):
        what = "is not a directory" if os.path.exists(state_dir) else "does not exist"
        raise ReportError(
            f"state directory {state_dir} {what} (set SMART_SEARCH_STATE_DIR or --state-dir)"
        )
    window = Window(
        since,
        until,
        agent=args.agent,
        ledger_timezone=settings.timezone,
        monthly_limits=settings.monthly_limits,
        reset_timezones=settings.reset_timezones,
        prices_per_1000=settings.prices_per_1000,
        now=now,
    )
    from smart_search.logs.files import log_dir

    directory = log_dir(state_dir)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ReportError(f"log directory {directory} is not a directory")
    try:
        report = build_report(directory, window)
    except OSError as err:
        raise ReportError(f"cannot read log directory {directory}: {err.strerror}") from None
    if args.html:
        _write_page(args.html, render_html(report))
    out = sys.stdout
    if args.json:
        out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(render_text(report))
    out.flush()
    return 0


def _write_page(path: str, page: str) -> None:
    """Write the page whole or not at all (temp file, then rename)."""
    target = os.path.abspath(os.path.expanduser(path))
    temp = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temp, "w", encoding="utf-8") as fh:
            fh.write(page)
        os.replace(temp, target)
    except OSError as err:
        try:
            os.remove(temp)
        except OSError:
            pass
        raise ReportError(f"cannot write {path}: {err.strerror or err}") from None
