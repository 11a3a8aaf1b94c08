"""A fleet month (issue 18, point 7): many hosts, one Redis, a month of cron traffic, in-process.

    python bench/fleet.py [--days 32] [--hosts 10] [--agents 20] [--seed 7] [--start 2026-12-01]

`--hosts` hosts (each its own state directory and Settings, all with the same
`state_backend: {"kind": "redis", ...}`) share one ledger, breaker, pacing and result cache
through one private redis-server this bench starts on loopback. Each host runs `--agents` cron
agents with allocations in config. Time is an injected clock that jumps from one cron slot to the
next; within a slot every host runs its due agents in its own thread, at the same moment, so the
same question asked on several hosts meets in the cache's single-flight. Every call is a real
`run_tiers` walk (breaker, ledger reserve / settle, cache, single-flight, web pacing) against
fake providers; each cron agent completes its day after its last run (its unused allocation
goes to the shared pool):

- Gemini bills 0-3 search queries a call, Brave 1 per 2xx (and reports its monthly remaining);
  now and then a request's answer never comes back (a read timeout after the request left: the
  provider may have billed, and says nothing), and the call retries if the ledger lets it.
- Each fake keeps its own books per window on its own clock (Gemini: Los Angeles day and month,
  Brave: UTC), computed here, independently of the ledger's `windows`.
- The web tier (DuckDuckGo) is a fake too and always answers.

The same month (same seed, same questions, same billing draws) runs twice: cache on, cache off.
Printed per provider: units the fakes billed, units the ledger charged, the highest use of any
daily and of every monthly window against its limit; then what the cache and single-flight saved.

The cache takes no clock (cache.py calls time.time()): `SimCacheStore` wraps the store and puts
the injected clock's time on every entry and lookup, so TTLs run on the simulated month. Leases
(single-flight) stay on real time: they cover requests really in flight.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from calendar import timegm
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PROVIDERS = ("gemini", "brave")
FAKE_ZONES = {"gemini": ZoneInfo("America/Los_Angeles"), "brave": ZoneInfo("UTC")}
WORST = {"gemini": 3, "brave": 1}
SLOT_S = 3600  # cron runs on the hour
RUNS_PER_DAY = 3  # each cron agent runs three times a (UTC) weekday, once on weekends
SHARED_SHARE = 0.6  # of an agent's runs, how many ask its fleet-wide job's question

# Questions: routed by the product's own keywords (finance → Gemini, with a short cache TTL;
# space → Brave; the rest → the default provider, Gemini here).
TOPICS = (
    "rust borrow checker", "python asyncio", "kubernetes operators", "postgres vacuum",
    "http/3 quic", "webassembly gc", "linux io_uring", "raft consensus", "bloom filters",
    "vector databases", "zstd compression", "tls 1.3 handshake", "oauth device flow",
    "crdt sync", "ebpf tracing", "sqlite wal mode", "redis streams", "tcp bbr", "utf-8 nfkc",
    "git rebase onto", "docker layer caching", "nix flakes", "prometheus histograms",
    "opentelemetry traces", "grpc deadlines", "jwt rotation", "dns over https", "ipv6 slaac",
    "btrfs snapshots", "zfs arc", "cuda streams", "llm quantization", "attention kernels",
    "federated learning", "differential privacy", "homomorphic encryption", "lattice crypto",
    "post-quantum tls", "mesh networking", "lora radios")  # fmt: skip
ASPECTS = ("explained", "best practices", "benchmarks", "pitfalls")
MISSIONS = ("artemis schedule", "europa clipper", "jwst deep field", "mars sample return",
            "psyche mission", "dragonfly titan", "roman telescope", "iss deorbit")  # fmt: skip
COMPANIES = ("acme", "globex", "initech", "umbrella", "hooli", "stark")


def _pool() -> list[str]:
    """General questions (Gemini), space ones (Brave) and finance ones (Gemini, short cache
    TTL), interleaved so that the popular end of the Zipf draw holds some of each."""
    general = [f"{t} {a}" for a in ASPECTS for t in TOPICS]
    space = [f"nasa {m} {a}" for a in ("news", "update", "timeline") for m in MISSIONS]
    finance = [f"{c} stock price" for c in COMPANIES]
    pool: list[str] = []
    while general or space or finance:
        pool.extend(general[:5])
        del general[:5]
        for rest in (space[:2], finance[:1]):
            pool.extend(rest)
        del space[:2], finance[:1]
    return pool


POOL = _pool()


def utc(text: str) -> float:
    return float(timegm(datetime.strptime(text, "%Y-%m-%d").timetuple()))


def draw(seed: int, *parts: Any) -> float:
    """A uniform draw in [0, 1) fixed by `seed` and `parts`: the same in both runs of a month,
    whatever order the threads happen to run in."""
    text = "|".join(str(p) for p in (seed, *parts)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") / 2**64


def zipf_pick(u: float, pool: list[str], s: float = 1.0) -> str:
    weights = [1 / (i + 1) ** s for i in range(len(pool))]
    target = u * sum(weights)
    for question, w in zip(pool, weights, strict=True):
        target -= w
        if target < 0:
            return question
    return pool[-1]


class SimClock:
    """The injected clock: one value every host reads; only the driver moves it."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


# -- fakes ---------------------------------------------------------------------------------------


@dataclass
class Books:
    """What the fakes billed (their own books) and what happened on the way."""

    billed: Counter = field(default_factory=Counter)  # (provider, window) -> units
    total: Counter = field(default_factory=Counter)  # provider -> units
    calls: Counter = field(default_factory=Counter)  # provider -> requests received
    timeouts: Counter = field(default_factory=Counter)  # provider -> answers that never came
    unseen: Counter = field(default_factory=Counter)  # provider -> worst case - billed, timeouts
    past_limit: Counter = field(default_factory=Counter)  # provider -> requests past a window
    web: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def fake_windows(provider: str, now: float) -> tuple[str, str]:
    local = datetime.fromtimestamp(now, FAKE_ZONES[provider])
    return local.strftime("%Y-%m-%d"), local.strftime("%Y-%m")


class FleetProviders:
    """Gemini, Brave and DuckDuckGo as the `RealBackends` seam sees them, billing as the real ones
    do, each on its own clock. Draws are fixed by (seed, slot, host, agent, attempt)."""

    def __init__(self, clock: SimClock, books: Books, limits: dict[str, tuple[int, int]],
                 seed: int, timeout_rate: float, latency_s: float) -> None:  # fmt: skip
        self.clock = clock
        self.books = books
        self.limits = limits
        self.seed = seed
        self.timeout_rate = timeout_rate
        self.latency_s = latency_s
        self.local = threading.local()  # who is asking: (host, agent), set per call

    def _bill(self, provider: str, units: int) -> int:
        """Book `units`; returns what is left this month on the fake's own books."""
        day, month = fake_windows(provider, self.clock())
        daily, monthly = self.limits[provider]
        b = self.books
        with b.lock:
            b.calls[provider] += 1
            if b.billed[(provider, day)] >= daily or b.billed[(provider, month)] >= monthly:
                b.past_limit[provider] += 1  # the ledger let a request through a full window
            b.billed[(provider, day)] += units
            b.billed[(provider, month)] += units
            b.total[provider] += units
            return max(0, monthly - b.billed[(provider, month)])

    def call_api(self, provider, query, settings, deadline, may_retry, **_):  # noqa: ANN001, ANN201
        from smart_search.errors import Timeout
        from smart_search.sources.providers.calls import ProviderCall
        from smart_search.sources.providers.parsing import Answer

        who = getattr(self.local, "who", ("?", "?"))
        reported = 0  # what the call says was billed: the truth, or the worst case if unknown
        latencies: list[int] = []
        for attempt in range(2):
            if self.latency_s:
                time.sleep(self.latency_s)  # real time: lets other hosts meet this flight
            latencies.append(1)
            u = draw(self.seed, self.clock(), *who, provider, query, attempt)
            units = 1 if provider == "brave" else int(draw(self.seed, u, "units") * 4)  # 0-3
            left = self._bill(provider, units)
            if u < self.timeout_rate:
                # Sent, billed, answer lost: the caller cannot know, so it counts the worst case.
                with self.books.lock:
                    self.books.timeouts[provider] += 1
                    self.books.unseen[provider] += WORST[provider] - units
                reported += WORST[provider]
                if attempt == 0 and may_retry(reported):
                    continue
                err = Timeout("The answer never came back.", sent=True)
                return ProviderCall(None, err, attempt, latencies, reported, None, None)
            reported += units
            if provider == "gemini":
                answer = Answer(f"About {query}: an answer.")
                return ProviderCall(answer, None, attempt, latencies, reported, 200, None)
            web = [{"title": query, "url": "https://example.org/", "snippet": "s"}]
            seen = {"remaining": left, "limit": self.limits["brave"][1]}
            return ProviderCall(Answer(web), None, attempt, latencies, reported, 200, seen)
        raise AssertionError("unreachable")

    def fetch_engine(self, engine, query, settings, deadline, before_send, **_):  # noqa: ANN001, ANN201
        from smart_search.sources.engines.fetch import EngineCall

        before_send()
        with self.books.lock:
            self.books.web += 1
        web = [{"title": query, "url": "https://example.org/w", "snippet": "s"}]
        return EngineCall(web, None, True, [1.0], 200)


class SimCacheStore:
    """The store, with the injected clock's time on cache entries and lookups (cache.py reads
    time.time() itself). Everything else goes straight through. One per call: it also notes
    whether this call missed and then found the key (it waited on another host's flight)."""

    def __init__(self, store: Any, clock: SimClock) -> None:
        self._store = store
        self._clock = clock
        self.missed = False
        self.joined = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def cache_get(self, key: str, now: float) -> Any:
        entry = self._store.cache_get(key, self._clock())
        if entry is None:
            self.missed = True
        elif self.missed:
            self.joined = True
        return entry

    def cache_put(self, key: str, entry: Any, **limits: Any) -> None:
        from smart_search.store import CacheEntry

        now = self._clock()
        ttl = entry.expires_at - entry.stored_at
        self._store.cache_put(key, CacheEntry(entry.value, now, now + ttl), **limits)


# -- the fleet -----------------------------------------------------------------------------------


@dataclass
class Tally:
    answered: Counter = field(default_factory=Counter)  # provider_used, "cache", "error"
    cache_units_saved: int = 0  # what the answers served from the cache had cost
    joined: int = 0  # answers taken from another host's flight after waiting on it
    charged_attempts: Counter = field(default_factory=Counter)  # provider -> attempt units
    lock: threading.Lock = field(default_factory=threading.Lock)


def agent_name(host: int, agent: int) -> str:
    return f"h{host:02d}-cron-{agent:02d}"


def limits_for(hosts: int, agents: int) -> dict[str, tuple[int, int]]:
    """Daily and monthly limits scaled to the fleet (n agents) so that the month runs into them:
    with the cache on, a busy weekday's questions reach the daily limits; with it off, every day
    does and the monthly limits are reached too."""
    n = hosts * agents
    return {
        "gemini": (max(8, n), max(40, n * 28)),
        "brave": (max(4, n * 3 // 25 + 2), max(20, n * 7 // 2)),
    }


def allocation(agent: int) -> dict[str, int]:
    """Every eighth agent is allocated one Gemini call's worst case (3 units), every tenth one
    Brave unit: about 3/8 of Gemini's day and most of Brave's; the rest is provider-direct, and
    what an agent has not used goes to the shared pool when it completes its day."""
    return {"gemini": 3 if agent % 8 == 0 else 0, "brave": 1 if agent % 10 == 0 else 0}


def fleet_config(hosts: int, agents: int, limits: dict[str, tuple[int, int]], *,
                 cache: bool, url: str, prefix: str) -> dict[str, Any]:  # fmt: skip
    allocations = {agent_name(h, a): allocation(a) for h in range(hosts) for a in range(agents)}
    return {
        "providers": {
            p: {"daily_limit": limits[p][0], "monthly_limit": limits[p][1]} for p in PROVIDERS
        },
        "agent_allocations": allocations,
        "default_allocation": {"gemini": 0, "brave": 0},
        "default_provider": "gemini",
        "web_fetch_min_interval_ms": 0,
        "cache": {"enabled": cache},
        "state_backend": {"kind": "redis", "url": url, "prefix": prefix},
    }


def host_settings(root: Path, host: int, config: dict[str, Any]) -> Any:
    from smart_search.host.config import load_settings

    home = root / f"host-{host:02d}"
    (home / "state").mkdir(parents=True, exist_ok=True)
    path = home / "openclaw.json"
    path.write_text(json.dumps({"skills": {"entries": {"smart-search": {"config": config}}}}))
    return load_settings(
        {
            "HOME": str(home),
            "SMART_SEARCH_STATE_DIR": str(home / "state"),
            "OPENCLAW_CONFIG_PATH": str(path),
            "GEMINI_API_KEY": "fleet-gemini-key",
            "BRAVE_API_KEY": "fleet-brave-key",
        }
    )


def schedule(agent: int, agents: int) -> set[int]:
    """The UTC hours an agent index runs at (the same cron line on every host)."""
    first = (agent * 24 // max(1, agents) + agent) % 24
    return {(first + k * 24 // RUNS_PER_DAY) % 24 for k in range(RUNS_PER_DAY)}


def question(seed: int, slot: float, host: int, agent: int) -> str:
    """An agent's fleet-wide job asks one question per slot on every host; otherwise each host's
    agent asks its own. Both draw Zipf-like from one small pool: repeats are common."""
    if draw(seed, slot, agent, "shared") < SHARED_SHARE:
        return zipf_pick(draw(seed, slot, agent, "q"), POOL)
    return zipf_pick(draw(seed, slot, host, agent, "q"), POOL)


def one_call(host: int, agent: int, settings: Any, store: Any, clock: SimClock,
             providers: FleetProviders, tally: Tally, seed: int) -> None:  # fmt: skip
    from smart_search.budget.breaker import Breaker
    from smart_search.budget.ledger import Ledger
    from smart_search.budget.pacing import wait_for_slot
    from smart_search.search import cache
    from smart_search.search.planner import plan, routed_provider
    from smart_search.search.tiers import Run, fit_api_queries, run_tiers

    def pace(s: Any, engine: str, until: float) -> float:
        # The shared pacing document on the injected clock (an interval of 0: a simulated slot
        # has no length, so any interval would push a slot's web requests past their deadline).
        return wait_for_slot(s, engine, until, clock=clock, sleep=lambda _: None, store=store)

    name = agent_name(host, agent)
    query = question(seed, clock(), host, agent)
    providers.local.who = (host, agent)
    ledger = Ledger(settings, store, clock=clock)
    sim_store = SimCacheStore(store, clock)
    flight = cache.open_flight(settings, sim_store, query, ledger.today)
    api_query, warnings = fit_api_queries(query, settings)
    run = Run(name, query, settings, ledger, providers,
              time.monotonic() + settings.total_timeout_ms / 1000,
              Breaker(settings, clock=clock, store=store), pace,
              api_query, warnings, cache=flight)  # fmt: skip
    routed = routed_provider(query, settings, None)
    outcome = run_tiers(plan(name, query, settings, routed), run)
    with tally.lock:
        for attempt in outcome.attempts:
            if attempt.provider in PROVIDERS:
                tally.charged_attempts[attempt.provider] += attempt.units
        if flight is not None and flight.hit:
            tally.answered["cache"] += 1
            tally.cache_units_saved += flight.units_saved
            tally.joined += sim_store.joined
        else:
            tally.answered[outcome.provider_used or "error"] += 1


def complete_day(settings: Any, store: Any, clock: SimClock, host: int, agent: int) -> None:
    """After its last run of the day a cron agent hands its unused allocation to the pool."""
    from smart_search.budget.ledger import Ledger
    from smart_search.errors import AlreadyComplete

    try:
        Ledger(settings, store, clock=clock).complete(agent_name(host, agent))
    except AlreadyComplete:
        pass


@dataclass
class Month:
    books: Books
    tally: Tally
    ledger_books: dict[tuple[str, str], int]  # (provider, window) -> the ledger's count
    limits: dict[str, tuple[int, int]]
    wall_s: float
    calls: int


def run_month(url: str, prefix: str, *, days: float, hosts: int, agents: int, seed: int,
              start: float, cache: bool, timeout_rate: float = 0.005, latency_ms: float = 2.0,
              limits: dict[str, tuple[int, int]] | None = None,
              progress: bool = False, before_slot: Any = None) -> Month:  # fmt: skip
    """One month of the fleet's traffic against the Redis at `url` under key prefix `prefix`.
    `before_slot(slot, stores)`, when given, runs before each slot that has calls (the fault
    bench, bench/fleet_faults.py, breaks the store there)."""
    from smart_search.budget.ledger import Ledger
    from smart_search.store import open_store

    limits = limits or limits_for(hosts, agents)
    clock = SimClock(start)
    books, tally = Books(), Tally()
    providers = FleetProviders(clock, books, limits, seed, timeout_rate, latency_ms / 1000)
    config = fleet_config(hosts, agents, limits, cache=cache, url=url, prefix=prefix)
    root = Path(tempfile.mkdtemp(prefix="fleet-"))
    try:
        settings = [host_settings(root, h, config) for h in range(hosts)]
        stores = [open_store(s) for s in settings]
        hours = {a: schedule(a, agents) for a in range(agents)}
        last_hour = {a: max(hours[a]) for a in range(agents)}
        first_hour = {a: min(hours[a]) for a in range(agents)}
        ledger_books: dict[tuple[str, str], int] = {}
        calls = 0
        started = time.monotonic()
        end = start + days * 86400
        slot = start
        while slot < end:
            clock.now = slot
            hour, weekday = time.gmtime(slot).tm_hour, time.gmtime(slot).tm_wday
            due = [a for a in range(agents) if hour in hours[a]]
            if weekday >= 5:  # weekends: each agent's first run only
                due = [a for a in due if hour == min(hours[a])]
            if due:
                if before_slot is not None:
                    before_slot(slot, stores)
                calls += len(due) * hosts
                gate = threading.Barrier(hosts)
                errors: list[BaseException] = []

                def host_thread(h: int, due: list[int] = due, gate: Any = gate,
                                errors: list[BaseException] = errors, hour: int = hour,
                                weekday: int = weekday) -> None:  # fmt: skip
                    try:
                        gate.wait()
                        for a in due:
                            one_call(h, a, settings[h], stores[h], clock, providers, tally, seed)
                            if hour == (first_hour if weekday >= 5 else last_hour)[a]:
                                complete_day(settings[h], stores[h], clock, h, a)
                    except BaseException as exc:  # noqa: BLE001 - re-raised by the driver
                        errors.append(exc)

                threads = [threading.Thread(target=host_thread, args=(h,)) for h in range(hosts)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                if errors:
                    raise errors[0]
                # As host 0 reads it (through the ledger: a store that forgot it is noticed).
                doc = Ledger(settings[0], stores[0], clock=clock).snapshot()
                for p, w in doc["windows"].items():
                    ledger_books[(p, w["day"])] = w["day_used"]
                    ledger_books[(p, w["month"])] = w["month_used"]
            if progress and time.gmtime(slot).tm_hour == 0 and slot > start:
                day_n = int((slot - start) // 86400)
                took = time.monotonic() - started
                label = "cache on " if cache else "cache off"
                print(f"  {label} day {day_n:>3}: {calls} calls, {took:.0f} s", file=sys.stderr,
                      flush=True)  # fmt: skip
            slot += SLOT_S
        wall = time.monotonic() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Month(books, tally, ledger_books, limits, wall, calls)


# -- the report ----------------------------------------------------------------------------------


def highest(books: dict[tuple[str, str], int], provider: str, monthly: bool) -> dict[str, int]:
    return {
        w: n for (p, w), n in sorted(books.items()) if p == provider and (len(w) == 7) is monthly
    }


def check(month: Month) -> list[str]:
    """Every broken promise, as text: a window billed past its limit on a fake's own books, a
    window the ledger charged less than was billed, or more without a lost answer to show."""
    problems = []
    for p in PROVIDERS:
        daily, monthly = month.limits[p]
        for window, units in highest(month.books.billed, p, False).items():
            if units > daily:
                problems.append(f"{p} day {window}: billed {units} > limit {daily}")
        for window, units in highest(month.books.billed, p, True).items():
            if units > monthly:
                problems.append(f"{p} month {window}: billed {units} > limit {monthly}")
        charged = sum(highest(month.ledger_books, p, True).values())
        billed = month.books.total[p]
        if charged != billed + month.books.unseen[p]:
            problems.append(
                f"{p}: ledger charged {charged}, fakes billed {billed} "
                f"+ {month.books.unseen[p]} held for lost answers"
            )
        if month.books.past_limit[p]:
            problems.append(f"{p}: {month.books.past_limit[p]} requests reached a full window")
    return problems


def table(month: Month, out: Any) -> None:
    w = out.write
    w(f"  {'provider':<8} {'billed':>7} {'charged':>8} {'lost*':>6} "
      f"{'max day / limit':>16} {'full days':>9}  months: billed (charged) / limit\n")  # fmt: skip
    for p in PROVIDERS:
        daily, monthly = month.limits[p]
        days = highest(month.books.billed, p, False)
        months = highest(month.books.billed, p, True)
        charged = sum(highest(month.ledger_books, p, True).values())
        full = sum(1 for n in days.values() if n > daily - WORST[p])
        top = max(days.values(), default=0)
        month_text = ", ".join(
            f"{m}: {n} ({month.ledger_books.get((p, m), 0)}) / {monthly}" for m, n in months.items()
        )
        w(f"  {p:<8} {month.books.total[p]:>7} {charged:>8} {month.books.timeouts[p]:>6} "
          f"{f'{top} / {daily}':>16} {f'{full}/{len(days)}':>9}  {month_text}\n")  # fmt: skip
    a = month.tally.answered
    w(f"  {month.calls} calls answered by: gemini {a['gemini']}, brave {a['brave']}, "
      f"cache {a['cache']}, web {a['web_fetch']}, failed {a['error']}; "
      f"wall {month.wall_s:.1f} s\n")  # fmt: skip


def report(on: Month, off: Month | None, out: Any = sys.stdout) -> None:
    w = out.write
    w("cache on:\n")
    table(on, out)
    w(f"  cache hits: {on.tally.answered['cache']}, of which {on.tally.joined} waited on another "
      f"call's flight (single-flight); the units those answers had cost: "
      f"{on.tally.cache_units_saved}\n")  # fmt: skip
    if off is not None:
        w("cache off (the same month: same questions, same billing draws):\n")
        table(off, out)
        w(f"  {'provider':<8} {'billed, cache on':>17} {'cache off':>10} {'saved':>6}\n")
        for p in PROVIDERS:
            saved = off.books.total[p] - on.books.total[p]
            w(f"  {p:<8} {on.books.total[p]:>17} {off.books.total[p]:>10} {saved:>6}\n")
        a, b = on.tally.answered, off.tally.answered
        w(f"  answered without the web tier: cache on {a['gemini'] + a['brave'] + a['cache']}, "
          f"cache off {b['gemini'] + b['brave']} of {on.calls}\n")  # fmt: skip
    w("* lost: answers that never came back (read timeouts after the request left); each stays\n"
      "  charged its worst case, so charged = billed + (worst case - billed) of the lost ones.\n"
      "  full days: days the fake billed within one call's worst case of the daily limit.\n"
      )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=32)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--agents", type=int, default=20, help="cron agents per host")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", default="2026-12-01", help="UTC date the month starts")
    parser.add_argument("--timeout-rate", type=float, default=0.005)
    parser.add_argument("--latency-ms", type=float, default=2.0, help="each fake API request")
    parser.add_argument("--no-compare", action="store_true", help="skip the cache-off month")
    for p in PROVIDERS:
        parser.add_argument(f"--{p}-limits", metavar="DAY,MONTH", help="default: fleet-scaled")
    args = parser.parse_args(argv)

    from tests.redis_support import RedisServer

    began = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="fleet-redis-"))
    server = RedisServer(tmp).start()
    try:
        common = dict(days=args.days, hosts=args.hosts, agents=args.agents, seed=args.seed,
                      start=utc(args.start), timeout_rate=args.timeout_rate,
                      latency_ms=args.latency_ms, progress=True,
                      limits=limits_for(args.hosts, args.agents))  # fmt: skip
        for p in PROVIDERS:
            given = getattr(args, f"{p}_limits")
            if given:
                day, month = (int(n) for n in given.split(","))
                common["limits"][p] = (day, month)
        on = run_month(server.url, f"fleet-on-{os.getpid()}", cache=True, **common)
        off = None
        if not args.no_compare:
            off = run_month(server.url, f"fleet-off-{os.getpid()}", cache=False, **common)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"fleet month: {args.hosts} hosts x {args.agents} cron agents, {args.days:g} days from "
          f"{args.start} UTC, seed {args.seed}, one redis-server")  # fmt: skip
    report(on, off)
    problems = check(on) + ([] if off is None else check(off))
    print(f"total wall time: {time.monotonic() - began:.1f} s")
    for problem in problems:
        print(f"BROKEN: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
