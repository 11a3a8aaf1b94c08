"""One JSONL line per smart_search call in `<state_dir>/logs/search-YYYY-MM-DD.jsonl` (spec §11,
RULINGS §6).

Each line is appended with ONE write to a file opened O_APPEND, so concurrent writers never
interleave inside a line. Retention goes by the date in the file name only (never mtime) and
touches nothing but `search-YYYY-MM-DD.jsonl` files. A log failure never fails a search.
"""

from __future__ import annotations

import os
import re
import sys
from datetime import date, timedelta
from typing import Any

import orjson

LOG_DIR = "logs"
_NAME = re.compile(r"search-(\d{4}-\d{2}-\d{2})\.jsonl")


def log_dir(state_dir: str) -> str:
    return os.path.join(state_dir, LOG_DIR)


def append_search_log(
    state_dir: str, day: str, record: dict[str, Any], retention_days: int
) -> None:
    """Append `record`; never raises (a broken log must not break the search)."""
    try:
        directory = log_dir(state_dir)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        path = os.path.join(directory, f"search-{day}.jsonl")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        prune_logs(directory, day, retention_days)
    except Exception as exc:  # noqa: BLE001 - logging is best effort by contract
        try:
            sys.stderr.write(f"smart-search: search log not written ({exc.__class__.__name__})\n")
        except Exception:  # noqa: BLE001
            pass


def prune_logs(directory: str, today: str, retention_days: int) -> list[str]:
    """Delete search logs dated more than `retention_days` before `today`; returns their names."""
    oldest = date.fromisoformat(today) - timedelta(days=retention_days)
    removed = []
    for name in os.listdir(directory):
        match = _NAME.fullmatch(name)
        if not match:
            continue
        try:
            dated = date.fromisoformat(match.group(1))
        except ValueError:
            continue  # search-2026-13-45.jsonl is not ours to judge
        if dated < oldest:
            try:
                os.remove(os.path.join(directory, name))
                removed.append(name)
            except FileNotFoundError:
                pass  # another process pruned it first
    return removed
