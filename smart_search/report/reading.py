"""Reading the search logs: one listing of `<state_dir>/logs`, each file streamed in chunks.

A line longer than MAX_LINE is dropped as it streams past and counted as `oversized`, never held
in memory; a FIFO or a directory named like a log is unreadable, never a hang. Which names are
logs is `logs.ROTATED_SEARCH_LOG` (the day's file and the copies a rotation tool leaves).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import date
from typing import Any

from smart_search.logs.files import FETCH_LOG, ROTATED_SEARCH_LOG

MAX_LINE = 1 << 20
CHUNK = 1 << 20


class FileStats:
    """What the directory listing and the reads found, for the report's `files` block."""

    def __init__(self) -> None:
        self.matched = 0
        self.read = 0
        self.unreadable = 0
        self.ignored = 0


def list_log_files(
    directory: str, stats: FileStats, fetch_logs: dict[str, str] | None = None
) -> dict[str, list[str]]:
    """Day → paths of that day's search log files (rotated copies included), from one listing.
    With `fetch_logs`, each day's fetch log (`FETCH_LOG`) is put there (day → path) rather than
    counted among the files that are no log.

    Raises OSError when the directory exists but cannot be listed; a missing one lists nothing.
    """
    by_day: dict[str, list[str]] = {}
    try:
        entries = os.scandir(directory)
    except FileNotFoundError:
        return by_day
    with entries:
        for entry in entries:
            match = re.fullmatch(ROTATED_SEARCH_LOG, entry.name)
            if match is None:
                fetched = fetch_logs is not None and re.fullmatch(FETCH_LOG, entry.name)
                if fetched and _is_day(fetched.group(1)):
                    fetch_logs[fetched.group(1)] = entry.path  # type: ignore[index]
                else:
                    stats.ignored += 1
                continue
            if not _is_day(match.group(1)):
                stats.ignored += 1  # search-2026-13-45.jsonl is nobody's day
                continue
            stats.matched += 1
            by_day.setdefault(match.group(1), []).append(entry.path)
    for paths in by_day.values():
        paths.sort()
    return by_day


def _is_day(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def read_batches(path: str, skipped: dict[str, int]) -> Iterator[tuple[list[bytes], bool]]:
    """Yield (lines, is_tail) from one file, streamed; `is_tail` marks a last line with no newline.

    A line over MAX_LINE bytes is dropped as it streams past and counted as `oversized`.
    """
    with _open_regular(path) as raw:
        fh: Any = raw
        if path.endswith(".gz"):
            import gzip

            fh = gzip.GzipFile(fileobj=raw, mode="rb")  # closing it leaves `raw` to the with
        yield from _split(fh, skipped)


def _open_regular(path: str) -> Any:
    """Open a regular file for reading; anything else (a FIFO, a directory) raises OSError.

    O_NONBLOCK keeps a FIFO named like a log from blocking the open until a writer comes.
    """
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _split(fh: Any, skipped: dict[str, int]) -> Iterator[tuple[list[bytes], bool]]:
    """The lines of a binary stream, in batches; see `read_batches`."""
    rest = b""
    dropping = False
    while True:
        chunk = fh.read(CHUNK)
        if not chunk:
            break
        parts = (rest + chunk if rest else chunk).split(b"\n")
        rest = parts.pop()
        if dropping and parts:
            skipped["oversized"] += 1
            del parts[0]  # the end of the oversized line
            dropping = False
        if dropping:
            rest = b""
        elif len(rest) > MAX_LINE:
            dropping, rest = True, b""
        if parts and max(map(len, parts)) > MAX_LINE:
            kept = [line for line in parts if len(line) <= MAX_LINE]
            skipped["oversized"] += len(parts) - len(kept)
            parts = kept
        if parts:
            yield parts, False
    if dropping:
        skipped["oversized"] += 1
    elif rest:
        yield [rest], True
