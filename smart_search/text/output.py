"""The shape of what reaches the model: the `max_result_chars` cap (RULINGS 1).

The cap counts the characters of `results` serialized as compact JSON. Lists lose whole results
from the end first; only a single result that alone is too long loses its sitelinks, then has its
snippet (then title) cut.
A Gemini answer (a string) is cut at the limit, on a word boundary where one is near.
"""

from __future__ import annotations

from typing import Any

import orjson

ELLIPSIS = "…"


def json_chars(value: Any) -> int:
    return len(orjson.dumps(value).decode("utf-8"))


def cap_results(results: Any, max_chars: int) -> tuple[Any, bool]:
    """(results within the cap, whether anything was cut)."""
    if json_chars(results) <= max_chars:
        return results, False
    if isinstance(results, str):
        return _cap_text(results, max_chars), True
    kept = list(results)
    while len(kept) > 1 and json_chars(kept) > max_chars:
        kept.pop()
    if json_chars(kept) > max_chars:
        item = dict(kept[0])
        item.pop("sitelinks", None)  # the extras go before the result's own text is cut
        if json_chars([item]) <= max_chars:
            return [item], True
        budget = max_chars - json_chars([{**item, "snippet": "", "title": ""}])
        title_budget = min(len(item["title"]), max(0, budget // 4))
        item["title"] = _cut(item["title"], title_budget)
        item["snippet"] = _cut(item["snippet"], max(0, budget - json_chars(item["title"])))
        kept = [item]
        # Escapes can make the serialized text longer than the raw characters: shrink to fit.
        while json_chars(kept) > max_chars and kept[0]["snippet"]:
            kept[0]["snippet"] = _cut(kept[0]["snippet"], len(kept[0]["snippet"]) - 8)
    return kept, True


def _cap_text(text: str, max_chars: int) -> str:
    budget = max_chars - 2  # the quotes
    cut = _cut(text, budget)
    while json_chars(cut) > max_chars:
        cut = _cut(cut, len(cut) - max(8, (json_chars(cut) - max_chars)))
    return cut


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return ""
    head = text[: limit - len(ELLIPSIS)]
    space = head.rfind(" ")
    if space > len(head) * 0.8:
        head = head[:space]
    return head.rstrip() + ELLIPSIS


def summary(results: Any, limit: int = 500) -> str | None:
    """`response_summary` for the log: the start of the results, at most `limit` characters."""
    if results is None:
        return None
    text = results if isinstance(results, str) else orjson.dumps(results).decode("utf-8")
    return text[:limit]
