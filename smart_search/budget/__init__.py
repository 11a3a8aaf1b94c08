"""The budget: quota arithmetic (`quota`, pure), the ledger that applies it through the state
seam (`ledger`), reading older ledgers (`migrate`, `legacy_ledger`), the one ledger merge
(`quota_merge`), the shared circuit breaker (`breaker`) and engine pacing (`pacing`)."""
