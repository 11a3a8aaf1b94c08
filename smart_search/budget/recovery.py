"""Restore, never refill (RULINGS 8): what the budget does when the store says it forgot.

The store detects (`store/witness.py`: a durable document missing while this host's witness holds
one, of another generation, or behind the witness) and raises `StateLost`; every durable
change and read of the budget goes through `guarded`, the one place that decides, before any
unit is spent:

- `on_state_lost: "restore"` (the default): the document comes back as the merge of what the
  store still holds and this host's witness, through the one merge (`quota_merge`): per agent,
  source and window the larger count of one history (the witness and a stale copy of the same
  generation), the sum of two (a fresh generation some host without a witness started on the
  emptied store, plus the witness). Holds in flight in the witness come back as charged. The
  restore makes a new generation and records itself in the document's identity: when, from
  which host, why, the units held by calls in flight at the loss, and per lost generation the
  state it restored (`bases`).
- a repair: a host whose witness is of a generation a restore replaced folds its witness in on
  its next call, once: what it saw beyond that generation's base is added (not maxed: the fleet
  may have spent on the restored ledger since), and the base moves up to its witness, so the
  next host of that generation adds only what it saw beyond that. The units it adds are units
  the restore could not account for; the record keeps their sum.
- `"refuse"`: the store is marked lost (every host, with a witness or not, then refuses) and the
  call fails with `state_lost`; API tiers are skipped, web tiers still answer, until
  `smart-search state restore` (shell/admin.py) restores it.

The bound reported (`unaccounted`): the units held by calls in flight at the loss (carried as
charged at their worst case: the truth may be less) plus every unit a later fold brought in
(spent before the loss, unknown to the restore until then). Units no surviving witness ever saw
(a host gone for good with its state directory, or a process killed between its write and its
witness) cannot be counted by anything the fleet still holds; docs/operations.md says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from smart_search.budget import quota_merge
from smart_search.errors import StateLost
from smart_search.store import witness as ident
from smart_search.text.stamps import utc_stamp

if TYPE_CHECKING:
    from smart_search.store import Store

T = TypeVar("T")
Document = dict[str, Any]
Current = Callable[[Document | None], Document]


class Kind:
    """How one durable document merges: `merge(a, b, add=)`, `excess(a, base)`, `units(doc)`,
    `held(doc)` (units in flight)."""

    def __init__(self, merge: Any, excess: Any, units: Any, held: Any) -> None:
        self.merge, self.excess, self.units, self.held = merge, excess, units, held


def _quota_held(doc: Document) -> int:
    return sum(
        h.get("units", 0) for w in doc["windows"].values() for h in (w.get("holds") or {}).values()
    )


KINDS = {
    "quota": Kind(
        quota_merge.merge_quota, quota_merge.excess_quota, quota_merge.quota_units, _quota_held
    ),
    "fetch_counts": Kind(
        quota_merge.merge_counts,
        quota_merge.excess_counts,
        quota_merge.count_units,
        lambda _doc: 0,
    ),  # fmt: skip
}


def guarded(
    store: Store, name: str, op: Callable[[], T], current: Current, notes: list[Document]
) -> T:
    """`op()` (a read or update of `name`), after restoring or repairing the document if the
    store forgot it; a refusal (`on_state_lost: "refuse"`) is raised as `StateLost`. What was
    done is appended to `notes` (the result's warning, the log line)."""
    for _ in range(4):
        try:
            return op()
        except StateLost as lost:
            if not isinstance(lost.loss, ident.Loss) or not hasattr(store, "rewrite"):
                raise
            note = recover(store, name, lost, current)
            if note is not None:
                notes.append(note)
    return op()  # a fourth loss in a row: let it surface as it is


def recover(store: Any, name: str, lost: StateLost, current: Current) -> Document | None:
    loss: ident.Loss = lost.loss  # type: ignore[assignment]
    if loss.kind == "repair":
        return fold(store, name, current)
    if getattr(store, "on_state_lost", "restore") == "refuse":
        if loss.kind != "marked":
            _mark(store, name, loss, current)
        raise StateLost(lost.message) from None
    return restore(store, name, current, why=loss.kind)


def restore(
    store: Any, name: str, current: Current, *, why: str, extras: tuple[Document, ...] = (),
    dry_run: bool = False, force: bool = False,
) -> Document | None:  # fmt: skip
    """Restore `name` from what the store holds, this host's witness and `extras` (state
    restore's export file and provider reports, folded by taking the larger), in one atomic
    step. Returns the restore's record (None: another host restored it first, nothing to do).
    `force`: fold `extras` in even when the store did not forget; `dry_run`: write nothing and
    return {"before", "after"} instead."""
    kind = KINDS[name]
    host = store.host

    def change(doc: Document | None, meta: Document | None, w: ident.Witness | None) -> Any:
        now = time.time()
        loss = ident.judge(name, meta, doc is not None, w, host, None, now)
        if loss is not None and loss.kind == "repair":
            return _fold_change(name, doc, meta, w, host, current, dry_run, extras)
        if loss is None and not force:
            return None, meta, None
        found = current(doc)
        if loss is None:  # nothing forgotten: the extras only, by the larger count
            after = found
            for extra in extras:
                after = kind.merge(after, current(extra), add=False)
            if dry_run:
                return None, meta, {"before": found, "after": after, "record": None}
            return after, ident.advance(meta, now), None
        mark = (meta or {}).get("lost") or {}
        # The identity of the content the store holds (a mark keeps the one it found).
        held_gen = mark.get("store_gen") if mark else (meta or {}).get("gen")
        held_seq = int((mark.get("store_seq") if mark else (meta or {}).get("seq")) or 0)
        same = w is not None and held_gen == w.gen
        mine = current(w.doc if w is not None else None)
        after = kind.merge(found, mine, add=held_gen is not None and not same)
        for extra in extras:
            after = kind.merge(after, current(extra), add=False)
        # Per lost generation, what this restore holds of it and up to which seq: a host whose
        # witness of it is later folds in what it saw beyond (`_fold_change`).
        bases: dict[str, Document] = {}
        seqs: dict[str, int] = {}
        if mark.get("witness_gen"):
            bases[mark["witness_gen"]], seqs[mark["witness_gen"]] = current(None), 0
        if held_gen:
            bases[held_gen], seqs[held_gen] = found, held_seq
        if w is not None:
            bases[w.gen] = kind.merge(found, mine, add=False) if same else mine
            seqs[w.gen] = max(held_seq, w.seq) if same else w.seq
        held = kind.held(mine)
        record = {
            "at": now,
            "host": host,
            "why": mark.get("kind", why) if loss.kind == "marked" else loss.kind,
            "lost_after": mark.get("after") or (w.at if w is not None else None),
            "lost_gens": sorted(bases),
            "bases": bases,
            "base_seqs": seqs,
            "folded": [host],
            "in_flight": held,
            "found_later": 0,
            "unaccounted": held,
            "restored_units": kind.units(after),
        }
        if dry_run:
            return None, meta, {"before": found, "after": after, "record": record}
        seq = max(int((meta or {}).get("seq", 0)), w.seq if w is not None else 0) + 1
        history = [record, *((meta or {}).get("restored") or [])]
        new_meta = {"gen": ident.new_gen(), "seq": seq, "at": now,
                    "restored": history[: ident.KEEP_RESTORES]}  # fmt: skip
        return after, new_meta, record

    result = store.rewrite(name, change)
    if dry_run or result is None:
        return result
    return note_of(name, result, folded="added" in result)


def fold(store: Any, name: str, current: Current) -> Document | None:
    """Fold this host's witness into a restore of its generation (what it saw past the base)."""

    def change(doc: Document | None, meta: Document | None, w: ident.Witness | None) -> Any:
        loss = ident.judge(name, meta, doc is not None, w, store.host, None, time.time())
        if loss is None or loss.kind != "repair":
            return None, meta, None  # folded already (another process of this host did)
        return _fold_change(name, doc, meta, w, store.host, current, False)

    record = store.rewrite(name, change)
    return None if record is None else note_of(name, record, folded=True)


def _fold_change(
    name: str, doc: Document | None, meta: Document | None, w: ident.Witness | None, host: str,
    current: Current, dry_run: bool, extras: tuple[Document, ...] = (),
) -> Any:  # fmt: skip
    kind = KINDS[name]
    assert meta is not None and w is not None
    record = ident.restore_record(meta, w.gen)
    assert record is not None
    found, mine = current(doc), current(w.doc)
    base = current(record["bases"].get(w.gen))
    extra = kind.excess(mine, base)
    after = kind.merge(found, extra, add=True)
    added = max(0, kind.units(after) - kind.units(found))
    for more in extras:
        after = kind.merge(after, current(more), add=False)
    if dry_run:
        return None, meta, {"before": found, "after": after, "record": record}
    record = {
        **record,
        "bases": {**record["bases"], w.gen: kind.merge(base, mine, add=False)},
        "base_seqs": {**record["base_seqs"], w.gen: max(w.seq, record["base_seqs"][w.gen])},
        "folded": [*(h for h in record["folded"] if h != host), host],
        "found_later": record["found_later"] + added,
        "unaccounted": record["unaccounted"] + added,
    }
    restored = [record if r.get("at") == record["at"] else r for r in meta["restored"]]
    new_meta = {**ident.advance(meta, time.time()), "restored": restored}
    return after, new_meta, {**record, "added": added}


def _mark(store: Any, name: str, loss: ident.Loss, current: Current) -> None:
    """Refuse mode: mark the store lost, keeping whatever it holds, so that every host refuses
    (a host without a witness would otherwise start afresh) until a restore."""

    def change(doc: Document | None, meta: Document | None, w: ident.Witness | None) -> Any:
        now = time.time()
        if ident.judge(name, meta, doc is not None, w, store.host, None, now) is None:
            return None, meta, None
        if (meta or {}).get("lost"):
            return None, meta, None
        held = meta or {}
        mark = {
            "at": now,
            "host": store.host,
            "kind": loss.kind,
            "after": w.at if w is not None else None,
            "witness_gen": w.gen if w is not None else None,
            # What the store held when the loss was found: the restore's base for it.
            "store_gen": held.get("gen"),
            "store_seq": held.get("seq", 0),
        }
        # A generation of its own: the marked copy is no state of any host's history.
        new_meta = {"gen": ident.new_gen(), "seq": 1, "at": now, "lost": mark,
                    "restored": held.get("restored") or []}  # fmt: skip
        return current(doc), new_meta, None

    store.rewrite(name, change)


def note_of(name: str, record: Document, *, folded: bool = False) -> Document:
    """What a restore or fold did, for the result's warning, the log line and doctor."""
    return {
        "document": name,
        "action": "folded" if folded else "restored",
        "at": utc_stamp(record["at"]),
        "host": record["host"],
        "why": record["why"],
        "lost_after": None if record.get("lost_after") is None else utc_stamp(record["lost_after"]),
        "unaccounted": record["unaccounted"],
        "added": record.get("added", 0),
    }


def warning_of(notes: list[Document]) -> str | None:
    """The result's warning for what `notes` say happened during the call."""
    parts = []
    for n in notes:
        if n["action"] == "restored":
            parts.append(
                f"The shared ledger ({n['document']}) had lost its data after {n['lost_after']} "
                f"({n['why']}); it was restored from the witnesses at {n['at']} by {n['host']}, "
                f"never refilled. Up to {n['unaccounted']} units could not be accounted for."
            )
        else:
            parts.append(
                f"This host folded its witness into the shared ledger ({n['document']}) restored "
                f"at {n['at']} by {n['host']}: {n['added']} units the restore had missed. Up to "
                f"{n['unaccounted']} units could not be accounted for."
            )
    return " ".join(parts) or None
