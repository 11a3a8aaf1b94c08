"""Every log file smart-search writes: one JSONL line per smart_search call in
`<state_dir>/logs/search-YYYY-MM-DD.jsonl` (spec 11, RULINGS 6), one per smart_fetch call in
`fetch-YYYY-MM-DD.jsonl` beside it (issue 21; its own shape, schemas/fetch-log.json), and the
tracebacks of internal faults in `<state_dir>/logs/internal-errors.log`.

Each line is appended with ONE write to a file opened O_APPEND, so concurrent writers never
interleave inside a line. Retention goes by the date in the file name only (never mtime) and
touches nothing but `search-YYYY-MM-DD.jsonl` and `fetch-YYYY-MM-DD.jsonl` files. A log failure
never fails a search.

Log files are opened relative to a descriptor of `logs/` that was itself opened without following
a link, and with O_NOFOLLOW: a link planted at `logs/` or at a log file is refused, never written
through. Every record is scrubbed of the configured API keys before it is written.
"""

from __future__ import annotations

import os
import stat
import sys
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from smart_search.host.config import Settings

LOG_DIR = "logs"
INTERNAL_ERRORS_LOG = "internal-errors.log"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# search-2026-11-30.jsonl (the ledger's day), and the copies a rotation tool may leave beside it,
# search-2026-11-30.jsonl.1, ....jsonl.2.gz (the report reads those too; retention leaves them).
# Patterns, compiled by `re` on first use (this module loads on every call; these seldom run).
SEARCH_LOG = r"search-([0-9]{4}-[0-9]{2}-[0-9]{2})\.jsonl"
ROTATED_SEARCH_LOG = SEARCH_LOG + r"(?:\.([0-9]{1,6}))?(\.gz)?"
FETCH_LOG = r"fetch-([0-9]{4}-[0-9]{2}-[0-9]{2})\.jsonl"  # smart_fetch's log (fetch_line.py)


def search_log_name(day: str) -> str:
    return f"search-{day}.jsonl"


def fetch_log_name(day: str) -> str:
    return f"fetch-{day}.jsonl"


def log_dir(state_dir: str) -> str:
    return os.path.join(state_dir, LOG_DIR)


def append_search_log(
    state_dir: str,
    day: str,
    record: dict[str, Any],
    retention_days: int,
    secrets: tuple[str, ...] = (),
) -> None:
    """Append `record` (scrubbed of `secrets`); never raises (a broken log must not break the
    search)."""
    append_log(state_dir, search_log_name(day), day, record, retention_days, secrets)


def log_for(settings: Settings, name: str, day: str, line: dict[str, Any]) -> None:
    """Append `line` to the log file `name` of `day` in `settings`' state directory, under its
    retention, scrubbed of every key it holds; never raises."""
    from smart_search.text.scrub import settings_secrets

    secrets = settings_secrets(settings)
    append_log(settings.state_dir, name, day, line, settings.log_retention_days, secrets)


def append_log(
    state_dir: str,
    name: str,
    day: str,
    record: dict[str, Any],
    retention_days: int,
    secrets: tuple[str, ...],
) -> None:
    """Append `record` (scrubbed of `secrets`) as one line of the log file `name` (the search
    log or the fetch log of `day`), then prune files past `retention_days`; never raises."""
    try:
        if secrets:
            from smart_search.text.scrub import scrub

            record = scrub(record, secrets)
        line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        dir_fd = open_log_dir(state_dir)
        try:
            append(dir_fd, name, line)
            prune_logs(dir_fd, day, retention_days)
        finally:
            os.close(dir_fd)
    except Exception as exc:  # noqa: BLE001 - logging is best effort by contract
        try:
            kind = name.split("-", 1)[0]
            sys.stderr.write(f"smart-search: {kind} log not written ({exc.__class__.__name__})\n")
        except Exception:  # noqa: BLE001
            pass


def append_internal_error(state_dir: str, text: str, secrets: tuple[str, ...]) -> None:
    """Append a dated traceback to `logs/internal-errors.log`, scrubbed of `secrets` (a
    traceback can quote a header or a URL). Raises on failure: the caller decides."""
    from smart_search.text.scrub import scrub
    from smart_search.text.stamps import utc_stamp

    stamped = f"{utc_stamp()} {text}"
    dir_fd = open_log_dir(state_dir)
    try:
        append(dir_fd, INTERNAL_ERRORS_LOG, scrub(stamped, secrets).encode("utf-8", "replace"))
    finally:
        os.close(dir_fd)


def open_log_dir(state_dir: str) -> int:
    """A descriptor of `<state_dir>/logs`, created 0700; raises if either is unsafe or a link."""
    from smart_search.store.statefile import check_owned, ensure_state_dir

    ensure_state_dir(state_dir)
    directory = log_dir(state_dir)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    # O_NOFOLLOW: a link planted at logs/ is refused (ELOOP), never followed.
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC)
    try:
        check_owned(directory, os.fstat(dir_fd), "Log directory", stat.S_ISDIR)
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd


def append(dir_fd: int, name: str, data: bytes) -> None:
    """One write on an O_APPEND descriptor of `name` (never through a link), created 0600."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK
    fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    try:
        from smart_search.store.statefile import check_owned

        check_owned(name, os.fstat(fd), "Log file", stat.S_ISREG)
        os.write(fd, data)
    finally:
        os.close(fd)


def _log_stamp(name: str) -> str | None:
    """The date part of a day's log name (`SEARCH_LOG`), without compiling the pattern: this
    runs on every call."""
    if len(name) != 23 or not (name.startswith("search-") and name.endswith(".jsonl")):
        return None
    stamp = name[7:17]
    digits = stamp[:4] + stamp[5:7] + stamp[8:]
    if stamp[4] != "-" or stamp[7] != "-" or not (digits.isascii() and digits.isdigit()):
        return None
    return stamp


def prune_logs(directory: str | int, today: str, retention_days: int) -> list[str]:
    """Delete search and fetch logs dated more than `retention_days` before `today`; returns
    their names.

    `directory` is a path or a descriptor of the logs directory."""
    oldest = date.fromisoformat(today) - timedelta(days=retention_days)
    dir_fd = directory if isinstance(directory, int) else None
    removed = []
    for name in os.listdir(directory):
        # fetch-YYYY-MM-DD.jsonl is dated as its search- twin would be.
        stamp = _log_stamp("search-" + name[6:] if name.startswith("fetch-") else name)
        if stamp is None:
            continue
        try:
            dated = date.fromisoformat(stamp)
        except ValueError:
            continue  # search-2026-13-45.jsonl is not ours to judge
        if dated < oldest:
            try:
                if dir_fd is None:
                    os.remove(os.path.join(str(directory), name))
                else:
                    os.remove(name, dir_fd=dir_fd)
                removed.append(name)
            except FileNotFoundError:
                pass  # another process pruned it first
    return removed
