"""The search log: one line builder against `schemas/search-log.json` (`line`) and the files it
is appended to, rotated and read from (`files`). The report reads what this writes."""
