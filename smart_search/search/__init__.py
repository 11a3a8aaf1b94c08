"""The search walk: the three tools (`tools`), routing and tier plans (`planner`), one walk
over the tiers under one deadline (`tiers`), deep mode (`deep`), rank fusion (`fusion`), the
result cache (`cache`) and what a search says about its filters (`filter_notes`). It calls the
sources and the budget; only the shell and nothing else imports it."""
