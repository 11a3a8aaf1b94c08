"""The fleet month with a store that forgets (issue 27, RULINGS 8), new code beside the old.

    python bench/fleet_faults.py [--days 28] [--hosts 6] [--agents 10] [--seed 7]

bench/fleet.py's month (hosts sharing one ledger through Redis, cron agents, fake Gemini and
Brave billing on their own books and clocks), run against a Sentinel group (a primary, a replica
and one sentinel, tests/redis_support.SentinelGroup) on loopback, with three faults, each at the
first slot with calls from noon (UTC) of its day on:

- day 10: the primary restarts without persistence (`appendonly no`, `save ""`): empty, and its
  replica resyncs from it;
- day 20: `FLUSHDB`;
- day 25: the replica's link is cut and it is paused (it lags), and for six hours of slots the
  writes reach the primary only; then the primary is SIGKILLed and the sentinel promotes the
  lagging replica.

The same month (same seed: same questions, same billing draws) runs twice: with the witnesses
(this release) and without them (`RedisStore.witnessing = False`: what the code did before, a
forgotten ledger starts again from zero). Printed per provider and window: units the fakes billed
against the limit; then units over any limit, the units the ledger does not count (billed but
not charged), and the restores the ledger recorded with the units they say no witness could
account for. Exit 1 when the new code passed a limit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import fleet  # noqa: E402 - bench/fleet.py, the month itself

FAULT_DAYS = {10: "restart", 20: "flushdb", 25: "failover"}
# The replica lags (its link cut) this long before the primary dies and it is promoted: the
# afternoon's writes are what it lacks.
CUT_FOR_S = 6 * 3600
PREFIX = "faults"


class Faults:
    """`before_slot` for fleet.run_month: breaks the store on its days, once each."""

    def __init__(self, group: Any, start: float, witness: bool) -> None:
        self.group = group
        self.start = start
        self.witness = witness
        self.done: dict[str, float] = {}  # fault -> simulated time it happened
        self.cut: Any = None  # the primary whose replica lags (day 25, until the next slot)
        self.records: dict[float, Any] = {}  # restores the ledger recorded, by when
        self.store: Any = None  # host 0's store, to read the last of them at the end

    def __call__(self, slot: float, stores: list[Any]) -> None:
        for store in stores:
            store.witnessing = self.witness
        self.store = stores[0]
        self.collect(stores[0])
        if self.cut is not None:
            if slot >= self.done["failover"] + CUT_FOR_S:
                self._fail_over(stores)
            return
        noon = {f: self.start + (d - 1) * 86400 + 12 * 3600 for d, f in FAULT_DAYS.items()}
        due = [f for f, at in noon.items() if f not in self.done and slot >= at]
        if not due:
            return
        fault = due[0]
        self.done[fault] = slot
        primary = self.group.primary
        if fault == "restart":
            primary.restart()  # no persistence: back empty; the replica resyncs from it
            self.group._wait(lambda: self.group.info(self.group.replica).get(
                "master_link_status") == "up", "the replica to resync")  # fmt: skip
        elif fault == "flushdb":
            self.group.client(primary).flushdb()
        else:
            client = self.group.client(primary)
            assert client.wait(1, 10000) >= 1
            self.group.replica.pause()
            client.client_kill_filter(_type="replica")
            self.cut = primary  # this slot's writes reach the primary only
        _reconnect(stores)

    def collect(self, store: Any) -> None:
        """Keep the restores the ledger records (a later loss takes the store's history with
        it: each is read here before the next fault)."""
        if not self.witness:
            return
        meta = store.identity("quota") or {}
        for record in meta.get("restored") or []:
            self.records[record["at"]] = record

    def _fail_over(self, stores: list[Any]) -> None:
        old, self.cut = self.cut, None
        old.kill()
        self.group.replica.resume()
        self.group.wait_failover(old)
        _reconnect(stores)


def _reconnect(stores: list[Any]) -> None:
    """Drop the clients' connections to a server that went away: the next command connects
    afresh (through the sentinel, to whichever primary it names now)."""
    for store in stores:
        store.client.connection_pool.disconnect()
        store._down = None


def run(args: argparse.Namespace, witness: bool) -> tuple[Any, dict[str, float], list[Any]]:
    from tests.redis_support import SentinelGroup

    tmp = Path(tempfile.mkdtemp(prefix="fleet-faults-"))
    group = SentinelGroup(tmp, sentinels=1, down_after_ms=5000, failover_timeout_ms=5000)
    group.start()
    try:
        start = fleet.utc(args.start)
        faults = Faults(group, start, witness)
        limits = fleet.limits_for(args.hosts, args.agents)
        month = fleet.run_month(
            group.url, f"{PREFIX}-{os.getpid()}", days=args.days, hosts=args.hosts,
            agents=args.agents, seed=args.seed, start=start, cache=True, limits=limits,
            timeout_rate=args.timeout_rate, latency_ms=args.latency_ms, progress=True,
            before_slot=faults,
        )  # fmt: skip
        if faults.store is not None:
            faults.collect(faults.store)
        records = sorted(faults.records.values(), key=lambda r: r["at"])
    finally:
        group.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return month, faults.done, records


def over_limits(month: Any) -> dict[str, int]:
    """Per provider: units the fakes billed past a daily or a monthly limit (each window's
    excess, summed)."""
    out = {}
    for p in fleet.PROVIDERS:
        daily, monthly = month.limits[p]
        days = fleet.highest(month.books.billed, p, False)
        months = fleet.highest(month.books.billed, p, True)
        out[p] = sum(max(0, n - daily) for n in days.values()) + sum(
            max(0, n - monthly) for n in months.values()
        )
    return out


def uncounted(month: Any) -> dict[str, int]:
    """Per provider: units billed (plus the worst case held for lost answers) that the ledger
    does not count at the end of the month: what it forgot and never got back."""
    return {
        p: max(0, month.books.total[p] + month.books.unseen[p]
               - sum(fleet.highest(month.ledger_books, p, True).values()))
        for p in fleet.PROVIDERS
    }  # fmt: skip


def windows_table(month: Any, out: Any) -> None:
    w = out.write
    for p in fleet.PROVIDERS:
        daily, monthly = month.limits[p]
        days = fleet.highest(month.books.billed, p, False)
        top = sorted(days.items(), key=lambda kv: -kv[1])[:3]
        months = fleet.highest(month.books.billed, p, True)
        w(f"    {p:<7} days over {daily}: {sum(1 for n in days.values() if n > daily)} of "
          f"{len(days)}; busiest {', '.join(f'{d} {n}/{daily}' for d, n in top)}; "
          f"months {', '.join(f'{m} {n}/{monthly}' for m, n in months.items())}\n")  # fmt: skip


def report(new: Any, old: Any, out: Any = sys.stdout) -> None:
    (m_new, done_new, rec_new), (m_old, _, _) = new, old
    w = out.write
    when = ", ".join(f"{f} {time.strftime('%m-%d %H:00', time.gmtime(t))}"
                     for f, t in sorted(done_new.items(), key=lambda kv: kv[1]))  # fmt: skip
    w(f"faults (UTC): {when}\n")
    for label, (month, _, _) in (("with witnesses (this release)", new),
                                 ("without (the old code)", old)):  # fmt: skip
        w(f"  {label}: {month.calls} calls, wall {month.wall_s:.0f} s\n")
        windows_table(month, out)
    ov_new, ov_old = over_limits(m_new), over_limits(m_old)
    un_new, un_old = uncounted(m_new), uncounted(m_old)
    w(f"\n  {'':<44} {'new':>6} {'old':>6}\n")
    for p in fleet.PROVIDERS:
        w(f"  {p + ': units over any limit after a loss':<44} {ov_new[p]:>6} {ov_old[p]:>6}\n")
        w(f"  {p + ': billed units the ledger does not count':<44} {un_new[p]:>6} "
          f"{un_old[p]:>6}\n")  # fmt: skip
        w(f"  {p + ': billed':<44} {m_new.books.total[p]:>6} {m_old.books.total[p]:>6}\n")
    w(f"\n  restores recorded (new code): {len(rec_new)}\n")
    for r in rec_new:
        w(f"    {time.strftime('%H:%M:%S', time.gmtime(r['at']))} by {r['host']}: {r['why']}, "
          f"restored {r['restored_units']} units this month, {len(r['folded'])} hosts folded, "
          f"units no witness could account for (bound): {r['unaccounted']} "
          f"({r['in_flight']} in flight, {r['found_later']} found by later folds)\n")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=28)
    parser.add_argument("--hosts", type=int, default=6)
    parser.add_argument("--agents", type=int, default=10, help="cron agents per host")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", default="2026-12-01", help="UTC date the month starts")
    parser.add_argument("--timeout-rate", type=float, default=0.005)
    parser.add_argument("--latency-ms", type=float, default=2.0)
    args = parser.parse_args(argv)
    began = time.monotonic()
    new = run(args, witness=True)
    old = run(args, witness=False)
    print(f"fleet month with faults: {args.hosts} hosts x {args.agents} cron agents, "
          f"{args.days:g} days from {args.start} UTC, seed {args.seed}; "
          "a Sentinel group")  # fmt: skip
    report(new, old)
    print(f"total wall time: {time.monotonic() - began:.1f} s")
    broken = sum(over_limits(new[0]).values()) + sum(uncounted(new[0]).values())
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
