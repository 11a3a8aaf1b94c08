"""The ledger an earlier release kept per workspace, folded into the one ledger exactly once.

Earlier releases kept `search-quota.json` in `$OPENCLAW_WORKSPACE_DIR/shared` (config.py finds
that directory: `Settings.legacy_state_dir`). When that file exists, under its own file lock:
its counters (read through the ledger, so every format the ledger reads is understood) are
added to the install's ledger through the state seam, whatever backend that is (files or
Redis), with the same merge as `state import --add`; then the old file is renamed
`search-quota.json.merged` so it is never counted twice. Units spent there still count: the
merge can only make the ledger stricter. A crash between the two steps counts them twice
(stricter still), never zero times.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from smart_search.budget.ledger import QUOTA_FILE, Ledger
from smart_search.store.files import FileStore
from smart_search.store.statefile import StateFile

if TYPE_CHECKING:
    from smart_search.host.config import Settings


def merge_legacy_ledger(settings: Settings) -> bool:
    """Fold the legacy per-workspace ledger into the install's ledger; True when one was."""
    old_dir = settings.legacy_state_dir
    if not old_dir:
        return False
    old_path = os.path.join(old_dir, QUOTA_FILE)
    if not os.path.exists(old_path):
        return False
    old_file = StateFile(old_dir, QUOTA_FILE, settings.lock_timeout_ms)
    old_ledger = Ledger(settings, FileStore(old_dir, settings.lock_timeout_ms))

    def under_old_lock(_raw: Any) -> tuple[None, bool]:
        if not os.path.exists(old_path):
            return None, False  # another process merged it while we waited
        Ledger(settings).merge(old_ledger.snapshot(), add=True)
        target = old_path + ".merged"
        n = 1
        while os.path.exists(target):
            n += 1
            target = f"{old_path}.merged-{n}"
        os.replace(old_path, target)
        return None, True

    return old_file.update(under_old_lock)
