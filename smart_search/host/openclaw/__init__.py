"""Where OpenClaw keeps things, resolved exactly as OpenClaw 2026.9.6 resolves them (RULINGS 2).

Mirrored from the npm package `openclaw@2026.9.6` (files under its `dist/`, named in each module):

- `homes`: the effective home directory and `~` expansion (home-dir.ts);
- `locations`: OpenClaw's state directory, the config file it reads, the include roots
  (state-dir.ts, paths.ts);
- `config_text`: a config file's bytes, size-bounded, into a value (JSON, then JSON5);
- `includes`: the config as OpenClaw reads it, every `$include` resolved (includes.ts);
- `skill_dirs`: smart-search's own state directory inside OpenClaw's, and the legacy one.

Everything here is pure path logic plus file reads: no quota, no network. The rest of the package
imports these names from here.
"""

from smart_search.host.openclaw.config_text import parse_config_text
from smart_search.host.openclaw.includes import load_config
from smart_search.host.openclaw.locations import ConfigLocation, config_location
from smart_search.host.openclaw.skill_dirs import legacy_ledger_dir, skill_state_dir

__all__ = [
    "ConfigLocation",
    "config_location",
    "legacy_ledger_dir",
    "load_config",
    "parse_config_text",
    "skill_state_dir",
]
