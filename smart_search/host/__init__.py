"""The host: OpenClaw's config and state paths as OpenClaw 2026.9 resolves them (`openclaw/`),
and the skill's settings read from it (`config`, driven by the key table in `config_keys`)."""
