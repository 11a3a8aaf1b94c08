"""A private, real `redis-server` for tests: loopback only, a free port, a temp dir, no disk.

`RedisServer(tmp).start()` runs `redis-server --port N --bind 127.0.0.1 --save "" --appendonly no
--dir TMP` and waits until it answers PING; `stop()` ends it (only the process it started);
`kill()` / `restart()` let fault tests take it away mid-run. When no `redis-server` binary exists
the tests that need one skip with that reason, except under CI (`CI` set): there they fail, so CI
can never pass by skipping the Redis half of the contract suite.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

NO_SERVER = "no redis-server binary on PATH (Debian: apt-get install redis-server)"


NO_CLIENT = "the redis client is not installed (pip install -e '.[test]' or 'redis>=5')"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"CI must run the Redis tests, but {reason}")
    pytest.skip(reason)


def server_binary() -> str:
    """The redis-server path; skips (fails under CI) when there is none, or no client."""
    import importlib.util

    if importlib.util.find_spec("redis") is None:
        _unavailable(NO_CLIENT)
    found = shutil.which("redis-server")
    if found is None:
        _unavailable(f"there is {NO_SERVER}")
    assert found is not None
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    def __init__(self, tmp: Path, *, durable: bool = False, password: str | None = None) -> None:
        self.binary = server_binary()
        self.dir = tmp
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.durable = durable  # append-only file, fsync'd per write: survives a SIGKILL
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--dir", str(self.dir), "--daemonize", "no", "--loglevel", "warning"]  # fmt: skip
        if self.durable:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if self.password:
            args += ["--requirepass", self.password]
        log = open(self.dir / "redis.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        log.close()
        atexit.register(self.stop)  # never outlive the test run, whatever happens to it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {(self.dir / 'redis.log').read_text()}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not answer PING within 30 s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                if self.password:
                    pw = self.password.encode()
                    sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(pw), pw))
                    sock.recv(64)
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-whatever, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the server accepts nothing and answers nothing (a hung server)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
