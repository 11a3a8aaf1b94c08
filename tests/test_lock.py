"""The state lock (smart_search/store/lock.py): an exclusive flock waited for in the kernel, with
a deadline. Holders are real processes speaking plain flock(2), and real threads."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from smart_search.store import lock
from tests.conftest import lock_is_free

# Takes the lock with a plain flock, says so, then holds it for argv[2] seconds (or until killed).
HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
    return holder


def test_an_uncontended_lock_is_taken_at_once_and_held_until_released(tmp_path: Path) -> None:
    path = tmp_path / "doc.json.lock"
    fd = lock.acquire(str(path), 5.0)
    assert not lock_is_free(path)
    lock.release(fd)
    assert lock_is_free(path)


def test_the_lock_file_is_created_0600_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "doc.json.lock"
    old = os.umask(0)
    try:
        lock.release(lock.acquire(str(path), 5.0))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_link_at_the_lock_path_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    path = tmp_path / "doc.json.lock"
    path.symlink_to(target)
    with pytest.raises(OSError):
        lock.acquire(str(path), 1.0)
    assert not target.exists()


def test_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    path = str(tmp_path / "doc.json.lock")
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(20):
            fd = lock.acquire(path, 30.0)
            try:
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.001)
                with guard:
                    inside -= 1
            finally:
                lock.release(fd)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1


@pytest.mark.multiprocess
def test_a_waiter_gets_the_lock_when_its_holder_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "doc.json.lock"
    holder = _hold(path, 0.6)
    try:
        started = time.monotonic()
        fd = lock.acquire(str(path), 30.0)
        waited = time.monotonic() - started
        lock.release(fd)
    finally:
        holder.kill()
        holder.wait()
    # It waited for the holder (who had ~0.6 s left), and not for anything like the timeout.
    assert 0.2 < waited < 20


@pytest.mark.multiprocess
def test_a_holder_killed_with_the_lock_loses_it(tmp_path: Path) -> None:
    path = tmp_path / "doc.json.lock"
    holder = _hold(path, 300)
    assert not lock_is_free(path)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    fd = lock.acquire(str(path), 10.0)
    lock.release(fd)


@pytest.mark.multiprocess
def test_a_wait_past_its_timeout_gives_up_and_its_helper_lets_the_lock_go_later(
    tmp_path: Path,
) -> None:
    path = tmp_path / "doc.json.lock"
    holder = _hold(path, 300)
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            lock.acquire(str(path), 0.3)
        waited = time.monotonic() - started
        assert 0.25 < waited < 10
    finally:
        holder.kill()
        holder.wait()
    # The abandoned helper thread takes the lock once the holder is gone and must let it go at
    # once: a later caller (here, another process) gets it.
    deadline = time.monotonic() + 20
    while not lock_is_free(path):
        assert time.monotonic() < deadline, "the abandoned wait kept the lock"
        time.sleep(0.01)
    fd = lock.acquire(str(path), 10.0)
    lock.release(fd)


FILELOCK_HOLDER = """
import sys, time, filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
print("released", flush=True)
time.sleep(30)
"""


@pytest.mark.multiprocess
def test_a_process_of_a_release_that_locked_with_filelock_is_excluded_too(tmp_path: Path) -> None:
    """During an upgrade, processes of the release that used filelock and of this one share the
    ledger: both speak flock on the same `.lock` file."""
    path = tmp_path / "search-quota.json.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", FILELOCK_HOLDER, str(path), "1.5"], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with pytest.raises(TimeoutError):
            lock.acquire(str(path), 0.2)
        fd = lock.acquire(str(path), 30.0)
        try:
            assert holder.stdout.readline().strip() == b"released"
        finally:
            lock.release(fd)
    finally:
        holder.kill()
        holder.wait()
