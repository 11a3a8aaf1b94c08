"""The sources: the search APIs (`providers/`), the scraped engines (`engines/`), the one HTTP
sender (`http`, over `transport`), the retry policy (`retry`) and the search filters
(`filters`). Wire formats only: no quota, no breaker, no logs."""
