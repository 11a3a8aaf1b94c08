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
from typing import Any

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
    def __init__(
        self,
        tmp: Path,
        *,
        durable: bool = False,
        password: str | None = None,
        extra: list[str] | None = None,
    ) -> None:
        self.binary = server_binary()
        self.dir = tmp
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.durable = durable  # append-only file, fsync'd per write: survives a SIGKILL
        self.password = password
        self.extra = list(extra or [])  # more `--name value` settings, e.g. replicaof, maxmemory
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--dir", str(self.dir), "--daemonize", "no", "--loglevel", "warning"]  # fmt: skip
        if self.durable:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if self.password:
            args += ["--requirepass", self.password, "--masterauth", self.password]
        return args + self.extra

    def start(self) -> RedisServer:
        args = self.command()
        log = open(self.dir / "redis.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        log.close()
        atexit.register(self.stop)  # never outlive the test run, whatever happens to it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{args[0]} exited: {(self.dir / 'redis.log').read_text()}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{args[0]} did not answer PING within 30 s")

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


# --- Sentinel: a primary, a replica and the sentinels that fail over between them ---------------

NO_SENTINEL = "no redis-sentinel binary on PATH (Debian: apt-get install redis-sentinel)"


def sentinel_binary() -> str:
    server_binary()  # the client and the server are needed too
    found = shutil.which("redis-sentinel")
    if found is None:
        _unavailable(f"there is {NO_SENTINEL}")
    assert found is not None
    return found


class SentinelServer(RedisServer):
    """One `redis-sentinel` watching `service` at `primary_port` (its config file is its own:
    Sentinel rewrites it as it learns the replicas, the other sentinels and each failover)."""

    def __init__(self, tmp: Path, settings: dict[str, Any]) -> None:
        super().__init__(tmp, password=settings.get("sentinel_password"))
        self.binary = sentinel_binary()
        self.settings = settings

    def command(self) -> list[str]:
        s = self.settings
        service = s["service"]
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            "daemonize no",
            f'dir "{self.dir}"',
            "loglevel notice",
            f"sentinel monitor {service} 127.0.0.1 {s['primary_port']} {s['quorum']}",
            f"sentinel down-after-milliseconds {service} {s['down_after_ms']}",
            f"sentinel failover-timeout {service} {s['failover_timeout_ms']}",
            f"sentinel parallel-syncs {service} 1",
        ]
        if s.get("password"):
            lines.append(f"sentinel auth-pass {service} {s['password']}")
        if s.get("sentinel_password"):
            lines.append(f"requirepass {s['sentinel_password']}")
        conf = self.dir / "sentinel.conf"
        if not conf.exists():  # a restart keeps what this sentinel learned
            conf.write_text("\n".join(lines) + "\n")
        return [self.binary, str(conf)]


class SentinelGroup:
    """A primary, one replica (`replicaof`) and 1 or 3 sentinels, on free loopback ports in
    `tmp`, for failover tests:

        with SentinelGroup(tmp_path, sentinels=3).start() as group:
            env.redis_url = group.url                # redis+sentinel://127.0.0.1:p1,.../mymaster/0
            old = group.kill_primary()               # SIGKILL
            new = group.wait_failover(old)           # the replica, promoted by the sentinels

    Quorum is a majority of the sentinels; `down_after_ms` (1 s) and `failover_timeout_ms` (3 s)
    are short so a failover takes seconds. `stop()` (or leaving the `with`) ends every process
    it started, also those paused or killed, and an atexit hook does the same if a test dies
    before it. `promote_lagging_replica()` makes Sentinel promote a replica that lacks the last
    writes (issue 27 point 1's fourth fault).
    """

    def __init__(
        self,
        tmp: Path,
        *,
        sentinels: int = 1,
        service: str = "mymaster",
        password: str | None = None,
        sentinel_password: str | None = None,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
    ) -> None:
        assert sentinels in (1, 3)
        self.dir = tmp
        self.service = service
        self.password = password
        self.sentinel_password = sentinel_password
        self.count = sentinels
        self.timing = (down_after_ms, failover_timeout_ms)
        self.nodes: list[RedisServer] = []
        self.sentinels: list[SentinelServer] = []

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> SentinelGroup:
        try:
            primary = RedisServer(self.dir / "node0", password=self.password).start()
            self.nodes.append(primary)
            replicaof = ["--replicaof", "127.0.0.1", str(primary.port)]
            replica = RedisServer(self.dir / "node1", password=self.password, extra=replicaof)
            self.nodes.append(replica.start())
            self._wait(lambda: self.info(replica).get("master_link_status") == "up",
                       "the replica to sync with the primary")  # fmt: skip
            settings = {
                "service": self.service,
                "primary_port": primary.port,
                "quorum": self.count // 2 + 1,
                "down_after_ms": self.timing[0],
                "failover_timeout_ms": self.timing[1],
                "password": self.password,
                "sentinel_password": self.sentinel_password,
            }
            for i in range(self.count):
                sentinel = SentinelServer(self.dir / f"sentinel{i}", settings)
                self.sentinels.append(sentinel.start())
            self.wait_watching()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in [*self.sentinels, *self.nodes]:
            proc.stop()

    def __enter__(self) -> SentinelGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what it looks like -------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The `state_backend.url` that reaches this group's primary through its sentinels."""
        auth = f":{self.password}@" if self.password else ""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        query = f"?sentinel_password={self.sentinel_password}" if self.sentinel_password else ""
        return f"redis+sentinel://{auth}{hosts}/{self.service}/0{query}"

    def client(self, node: RedisServer) -> Any:
        """A plain client of one node (primary or replica), bypassing the sentinels."""
        import redis

        return redis.Redis(port=node.port, password=self.password, socket_timeout=10)

    def sentinel_client(self, i: int = 0) -> Any:
        import redis

        return redis.Redis(
            port=self.sentinels[i].port, password=self.sentinel_password,
            socket_timeout=10, decode_responses=True,
        )  # fmt: skip

    def info(self, node: RedisServer) -> dict[str, Any]:
        try:
            return dict(self.client(node).info("replication"))
        except Exception:  # noqa: BLE001 - a node that is down or paused has no info
            return {}

    def master_port(self, i: int = 0) -> int | None:
        """The primary's port as sentinel `i` names it now."""
        try:
            addr = self.sentinel_client(i).sentinel_get_master_addr_by_name(self.service)
        except Exception:  # noqa: BLE001
            return None
        return int(addr[1]) if addr else None

    @property
    def primary(self) -> RedisServer:
        port = self.master_port()
        return next(n for n in self.nodes if n.port == port)

    @property
    def replica(self) -> RedisServer:
        port = self.master_port()
        return next(n for n in self.nodes if n.port != port)

    # -- waiting --------------------------------------------------------------------------------
    def _wait(self, done: Any, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(0.1)
        logs = "\n".join(
            f"--- {p.dir.name}\n{(p.dir / 'redis.log').read_text()[-3000:]}"
            for p in [*self.nodes, *self.sentinels]
            if (p.dir / "redis.log").exists()
        )
        raise RuntimeError(f"gave up waiting for {what} after {timeout} s\n{logs}")

    def _watching(self, i: int) -> bool:
        """Sentinel `i` sees a healthy primary, a healthy replica and every other sentinel."""
        try:
            sc = self.sentinel_client(i)
            master = sc.sentinel_master(self.service)
            replicas = sc.sentinel_slaves(self.service)
        except Exception:  # noqa: BLE001 - not up yet
            return False
        healthy = master.get("is_master") and not master.get("is_sdown")
        good = [r for r in replicas if not r.get("is_sdown") and not r.get("is_disconnected")
                and r.get("master-link-status") == "ok"]  # fmt: skip
        others = master.get("num-other-sentinels", 0) >= self.count - 1
        return bool(healthy and good and others)

    def wait_watching(self, timeout: float = 90) -> None:
        """Until every sentinel sees the primary, its replica, and the other sentinels."""
        self._wait(lambda: all(self._watching(i) for i in range(self.count)),
                   "the sentinels to see the primary and its replica", timeout)  # fmt: skip

    # -- faults -----------------------------------------------------------------------------------
    def kill_primary(self) -> RedisServer:
        """SIGKILL the current primary; returns it (it stays down)."""
        old = self.primary
        old.kill()
        return old

    def wait_failover(self, old: RedisServer, timeout: float = 90) -> RedisServer:
        """Until every sentinel offers another node as a healthy primary (what a client asking
        it is told: not the address alone, which a sentinel names mid-failover) and that node
        says it is one; returns the new primary."""

        def promoted() -> bool:
            ports = set()
            for i in range(self.count):
                try:
                    state = self.sentinel_client(i).sentinel_master(self.service)
                except Exception:  # noqa: BLE001 - a sentinel busy or restarting
                    return False
                flags = state.get("flags", "")
                if not state.get("is_master") or "down" in flags or "failover" in flags:
                    return False
                ports.add(int(state["port"]))
            if len(ports) != 1 or old.port in ports:
                return False
            node = next(n for n in self.nodes if n.port in ports)
            return self.info(node).get("role") == "master"

        self._wait(promoted, f"a sentinel failover away from port {old.port}", timeout)
        return self.primary

    def promote_lagging_replica(self, write: Any) -> RedisServer:
        """A failover to a replica that had not received the last writes.

        The replica first has everything (WAIT), then stops (SIGSTOP) and its replication link
        is cut (CLIENT KILL TYPE replica on the primary: on loopback, whatever the primary sent
        a stopped replica would wait in its socket buffer and arrive on SIGCONT, so without the
        cut the replica would not lag). `write(primary)` then writes to the primary only (any
        client, e.g. smart-search processes through `url`); the primary dies (SIGKILL); the
        replica resumes (SIGCONT), and the sentinels promote it without those writes. Returns
        the new primary."""
        primary, replica = self.primary, self.replica
        client = self.client(primary)
        assert client.wait(1, 10000) >= 1, "the replica did not acknowledge the earlier writes"
        replica.pause()
        try:
            client.client_kill_filter(_type="replica")
            write(primary)
        finally:
            primary.kill()
            replica.resume()
        return self.wait_failover(primary)


class ReplyDropper:
    """A loopback TCP relay in front of a server that, once armed, passes a command through
    and then closes the client's connection instead of relaying the server's reply: the command
    ran, the client cannot know (a reply lost in a crash, a failover or a cut network)."""

    def __init__(self, target_port: int) -> None:
        import threading

        self.target = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.armed: bytes | None = None
        self.dropped = 0
        self.done = threading.Event()  # set once a dropped command has had its time to run
        self._threading = threading
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_reply_to(self, command: bytes) -> None:
        """Drop the reply to the next `command` (e.g. b"EXEC") any client sends."""
        self.armed = command

    def _accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            server = socket.create_connection(("127.0.0.1", self.target))
            self._socks += [client, server]
            self._threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            self._threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        """Client to server; after the armed command, the client's connection is cut once the
        server has had the time to run it."""
        while data := self._recv(client):
            marker = self.armed
            hit = marker is not None and b"\r\n" + marker + b"\r\n" in b"\r\n" + data.upper()
            if hit:
                self.armed = None
                self.dropped += 1
                client.shutdown(socket.SHUT_RDWR)  # the client hears nothing more
            server.sendall(data)
            if hit:
                time.sleep(0.5)  # the server runs it (and answers into the void)
                server.close()
                self.done.set()
                return

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        while data := self._recv(src):
            try:
                dst.sendall(data)
            except OSError:
                return

    @staticmethod
    def _recv(sock: socket.socket) -> bytes:
        try:
            return sock.recv(65536)
        except OSError:
            return b""

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        for sock in self._socks:
            try:
                sock.close()
            except OSError:
                pass
