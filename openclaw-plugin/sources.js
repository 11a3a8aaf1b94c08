// What the smart-search command can search and where it reads keys, as its registry declares it:
// sources.json is written by `python3 -m smart_search.host.source_table --write` and checked by
// tests/test_source_table.py, so what the plugin tells OpenClaw is what the product does
// (issue 30). Which of them an install has configured only the product knows: `smart-search
// doctor` and `search_quota_status` (its `sources` map) say.

import { readFileSync } from "node:fs";

function listed() {
  try {
    const text = readFileSync(new URL("./sources.json", import.meta.url), "utf8");
    const sources = JSON.parse(text).sources;
    return Array.isArray(sources) ? sources : [];
  } catch {
    return []; // a copy without the list: the plugin still works, it just names no source
  }
}

export const SOURCES = Object.freeze(listed());

/** The variables the product reads API keys from (OpenClaw shows them as the provider's envVars). */
export const KEY_VARIABLES = Object.freeze(
  SOURCES.filter((s) => s.kind === "api" && s.keyVariable).map((s) => s.keyVariable),
);

/** One line naming every source, for the provider's hint. */
export function sourcesHint() {
  const labels = (kind) => SOURCES.filter((s) => s.kind === kind).map((s) => s.label).join(", ");
  const apis = labels("api");
  const engines = labels("web");
  if (!apis && !engines) return "Web search under one quota ledger, charged to the calling agent.";
  return (
    `${apis} APIs and ${engines} engines under one quota ledger, charged to the calling agent ` +
    "(smart-search doctor lists which are configured)."
  );
}
