"""Building a report from a logs directory: list once, pick the window's files, count them (in
two processes when there is much to read: a forked child reads half and sends its counts back
pickled), shape the document."""

from __future__ import annotations

import os
from typing import Any

from smart_search.report.aggregate import Aggregator
from smart_search.report.reading import FileStats, list_log_files
from smart_search.report.summary import document
from smart_search.report.window import Window

# From this much log to read, two processes share the files (a month of 50 agents is ~100 MB).
PARALLEL_BYTES = 16 << 20


def build_report(
    directory: str, window: Window, files: FileStats | None = None, *, workers: int | None = None
) -> dict[str, Any]:
    """Read `directory` (a logs directory) for `window`; the report document.

    From PARALLEL_BYTES of logs on, a forked child reads half the files while this process reads
    the other half (`workers` 1 or 2 forces the choice); a child that fails is redone here.
    """
    files = files or FileStats()
    fetch_logs: dict[str, str] = {}
    by_day = list_log_files(directory, files, fetch_logs)
    first = window.first_file_day.isoformat()
    until = window.until.isoformat()
    todo = [(day, path) for day in sorted(by_day) if first <= day <= until for path in by_day[day]]
    if workers is None:
        workers = 2 if (os.cpu_count() or 1) > 1 and _size(todo) >= PARALLEL_BYTES else 1
    agg = Aggregator(window)
    if workers > 1 and len(todo) > 1 and hasattr(os, "fork"):
        mine, theirs = todo[0::2], todo[1::2]
        child = _Child.start(window, theirs)
        agg.read_files(mine, files)
        state = child.result() if child is not None else None
        if state is None:
            agg.read_files(theirs, files)
        else:
            agg.merge(*state, files)
    else:
        agg.read_files(todo, files)
    report = document(agg, files, {day for day, _ in todo})
    from smart_search.report.fetches import count_fetches

    report["fetches"] = count_fetches(fetch_logs, window)
    return report


def _size(todo: list[tuple[str, str]]) -> int:
    total = 0
    for _, path in todo:
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
    return total


class _Child:
    """A forked process that reads some files and sends back its counts, pickled, on a pipe."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd

    @classmethod
    def start(cls, window: Window, todo: list[tuple[str, str]]) -> _Child | None:
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child: never returns, never flushes the parent's buffers
            code = 1
            try:
                import pickle

                os.close(read_end)
                agg, stats = Aggregator(window), FileStats()
                agg.read_files(todo, stats)
                with os.fdopen(write_end, "wb") as out:
                    out.write(pickle.dumps((agg.state(), stats.read, stats.unreadable), 5))
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        return cls(pid, read_end)

    def result(self) -> tuple[Any, ...] | None:
        """The child's (state, files read, files unreadable), or None if it failed."""
        import pickle

        with os.fdopen(self.fd, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        if status != 0 or not data:
            return None
        return pickle.loads(data)  # noqa: S301 - our own child, over our own pipe
