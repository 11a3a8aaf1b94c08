"""The result cap, log retention, and the trailing-newline trap under a real validator."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from smart_search.logs.files import append_search_log, prune_logs
from smart_search.text.output import cap_results, json_chars, summary
from tests.conftest import SCHEMAS, Env, _registry


def compact(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def test_json_chars_counts_compact_json_characters() -> None:
    value = [{"title": 'żółw "q"', "url": "https://e.org", "snippet": "a\nb"}]
    assert json_chars(value) == compact(value)


def test_a_single_oversized_result_keeps_its_url_and_is_cut_to_fit() -> None:
    item = {"title": "T" * 50, "url": "https://example.org/x", "snippet": "word " * 5000}
    capped, truncated = cap_results([item], 1000)
    assert truncated and len(capped) == 1
    assert capped[0]["url"] == item["url"] and capped[0]["title"] == item["title"]
    assert compact(capped) <= 1000 and capped[0]["snippet"].endswith("…")
    assert len(capped[0]["snippet"]) > 500  # cut to fit, not emptied


def test_a_single_result_too_long_for_its_sitelinks_loses_them_first() -> None:
    links = [{"title": f"Page {i}", "url": f"https://example.org/{'p' * 200}{i}"} for i in range(6)]
    own = {"title": "T", "url": "https://example.org/", "snippet": "word " * 100}
    capped, truncated = cap_results([{**own, "sitelinks": links}], 1000)
    assert truncated and capped == [own]


def test_an_answer_string_is_cut_on_a_word_boundary() -> None:
    answer = "The quick brown fox jumps over the lazy dog. " * 400
    capped, truncated = cap_results(answer, 10000)
    assert truncated and compact(capped) <= 10000 and capped.endswith("…")
    assert capped[:-1].rstrip().endswith(("dog.", "The", "quick", "brown", "fox", "jumps", "over",
                                          "the", "lazy"))  # fmt: skip


def test_results_within_the_cap_are_untouched() -> None:
    results = [{"title": "a", "url": "https://e.org", "snippet": "b"}]
    assert cap_results(results, 10000) == (results, False)
    assert cap_results("short", 10000) == ("short", False)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(min_size=1, max_size=3000),
        st.lists(
            st.fixed_dictionaries(
                {"title": st.text(max_size=300), "url": st.just("https://e.org/p"),
                 "snippet": st.text(max_size=2000)},
                optional={"sitelinks": st.lists(
                    st.fixed_dictionaries({"title": st.text(max_size=200),
                                           "url": st.just("https://e.org/s")}),
                    min_size=1, max_size=6,
                )},
            ),
            min_size=1, max_size=12,
        ),
    ),
    st.integers(100, 5000),
)  # fmt: skip
def test_the_cap_always_holds_and_lists_keep_a_prefix(results: object, limit: int) -> None:
    capped, truncated = cap_results(results, limit)
    assert compact(capped) <= limit
    assert truncated == (compact(results) > limit)
    if isinstance(results, list):
        assert 1 <= len(capped) <= len(results)
        assert capped[:-1] == results[: len(capped) - 1]  # whole results, in order


def test_summary_is_at_most_500_characters() -> None:
    assert len(summary("x" * 2000)) == 500
    assert summary(None) is None


def test_retention_goes_by_the_date_in_the_name_only(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    names = {
        "search-2026-11-30.jsonl": True,  # today
        "search-2026-10-31.jsonl": True,  # exactly 30 days old: kept
        "search-2026-10-30.jsonl": False,  # 31 days old
        "search-2025-01-01.jsonl": False,
        "search-2026-13-45.jsonl": True,  # not a date: not ours to judge
        "notes.txt": True,
        "search-2020-01-01.jsonl.bak": True,
        "internal-errors.log": True,
    }
    for name in names:
        (logs / name).write_text("{}\n")
    # Modification times say the opposite of the names: they must not matter.
    os.utime(logs / "search-2026-11-30.jsonl", (0, 0))
    future = time.time() + 86400
    os.utime(logs / "search-2025-01-01.jsonl", (future, future))
    removed = prune_logs(str(logs), "2026-11-30", 30)
    assert sorted(removed) == sorted(n for n, keep in names.items() if not keep)
    assert sorted(p.name for p in logs.iterdir()) == sorted(n for n, keep in names.items() if keep)


def test_appending_prunes_and_never_raises(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "search-2000-01-01.jsonl").write_text("{}\n")
    append_search_log(str(tmp_path), "2026-11-30", {"a": 1}, 30)
    assert [p.name for p in (tmp_path / "logs").iterdir()] == ["search-2026-11-30.jsonl"]
    # An unwritable log location is swallowed (a log failure never fails a search).
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    append_search_log(str(blocker), "2026-11-30", {"a": 1}, 30)


def test_jsonschema_itself_rejects_a_trailing_newline_in_agent_id() -> None:
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMAS / "smart_search.args.json").read_text())
    validator = Draft202012Validator(schema, registry=_registry())
    assert validator.is_valid({"query": "q", "agent_id": "general"})
    assert not validator.is_valid({"query": "q", "agent_id": "general\n"})
    assert not validator.is_valid({"query": "q", "agent_id": "general\r"})


def test_every_line_the_writer_writes_is_what_the_line_schema_allows(env: Env) -> None:
    """Real calls of every kind (an API answer, a cache hit, a forced provider, a deep call, a
    call where every source fails): each line validates against schemas/search-log.json."""
    from jsonschema import Draft202012Validator

    from tests.fakes import FakeServer, Reply
    from tests.test_deep import AGENT, QUERY, answer_all, configure

    with FakeServer() as fake:
        configure(env, fake, deep_max_units=4)
        answer_all(fake)
        calls = [
            {"query": QUERY, "agent_id": AGENT},
            {"query": QUERY, "agent_id": AGENT},  # the result cache answers
            {"query": "another query", "agent_id": AGENT, "force_provider": "gemini"},
            {"query": QUERY, "agent_id": AGENT, "mode": "deep"},
        ]
        for args in calls:
            assert env.call("smart_search", args)["error"] is None
        for path in ("/res/v1/web/search", "/html/", "/search"):
            fake.route(path, Reply(500, b"down"))
        fake.route("/v1beta/models/gemini-flash-latest:generateContent", Reply(500, b"down"))
        failed = env.call("smart_search", {"query": "a third query", "agent_id": AGENT})
        assert failed["error_code"] == "all_exhausted"
    lines = [
        json.loads(raw)
        for path in sorted((env.state_dir / "logs").glob("search-*.jsonl"))
        for raw in path.read_text().splitlines()
    ]
    assert [(line["mode"], line["cached"], line["success"]) for line in lines] == [
        ("first", False, True),
        ("first", True, True),
        ("first", False, True),
        ("deep", False, True),
        ("first", False, False),
    ]
    schema = json.loads((SCHEMAS / "search-log.json").read_text())
    validator = Draft202012Validator(schema, registry=_registry())
    for line in lines:
        errors = list(validator.iter_errors(line))
        assert not errors, (errors[0].message, line)
    # The schema is strict enough to catch a line missing `mode` or carrying an invented field.
    assert not validator.is_valid({k: v for k, v in lines[0].items() if k != "mode"})
    assert not validator.is_valid({**lines[0], "modus": "deep"})


@settings(max_examples=400, deadline=None)
@given(
    name=st.one_of(
        st.text(max_size=30),
        st.from_regex(r"search-[0-9\u0660-\u0669-]{10}\.jsonl", fullmatch=True),
        st.from_regex(r"search-\d{4}-\d{2}-\d{2}\.jsonl", fullmatch=True),
    )
)
def test_the_log_name_check_without_a_pattern_agrees_with_the_pattern(name: str) -> None:
    import re

    from smart_search.logs.files import SEARCH_LOG, _log_stamp

    match = re.fullmatch(SEARCH_LOG, name)
    assert _log_stamp(name) == (match.group(1) if match else None)
