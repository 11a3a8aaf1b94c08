"""The fleet ledger's identity and witnesses at their edges (issue 28 B.4: single-line bugs
planted in store/witness.py, store/redis.py, budget/recovery.py, budget/quota_merge.py and
host/redis_url.py that the suite let through): a copy one write behind, a witness that already
holds what a restore restored, a fold's base moving up (never down), a witness of a new
generation at a lower seq, the witness's "seen at" stamp, an expired witness, a dry run that
must not touch the witness, a refusal mark keeping the seq the store held, holds folded in by
a merge, a restore's excess counted window by window, and a Sentinel URL's passwords kept apart
and its database number checked; `state restore` bringing back smart_fetch's counts too, an
`mcp.tokens` entry's `["*"]` refused (only the bare "*" means every agent), and doctor's word on
`appendfsync everysec`.

Real `redis-server` processes on loopback (tests/redis_support.py), as in test_state_lost.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smart_search.budget.ledger import Ledger
from smart_search.budget.quota_merge import merge_quota
from smart_search.host.redis_url import parse_sentinel
from smart_search.store import witness
from smart_search.store.base import DOCUMENTS
from tests import test_state_lost as lost
from tests.conftest import Env, charge
from tests.redis_support import RedisServer
from tests.test_state_lost import CONFIG, brave, cli, client, fleet

server = lost.server  # the fixture: a private server without persistence

WITNESS = "search-witness-quota.json"


def host_of(env: Env) -> str:
    return witness.host_label(str(env.state_dir))


def test_a_copy_one_write_behind_is_behind_and_restored(
    tmp_path: Path, server: RedisServer
) -> None:
    """The smallest lag there is: the store went back by exactly one write."""
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    c = client(server.url)
    charge(Ledger(one.settings()), "a", "brave")
    before = c.get("fleet:quota")
    seq = json.loads(before)["_ledger"]["seq"]
    Ledger(one.settings()).reserve("a", "brave")  # one write: a hold
    assert json.loads(c.get("fleet:quota"))["_ledger"]["seq"] == seq + 1
    c.set("fleet:quota", before)
    ledger = Ledger(one.settings())
    status = ledger.agent_status("a")
    assert ledger.restored and ledger.restored[0]["why"] == "behind"
    assert brave(status)[0] == 2  # the unit billed and the hold in flight, carried as charged


def test_a_witness_holding_just_what_the_restore_restored_folds_nothing(
    tmp_path: Path, server: RedisServer
) -> None:
    one, two = fleet(tmp_path, server.url, 2, CONFIG)
    for _ in range(2):
        charge(Ledger(one.settings()), "a", "brave")
    Ledger(two.settings()).snapshot()  # host two saw the same last state as host one
    assert (
        json.loads((two.state_dir / WITNESS).read_text())["seq"]
        == json.loads((one.state_dir / WITNESS).read_text())["seq"]
    )
    client(server.url).flushdb()
    restorer = Ledger(one.settings())
    restorer.snapshot()
    assert restorer.restored[0]["action"] == "restored"
    ledger = Ledger(two.settings())
    assert brave(ledger.agent_status("a"))[0] == 2
    assert ledger.restored == []  # nothing to fold: no warning, no record of a fold
    [record] = json.loads(client(server.url).get("fleet:quota"))["_ledger"]["restored"]
    assert record["folded"] == [host_of(one)]


def test_a_fold_moves_the_base_up_so_a_host_that_saw_no_more_folds_nothing(
    tmp_path: Path, server: RedisServer
) -> None:
    """Host two wrote past the restore's base and folds it in; host three saw exactly host
    two's last write: after host two's fold there is nothing left for it to add."""
    one, two, three = fleet(tmp_path, server.url, 3, CONFIG)
    charge(Ledger(one.settings()), "a", "brave")
    charge(Ledger(two.settings()), "b", "brave")
    Ledger(three.settings()).snapshot()  # host three is as far as host two
    client(server.url).flushdb()
    Ledger(one.settings()).snapshot()  # host one restores from its own, older witness
    folder = Ledger(two.settings())
    folder.snapshot()
    assert [(n["action"], n["added"]) for n in folder.restored] == [("folded", 1)]
    late = Ledger(three.settings())
    assert brave(late.agent_status("b"))[0] == 1
    assert late.restored == []
    full = Ledger(one.settings()).full_status()
    assert full["windows"]["brave"]["daily"]["used"] == 2


def test_a_dry_run_of_state_restore_leaves_the_hosts_witness_alone(
    tmp_path: Path, server: RedisServer
) -> None:
    """A newcomer started a fresh generation on the emptied store; `state restore --dry-run`
    on the host that holds the old one must not make its witness adopt the newcomer's: the
    next call still restores, adding both histories."""
    one, newcomer = fleet(tmp_path, server.url, 2, CONFIG)
    for _ in range(2):
        charge(Ledger(one.settings()), "a", "brave")
    before = json.loads((one.state_dir / WITNESS).read_text())
    client(server.url).flushdb()
    charge(Ledger(newcomer.settings()), "a", "brave")
    dry = cli(one, "state", "restore", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "1 -> 3" in dry.stdout
    assert json.loads((one.state_dir / WITNESS).read_text())["gen"] == before["gen"]
    ledger = Ledger(one.settings())
    assert brave(ledger.agent_status("a"))[0] == 3
    assert ledger.restored[0]["why"] == "generation"


def test_a_missing_document_whose_witness_expired_is_a_fresh_start(
    tmp_path: Path, server: RedisServer
) -> None:
    """The store lets the key expire `ttl_s` after its last write: a witness older than that
    vouches for nothing the store should still hold."""
    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    charge(Ledger(one.settings()), "a", "brave")
    path = one.state_dir / WITNESS
    held = json.loads(path.read_text())
    ttl_s = DOCUMENTS["quota"].ttl_s
    assert ttl_s is not None
    held["at"] = held["at"] - ttl_s - 3600
    path.write_text(json.dumps(held))
    client(server.url).delete("fleet:quota")
    ledger = Ledger(one.settings())
    ledger.snapshot()
    assert ledger.restored == []
    held["at"] += 2 * 3600  # the same witness still inside the key's life: a loss
    path.write_text(json.dumps(held))
    client(server.url).delete("fleet:quota")
    ledger = Ledger(one.settings())
    ledger.snapshot()
    assert ledger.restored and ledger.restored[0]["why"] == "missing"


# --- the witness file (no server needed) -------------------------------------------------------


def kept(state_dir: Path) -> witness.Witness:
    found = witness.read_witness(str(state_dir), "quota", 2000)
    assert found is not None
    return found


def test_a_witness_takes_a_new_generation_even_at_a_lower_seq(tmp_path: Path) -> None:
    """A restore or a fold of another generation starts its seq lower than the witness's old
    one: the witness must follow the generation, not the number."""
    d = str(tmp_path)
    witness.keep(d, "quota", 2000, {"gen": "old", "seq": 50}, {"n": 1}, now=1000.0)
    witness.keep(d, "quota", 2000, {"gen": "new", "seq": 12}, {"n": 2}, now=1001.0)
    assert (kept(tmp_path).gen, kept(tmp_path).seq, kept(tmp_path).doc) == ("new", 12, {"n": 2})
    witness.keep(d, "quota", 2000, {"gen": "new", "seq": 11}, {"n": 0}, now=1002.0)
    assert kept(tmp_path).seq == 12  # a process late with an earlier state of it changes nothing


def test_a_witness_still_current_is_restamped_only_after_seen_every(tmp_path: Path) -> None:
    d, meta, step = str(tmp_path), {"gen": "g", "seq": 3}, witness.SEEN_EVERY_S
    witness.keep(d, "quota", 2000, meta, {"n": 1}, now=1000.0)
    witness.keep(d, "quota", 2000, meta, {"n": 1}, now=1000.0 + step / 2)
    assert kept(tmp_path).at == 1000.0  # seen again soon after: no write
    witness.keep(d, "quota", 2000, meta, {"n": 1}, now=1000.0 + step + 1)
    assert kept(tmp_path).at == 1000.0 + step + 1  # "lost after" moves up with it


# --- merges and URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize("add", [False, True])
def test_a_merge_keeps_the_holds_in_flight_of_the_incoming_ledger(env: Env, add: bool) -> None:
    env.write_config({"timezone": "UTC", "providers": {"brave": {"daily_limit": 30}}})
    ledger = Ledger(env.settings())
    mine = ledger.snapshot()
    ledger.reserve("general", "brave")
    theirs = ledger.snapshot()
    holds = theirs["windows"]["brave"]["holds"]
    assert len(holds) == 1
    merged = merge_quota(mine, theirs, add=add)
    assert merged["windows"]["brave"]["holds"] == holds


def test_a_sentinel_url_never_hands_the_servers_password_to_the_sentinels() -> None:
    spec = parse_sentinel("redis+sentinel://:data-pw@127.0.0.1:26379,127.0.0.1:26380/mymaster")
    assert (spec.password, spec.sentinel_password) == ("data-pw", None)
    spec = parse_sentinel("redis+sentinel://u:data-pw@127.0.0.1/mymaster?sentinel_password=s-pw")
    assert (spec.username, spec.password, spec.sentinel_password) == ("u", "data-pw", "s-pw")


def test_a_refusal_mark_keeps_the_seq_the_store_held_so_a_host_at_it_folds_nothing(
    tmp_path: Path, server: RedisServer
) -> None:
    """Refuse mode, the store back to an older copy of its generation: the mark keeps that
    copy's seq, so after a restore by a host without a witness, a host that had seen just that
    copy has nothing to fold, and the host that saw more folds its unit in."""
    from smart_search.errors import StateLost

    one, two, three = fleet(tmp_path, server.url, 3, CONFIG, on_state_lost="refuse")
    c = client(server.url)
    charge(Ledger(one.settings()), "a", "brave")
    Ledger(three.settings()).snapshot()  # host three saw the copy the store will go back to
    stale = c.get("fleet:quota")
    charge(Ledger(one.settings()), "a", "brave")
    c.set("fleet:quota", stale)
    with pytest.raises(StateLost):
        Ledger(one.settings()).snapshot()  # host one finds it behind: marked lost
    assert (
        json.loads(c.get("fleet:quota"))["_ledger"]["lost"]["store_seq"]
        == (json.loads(stale)["_ledger"]["seq"])
    )
    done = cli(two, "state", "restore")  # host two has no witness
    assert done.returncode == 0, done.stderr
    late = Ledger(three.settings())
    assert brave(late.agent_status("a"))[0] == 1
    assert late.restored == []
    folder = Ledger(one.settings())
    assert brave(folder.agent_status("a"))[0] == 2
    assert [(n["action"], n["added"]) for n in folder.restored] == [("folded", 1)]


def test_the_excess_over_a_base_subtracts_day_from_day_and_month_from_month(env: Env) -> None:
    from smart_search.budget.quota_merge import excess_quota

    env.write_config({"timezone": "UTC", "providers": {"brave": {"daily_limit": 30}}})
    ledger = Ledger(env.settings())
    for _ in range(2):
        charge(ledger, "general", "brave")
    base = ledger.snapshot()
    for _ in range(3):
        charge(ledger, "general", "brave")
    incoming = ledger.snapshot()
    for doc in (base, incoming):
        doc["windows"]["brave"]["month_used"] += 4  # spent on earlier days of the month
    extra = excess_quota(incoming, base)["windows"]["brave"]
    assert (extra["day_used"], extra["month_used"]) == (3, 3)


def test_a_sentinel_urls_database_number_is_checked() -> None:
    assert parse_sentinel("redis+sentinel://127.0.0.1/mymaster/15").db == 15
    for bad in ("123456", "1x"):
        with pytest.raises(ValueError, match="database"):
            parse_sentinel(f"redis+sentinel://127.0.0.1/mymaster/{bad}")


def test_state_restore_brings_back_smart_fetchs_daily_counts(
    tmp_path: Path, server: RedisServer
) -> None:
    from smart_search.budget import fetches
    from smart_search.store import open_store

    (one,) = fleet(tmp_path, server.url, 1, CONFIG)
    for _ in range(2):
        fetches.reserve_fetch(open_store(one.settings()), "2026-12-04", "a", 3)
    lost.forget(server, "delete")
    done = cli(one, "state", "restore")
    assert done.returncode == 0, done.stderr
    raw = client(server.url).get("fleet:fetch_counts")
    assert raw is not None and json.loads(raw)["agents"] == {"a": 2}


def test_a_token_list_holding_star_is_refused_not_taken_for_every_agent() -> None:
    from smart_search.errors import ConfigError
    from smart_search.host.config_tokens import check_tokens

    token = "tok-SENTINEL-0123456789abcdef"
    [entry] = check_tokens([{"value": token, "agents": "*"}], "mcp.tokens")
    assert entry.agents is None
    for agents in (["*"], ["*", "tech"]):
        with pytest.raises(ConfigError, match=r"mcp\.tokens\[0\]\.agents") as err:
            check_tokens([{"value": token, "agents": agents}], "mcp.tokens")
        assert "SENTINEL" not in str(err.value)


class _Config:
    """redis_health's CONFIG GET, answering from a dict."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values, self.refused = values, False

    def get(self, name: str) -> str | None:
        return self.values.get(name)


@pytest.mark.parametrize(("fsync", "warned"), [("always", False), ("everysec", True), ("no", True)])
def test_doctor_says_which_appendfsync_may_forget_the_last_writes(fsync: str, warned: bool) -> None:
    from smart_search.store.redis_health import _persistence

    out: dict = {"problems": [], "unknown": []}
    config = _Config({"appendonly": "yes", "appendfsync": fsync, "save": ""})
    facts = _persistence(config, {}, out)  # type: ignore[arg-type]
    assert facts["verdict"].startswith(f"append-only file, appendfsync {fsync}")
    assert ("may forget its last second" in facts["verdict"]) is warned
    assert out["problems"] == []
