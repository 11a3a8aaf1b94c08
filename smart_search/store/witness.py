"""A networked ledger's identity, and each host's witness of it (RULINGS 8: a store that forgot).

A Redis can forget: restarted without persistence, flushed, its quota key evicted
(`maxmemory-policy allkeys-lru`) or deleted, a replica promoted before it had the last writes.
Databases tell by a log sequence number and an epoch (PostgreSQL's timeline, etcd's cluster id
and revision); so does the ledger here:

- Identity. Every durable document a networked store holds carries, inside it (so it is written
  in the same SET as the counters), `_ledger`: `gen`, a generation id made once when a fresh
  fleet first writes the document, and `seq`, which every write advances. A restore makes a new
  generation and keeps a short history of restores (`restored`: when, from which host, the
  generations it replaced and per generation the state it restored of it (`bases`, `base_seqs`),
  the hosts that folded their witness in since, and the units no witness could account for).
- Witness. Every host keeps, in its own state directory, the last state of each durable document
  it wrote or read (`search-witness-<name>.json`: gen, seq, when, the document). Small, written
  atomically (statefile), never holding a key: the documents hold none.

`judge` compares the two at every read and write: a document missing while the witness holds
one (and its expiry has not passed), of another generation, or behind the witness's seq is a
loss; a restore of the witness's generation from an earlier state than the witness is a repair (fold
the witness in, once); a
store that never held the document and a host without a witness is a fresh start. The store only
detects and reports (`StateLost` carrying a `Loss`); what to do about it is the budget's
(`budget/recovery.py`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from typing import Any, NamedTuple

from smart_search.store.statefile import StateFile
from smart_search.text.stamps import utc_stamp

META = "_ledger"
WITNESS_FORMAT = "smart-search/witness@1"
# Restores remembered in the document (each with its base, for the hosts still to fold in).
KEEP_RESTORES = 4
# A witness still current is re-stamped (its `at`: "lost after ...") at most this often.
SEEN_EVERY_S = 30.0

Document = dict[str, Any]


def host_label(state_dir: str) -> str:
    """This host as the fleet names it: the machine's name and a short tag of its state
    directory (two state directories on one machine are two hosts of the fleet)."""
    tag = hashlib.sha256(os.path.abspath(state_dir).encode()).hexdigest()[:6]
    return f"{socket.gethostname()}/{tag}"


class Witness(NamedTuple):
    gen: str
    seq: int
    at: float  # Unix time this host last saw the document so
    doc: Document


class Loss(NamedTuple):
    """What the store found: `kind` is "missing", "generation", "behind", "marked" (another host
    found the loss and the operator chose to refuse until a restore) or "repair" (a restore of
    the witness's generation this host has not folded its witness into yet)."""

    name: str
    kind: str
    witness: Witness | None
    meta: Document | None  # the store's `_ledger` as found
    host: str


def split(raw: Document | None) -> tuple[Document | None, Document | None]:
    """(document without its identity, the identity) of what the store holds."""
    if raw is None or META not in raw:
        return raw, None
    doc = dict(raw)
    meta = doc.pop(META)
    return doc, meta if isinstance(meta, dict) else None


def joined(doc: Document, meta: Document) -> Document:
    return {**doc, META: meta}


def new_gen() -> str:
    return os.urandom(8).hex()


def advance(meta: Document | None, now: float) -> Document:
    """The identity after one more write: the same generation (a new one for a first write), the
    next seq; any loss mark stays until a restore replaces the identity."""
    if meta is None:
        return {"gen": new_gen(), "seq": 1, "at": now, "restored": []}
    return {**meta, "seq": int(meta.get("seq", 0)) + 1, "at": now}


def restore_record(meta: Document | None, witness_gen: str | None) -> Document | None:
    """The restore in `meta`'s history that replaced `witness_gen`, if any."""
    for record in (meta or {}).get("restored") or []:
        if witness_gen is not None and witness_gen in record.get("lost_gens", []):
            return record
    return None


def judge(
    name: str, meta: Document | None, present: bool, witness: Witness | None, host: str,
    ttl_s: float | None, now: float,
) -> Loss | None:  # fmt: skip
    """None when the store's document may be used as it is; else the Loss."""

    def loss(kind: str) -> Loss:
        return Loss(name, kind, witness, meta, host)

    if meta is not None and meta.get("lost"):
        return loss("marked")
    if witness is None:
        return None  # a host that never saw the document: whatever the store holds is news
    if not present:
        expired = ttl_s is not None and witness.at + ttl_s <= now
        return None if expired else loss("missing")
    if meta is None:
        return loss("generation")  # a document without identity replaced ours
    if meta.get("gen") == witness.gen:
        return None if int(meta.get("seq", 0)) >= witness.seq else loss("behind")
    record = restore_record(meta, witness.gen)
    if record is None:
        return loss("generation")
    # A restore of the witness's generation: fold in what this host saw past the restore's base
    # of it (once: the fold moves the base up to the witness).
    folded_to = (record.get("base_seqs") or {}).get(witness.gen, 0)
    return None if witness.seq <= folded_to else loss("repair")


def refusal(url: str, loss: Loss) -> str:
    """The `state_lost` message (the URL already masked)."""
    if loss.kind == "marked":
        lost = (loss.meta or {}).get("lost") or {}
        after = lost.get("after")
    else:
        after = loss.witness.at if loss.witness is not None else None
    when = utc_stamp(after) if isinstance(after, int | float) else "an unknown time"
    return (
        f"The shared ledger at {url} lost its data after {when}; nothing was spent. Run "
        "`smart-search state restore` on a host of the fleet to bring it back from the "
        "witnesses (see docs/operations.md, A store that forgot)."
    )


# -- the witness file ---------------------------------------------------------------------------
def witness_file(state_dir: str, name: str, lock_timeout_ms: int) -> StateFile:
    # Advisory as a file (no fsync; a damaged one reads as none): it guards against the store
    # forgetting, and losing it too in an OS crash of this host only narrows what it can vouch for.
    return StateFile(state_dir, f"search-witness-{name}.json", lock_timeout_ms, advisory=True)


def read_witness(state_dir: str, name: str, lock_timeout_ms: int) -> Witness | None:
    raw = witness_file(state_dir, name, lock_timeout_ms).read()
    return _parse(raw)


def _parse(raw: Document | None) -> Witness | None:
    if not isinstance(raw, dict) or raw.get("format") != WITNESS_FORMAT:
        return None
    gen, seq, at, doc = raw.get("gen"), raw.get("seq"), raw.get("at"), raw.get("doc")
    if not isinstance(gen, str) or not isinstance(seq, int) or not isinstance(doc, dict):
        return None
    return Witness(gen, seq, float(at) if isinstance(at, int | float) else 0.0, doc)


def keep(
    state_dir: str, name: str, lock_timeout_ms: int, meta: Document, doc: Document,
    now: float | None = None,
) -> None:  # fmt: skip
    """Record that this host saw `doc` at `meta`'s gen and seq, unless the witness already
    holds a later state of the same generation (processes of one host race to write it)."""
    gen, seq = str(meta.get("gen")), int(meta.get("seq", 0))
    at = time.time() if now is None else now

    def change(raw: Document | None) -> tuple[Document | None, None]:
        held = _parse(raw)
        if held is not None and held.gen == gen and held.seq >= seq:
            if held.seq == seq and held.at < at - SEEN_EVERY_S:
                return {**(raw or {}), "at": at}, None  # seen again: still current at `at`
            return None, None
        return {"format": WITNESS_FORMAT, "gen": gen, "seq": seq, "at": at, "doc": doc}, None

    witness_file(state_dir, name, lock_timeout_ms).update(change)
