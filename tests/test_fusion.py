"""Deep search's merge (issue 15): canonical URLs and ranked fusion, on real provider payloads
and saved results pages parsed by our own parsers, plus properties over generated inputs."""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smart_search.search.fusion import DEFAULT_K, canonical_url, merge, merge_key
from smart_search.sources.engines import bing, duckduckgo, google
from smart_search.sources.http import HttpResponse
from smart_search.sources.providers import brave, gemini

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


class _GeminiSettings:
    gemini_model = "gemini-test-flash"


def brave_results() -> list[dict[str, str]]:
    body = (FIXTURES / "api" / "brave-ok.json").read_bytes()
    return brave.parse_response(HttpResponse(200, {}, body), None).results


def gemini_answer() -> Any:
    body = (FIXTURES / "api" / "gemini-ok.json").read_bytes()
    return gemini.parse_response(HttpResponse(200, {}, body), _GeminiSettings())


def page(engine: str, name: str) -> list[dict[str, str]]:
    module = {"google": google, "bing": bing, "duckduckgo": duckduckgo}[engine]
    return module.parse((FIXTURES / "serp" / engine / name).read_bytes())


GOOGLE_PAGE = ("google", "basic-results-google.html")
BING_PAGE = ("bing", "results-javascript-tutorial.html")
DDG_PAGE = ("duckduckgo", "html-results-caffeine.html")


def item_validator() -> Any:
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMAS / "smart_search.result.json").read_text())
    return Draft202012Validator({**schema["$defs"]["result_item"], "$defs": schema["$defs"]})


def assert_schema_valid(results: list[dict[str, Any]]) -> None:
    validator = item_validator()
    for result in results:
        errors = list(validator.iter_errors(result))
        assert not errors, (errors[0].message, result)


# --- canonical_url: the rules one by one ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://example.com/a", "https://example.com/a"),
        ("HTTPS://Example.COM/Path", "https://example.com/Path"),  # host lowered, path kept
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:80/a", "https://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("https://www.example.com/a", "https://example.com/a"),
        ("https://m.example.com/a", "https://example.com/a"),
        ("https://amp.example.com/a", "https://example.com/a"),
        ("https://www.m.example.co.uk/a", "https://example.co.uk/a"),
        ("https://www.com/", "https://www.com"),  # two labels stay: "com" is no site
        ("https://m.example/", "https://m.example"),
        ("https://example.com/", "https://example.com"),
        ("https://example.com", "https://example.com"),
        ("https://example.com/a/b//", "https://example.com/a/b"),
        ("https://example.com/a#section-2", "https://example.com/a"),
        ("https://example.com./a", "https://example.com/a"),
        ("  https://example.com/a \n", "https://example.com/a"),
        ("https://example.com/a?utm_source=x&utm_medium=y", "https://example.com/a"),
        ("https://example.com/a?UTM_Campaign=x", "https://example.com/a"),
        (
            "https://example.com/a?fbclid=1&gclid=2&ref=3&mc_cid=4&mc_eid=5&igshid=6",
            "https://example.com/a",
        ),
        ("https://example.com/watch?v=abc&utm_source=x", "https://example.com/watch?v=abc"),
        ("https://example.com/s?b=2&a=1", "https://example.com/s?a=1&b=2"),
        ("https://example.com/s?a=2&b=0&a=1", "https://example.com/s?a=2&a=1&b=0"),
        ("https://example.com/s?&&a=1&", "https://example.com/s?a=1"),
        ("https://example.com/s?", "https://example.com/s"),
        ("https://example.com/a%7eb%2fc", "https://example.com/a~b%2Fc"),
        ("https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9"),
        ("https://example.com/café", "https://example.com/caf%C3%A9"),
        ("https://example.com/a b", "https://example.com/a%20b"),
        ("https://bücher.de/x", "https://xn--bcher-kva.de/x"),
        ("https://www.BÜCHER.de/x", "https://xn--bcher-kva.de/x"),
        ("https://xn--bcher-kva.de/x", "https://xn--bcher-kva.de/x"),
        ("https://[2001:DB8::1]:8080/x", "https://[2001:db8::1]:8080/x"),
        ("HTTPS://EXAMPLE.COM", "https://example.com"),
        ("https://user@example.com/a", "https://user@example.com/a"),
    ],
)
def test_canonical_url_rules(url: str, canonical: str) -> None:
    assert canonical_url(url) == canonical


@pytest.mark.parametrize(
    "url", ["ftp://example.com/a", "javascript:alert(1)", "/relative/path", "example.com", "", " "]
)
def test_not_http_has_no_canonical_url(url: str) -> None:
    assert canonical_url(url) is None


@pytest.mark.parametrize("value", [None, 3, b"https://example.com", ["https://example.com"]])
def test_non_strings_have_no_canonical_url(value: object) -> None:
    assert canonical_url(value) is None


@pytest.mark.parametrize(
    "junk",
    [
        "http://example.com:99999/",
        "http://example.com:port/",
        "https://a..b.com/",
        "https:///path-only",
        "https://exa mple.com/",
        "https://[::1/x",
        "https://" + "x" * 70 + ".bücher.de/",  # an IDNA label over 63 characters
        "https://example.com/\ud800",  # a lone surrogate cannot be encoded
    ],
)
def test_unreadable_http_urls_are_returned_stripped_and_left_out_of_merges(junk: str) -> None:
    assert canonical_url("  " + junk + " ") == junk
    assert merge_key(junk) is None
    good = {"title": "ok", "url": "https://example.com/ok", "snippet": ""}
    merged = merge({"brave": [{"title": "junk", "url": junk, "snippet": ""}, good]})
    assert [(r["url"], r["sources"]) for r in merged] == [
        ("https://example.com/ok", [{"source": "brave", "rank": 2}])
    ]


def test_configured_tracking_parameters() -> None:
    url = "https://shop.example/item?id=7&campaign_id=x&pk_source=y&pk_medium=z&utm_id=1"
    assert canonical_url(url) == (
        "https://shop.example/item?campaign_id=x&id=7&pk_medium=z&pk_source=y"
    )
    assert canonical_url(url, ["campaign_id", "PK_*"]) == "https://shop.example/item?id=7"


def test_forms_of_one_page_meet() -> None:
    forms = [
        "https://www.example.com/docs/guide/",
        "http://example.com/docs/guide",
        "https://m.example.com/docs/guide#install",
        "https://amp.example.com/docs/guide/?utm_source=newsletter&utm_medium=email",
        "HTTP://EXAMPLE.COM:80/docs/guide?fbclid=IwAR0",
        "https://example.com:443/docs/guide/?ref=hn",
    ]
    assert {canonical_url(form) for form in forms} == {"https://example.com/docs/guide"}


def test_canonical_urls_of_real_results_are_fixed_points() -> None:
    urls = [r["url"] for r in brave_results()] + [c["url"] for c in gemini_answer().citations]
    for engine_page in (GOOGLE_PAGE, BING_PAGE, DDG_PAGE):
        urls += [r["url"] for r in page(*engine_page)]
    for url in urls:
        key = canonical_url(url)
        assert key is not None and key.startswith("https://")
        assert canonical_url(key) == key


# --- canonical_url: properties -------------------------------------------------------------------

label = st.text(alphabet="abcxyz0129-", min_size=1, max_size=6).filter(
    lambda s: not s.startswith("-")
)
hosts = st.builds(
    lambda prefix, labels: prefix + ".".join(labels),
    st.sampled_from(["", "www.", "m.", "amp.", "www.m."]),
    st.lists(label, min_size=2, max_size=3),
)
segments = st.lists(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Z")), max_size=6
    ),
    max_size=3,
)
params = st.lists(
    st.tuples(
        st.sampled_from(["q", "id", "page", "utm_source", "fbclid", "ref", "Lang", "a b"]),
        st.text(alphabet="az09%&=+é~", max_size=4),
    ),
    max_size=4,
)
urls = st.builds(
    lambda scheme, host, port, path, query, fragment: (
        f"{scheme}://{host}{port}/{'/'.join(path)}"
        + ("?" + "&".join(f"{k}={v}" for k, v in query) if query else "")
        + fragment
    ),
    st.sampled_from(["http", "https", "HTTP", "Https"]),
    hosts,
    st.sampled_from(["", ":80", ":443", ":8080"]),
    segments,
    params,
    st.sampled_from(["", "#", "#top", "#a?b=c"]),
)


@settings(max_examples=400, deadline=None)
@given(url=st.one_of(urls, st.text(max_size=40), st.from_regex(r"https?://\S{0,20}")))
def test_canonical_url_is_idempotent_and_never_raises(url: str) -> None:
    key = canonical_url(url)
    if key is not None:
        assert canonical_url(key) == key


@settings(max_examples=200, deadline=None)
@given(url=st.one_of(urls, st.text(max_size=30)))
def test_merge_key_is_the_canonical_url_of_readable_urls(url: str) -> None:
    key = merge_key(url)
    assert key is None or key == canonical_url(url)
    if key is None and canonical_url(url) is not None:
        assert canonical_url(url) == url.strip()


@settings(max_examples=300, deadline=None)
@given(url=urls, data=st.data())
def test_cosmetic_changes_keep_the_canonical_url(url: str, data: st.DataObject) -> None:
    key = canonical_url(url)
    assert key is not None and key.startswith("https://")
    base = url.split("#", 1)[0]
    cosmetic = data.draw(
        st.sampled_from(
            [
                base + "#fragment",
                base.replace("https://", "http://", 1) if base.startswith("https") else base,
                base + ("&" if "?" in base else "?") + "utm_campaign=spring",
                base + ("&" if "?" in base else "?") + "gclid=abc",
            ]
        )
    )
    assert canonical_url(cosmetic) == key


# --- merge on real payloads ----------------------------------------------------------------------


def test_a_real_page_listing_one_site_twice_gives_one_result() -> None:
    # Google's page lists https://www.google.com/ at rank 1 and http://www.google.com/ at 7.
    results = page(*GOOGLE_PAGE)
    assert results[0]["url"] == "https://www.google.com/"
    assert results[6]["url"] == "http://www.google.com/"
    merged = merge({"google": results})
    assert len(merged) == len(results) - 1
    first = merged[0]
    assert first["url"] == "https://www.google.com/" and first["title"] == results[0]["title"]
    assert first["sources"] == [
        {"source": "google", "rank": 1},
        {"source": "google", "rank": 7, "url": "http://www.google.com/"},
    ]
    # One source counts once, at its better rank.
    assert first["ranking"]["contributions"] == {"google": round(1 / (DEFAULT_K + 1), 6)}
    assert first["ranking"]["corroboration"] == 1
    # The others keep Google's order.
    assert [r["url"] for r in merged[1:]] == [
        r["url"] for i, r in enumerate(results) if i not in (0, 6)
    ]
    assert_schema_valid(merged)


def test_a_merged_result_keeps_the_sitelinks_a_variant_carried() -> None:
    # Brave's variant is the best ranked; Bing's, lower, carries the sitelinks (issue 22).
    links = [{"title": "Releases", "url": "https://github.com/o/r/releases"}]
    bings = {"title": "o/r", "url": "https://github.com/o/r/", "snippet": "Bing's"}
    legs = {
        "brave": [{"title": "o/r", "url": "https://github.com/o/r", "snippet": "Brave's"}],
        "bing": [
            {"title": "Other", "url": "https://other.example/", "snippet": "o"},
            {**bings, "sitelinks": links},
        ],
    }
    merged = merge(legs)
    first = next(r for r in merged if r["ranking"]["canonical_url"] == "https://github.com/o/r")
    assert list(first) == ["title", "url", "snippet", "sitelinks", "sources", "ranking"]
    assert (first["url"], first["snippet"], first["sitelinks"]) == (
        "https://github.com/o/r",
        "Brave's",
        links,
    )
    assert [r for r in merged if "sitelinks" in r] == [first]  # the key only where there are some
    assert_schema_valid(merged)


def test_path_case_is_kept_apart() -> None:
    results = page(*BING_PAGE)
    merged = merge({"bing": results})
    urls = [r["url"] for r in merged]
    assert (
        "https://www.w3schools.com/Js/" in urls
        and "https://www.w3schools.com/js/js_intro.asp" in urls
    )
    assert len(merged) == len(results) == 10


def _variant_forms(results: list[dict[str, str]]) -> list[dict[str, str]]:
    """The same pages as another source might link them: other scheme, host prefix, slash,
    fragment and tracking parameters; titles and snippets of its own."""
    forms = [
        lambda u: u.replace("https://", "http://", 1),
        lambda u: u + "#main",
        lambda u: u + ("&" if "?" in u else "?") + "utm_source=engine&utm_medium=serp",
        lambda u: u + "&fbclid=XYZ" if "?" in u else (u[:-1] if u.endswith("/") else u + "/"),
        lambda u: (
            u.replace("://www.", "://", 1) if "://www." in u else u.replace("://", "://www.", 1)
        ),
    ]
    out = []
    for index, result in enumerate(results):
        url = forms[index % len(forms)](result["url"])
        out.append({"title": "Other " + result["title"], "url": url, "snippet": "other snippet"})
    return out


def test_brave_results_found_again_in_other_forms_merge_and_rise() -> None:
    brave_leg = brave_results()
    engine_leg = list(reversed(_variant_forms(brave_leg)))
    assert all(a["url"] != b["url"] for a, b in zip(brave_leg, reversed(engine_leg), strict=True))
    engine_only = page(*DDG_PAGE)[:3]
    merged = merge({"brave": brave_leg, "duckduckgo": engine_leg + engine_only})
    n = len(brave_leg)
    assert len(merged) == n + len(engine_only)
    # Every page both found comes before any page only one found.
    assert [r["ranking"]["corroboration"] for r in merged] == [2] * n + [1] * len(engine_only)
    for result in merged[:n]:
        by_source = {s["source"]: s for s in result["sources"]}
        assert set(by_source) == {"brave", "duckduckgo"}
        brave_rank = by_source["brave"]["rank"]
        original = brave_leg[brave_rank - 1]
        # The best-ranked variant gives url, title and snippet.
        best = min(result["sources"], key=lambda s: (s["rank"], s["source"]))
        if best["source"] == "brave":
            assert (result["url"], result["title"], result["snippet"]) == (
                original["url"],
                original["title"],
                original["snippet"],
            )
        else:
            assert result["title"].startswith("Other ")
        contributions = result["ranking"]["contributions"]
        ddg_rank = by_source["duckduckgo"]["rank"]
        assert contributions["brave"] == round(1 / (DEFAULT_K + brave_rank), 6)
        assert contributions["duckduckgo"] == round(1 / (DEFAULT_K + ddg_rank), 6)
    # Within the corroborated ones the score decides; brave ranks 1..n against n..1 all sum the
    # same, so the tie falls to the best native rank.
    assert [r["ranking"]["best_rank"] for r in merged[:n]] == sorted(
        r["ranking"]["best_rank"] for r in merged[:n]
    )
    assert [r["ranking"]["position"] for r in merged] == list(range(1, len(merged) + 1))
    assert_schema_valid(merged)


def test_three_real_pages_interleave_by_rank_with_a_total_tie_break() -> None:
    legs = {"google": page(*GOOGLE_PAGE), "bing": page(*BING_PAGE), "duckduckgo": page(*DDG_PAGE)}
    merged = merge(legs)
    assert len(merged) == sum(len(v) for v in legs.values()) - 1  # Google's duplicate
    first_three = merged[:3]
    assert {r["sources"][0]["rank"] for r in first_three} == {1}
    keys = [r["ranking"]["canonical_url"] for r in first_three]
    assert keys == sorted(keys)  # equal scores, equal ranks: canonical URL decides
    assert [r["url"] for r in first_three] == [
        "https://www.google.com/",
        "https://www.sleepfoundation.org/nutrition/caffeine-and-sleep",
        "https://www.w3schools.com/Js/",
    ]
    scores = [(r["ranking"]["corroboration"], r["ranking"]["score"]) for r in merged]
    assert scores == sorted(scores, reverse=True)
    assert_schema_valid(merged)


def test_weights_move_a_source_up() -> None:
    legs = {"google": page(*GOOGLE_PAGE), "duckduckgo": page(*DDG_PAGE)}
    plain = merge(legs)
    assert plain[0]["url"] == "https://www.google.com/"  # tie at rank 1: canonical URL
    weighted = merge(legs, {"duckduckgo": 2.0})
    assert [r["sources"][0]["source"] for r in weighted[:2]] == ["duckduckgo", "duckduckgo"]
    top = weighted[0]["ranking"]
    assert top["contributions"] == {"duckduckgo": round(2 / (DEFAULT_K + 1), 6)}
    assert top["score"] == round(2 / (DEFAULT_K + 1), 6)


def test_corroboration_outranks_a_better_single_rank() -> None:
    ddg = page(*DDG_PAGE)
    last = ddg[-1]
    other = [{"title": "x", "url": f"https://other{i}.example/"} for i in range(9)] + [last]
    merged = merge({"duckduckgo": ddg, "brave": other})
    assert merged[0]["url"] == last["url"]
    assert merged[0]["ranking"]["corroboration"] == 2
    assert merged[0]["ranking"]["score"] < 2 / (DEFAULT_K + 1)  # less than two first places
    assert merged[1]["ranking"]["best_rank"] == 1


def test_k_changes_the_spread() -> None:
    merged = merge({"google": page(*GOOGLE_PAGE)}, k=0)
    assert merged[0]["ranking"]["score"] == 1.0
    assert merged[1]["ranking"]["score"] == 0.5


def test_gemini_citations_corroborate_by_domain_and_its_answer_stays_out() -> None:
    answer = gemini_answer()
    assert isinstance(answer.results, str) and answer.results  # kept whole by the caller
    citations = answer.citations
    assert [c["title"] for c in citations] == ["nasa.gov", "esa.int", "wikipedia.org"]
    engine = [
        {
            "title": "Webb - NASA Science",
            "url": "https://science.nasa.gov/mission/webb/",
            "snippet": "s1",
        },
        {
            "title": "JWST - Wikipedia",
            "url": "https://en.wikipedia.org/wiki/James_Webb_Space_Telescope",
            "snippet": "s2",
        },
        {"title": "Other", "url": "https://example.org/webb", "snippet": "s3"},
        {"title": "Webb launch", "url": "https://www.nasa.gov/webb-launch/", "snippet": "s4"},
    ]
    merged = merge({"gemini": citations, "google": engine})
    by_url = {r["url"]: r for r in merged}
    nasa = by_url["https://science.nasa.gov/mission/webb/"]
    # The nasa.gov citation (Gemini's first) corroborates the best-ranked nasa.gov result only.
    assert nasa["sources"] == [
        {"source": "gemini", "rank": 1, "url": citations[0]["url"], "matched": "domain"},
        {"source": "google", "rank": 1},
    ]
    assert nasa["title"] == "Webb - NASA Science"  # never the citation's bare domain
    assert by_url["https://www.nasa.gov/webb-launch/"]["ranking"]["corroboration"] == 1
    wiki = by_url["https://en.wikipedia.org/wiki/James_Webb_Space_Telescope"]
    assert [s["source"] for s in wiki["sources"]] == ["google", "gemini"]
    # esa.int has no result: the citation is a result of its own, its redirect and domain.
    esa = by_url[citations[1]["url"]]
    assert (esa["title"], esa["snippet"], esa["sources"]) == (
        "esa.int",
        "",
        [{"source": "gemini", "rank": 2}],
    )
    assert [r["ranking"]["corroboration"] for r in merged[:2]] == [2, 2]
    assert merged[0]["url"] == nasa["url"]
    assert_schema_valid(merged)


def test_gemini_citations_alone_are_a_list() -> None:
    citations = gemini_answer().citations
    merged = merge({"gemini": citations})
    assert [r["url"] for r in merged] == [c["url"] for c in citations]
    assert [r["title"] for r in merged] == [c["title"] for c in citations]


def test_a_citation_of_the_same_url_merges_as_usual() -> None:
    engine = page(*DDG_PAGE)
    citation = {"title": "sleepfoundation.org", "url": engine[2]["url"] + "#cite"}
    merged = merge({"duckduckgo": engine, "gemini": [citation]})
    # The citation is the best-ranked variant (rank 1): its link; the engine's real title.
    assert merged[0]["url"] == citation["url"]
    assert (merged[0]["title"], merged[0]["snippet"]) == (engine[2]["title"], engine[2]["snippet"])
    assert merged[0]["sources"] == [
        {"source": "gemini", "rank": 1},
        {"source": "duckduckgo", "rank": 3, "url": engine[2]["url"]},
    ]


def test_items_without_a_web_url_are_skipped_but_ranks_stay_native() -> None:
    leg: list[Any] = [
        "not a dict",
        {"title": "no url"},
        {"title": "ftp", "url": "ftp://example.com/file"},
        {"title": "ok", "url": "https://example.com/ok", "snippet": 5},
    ]
    merged = merge({"brave": leg})
    assert len(merged) == 1
    assert merged[0]["sources"] == [{"source": "brave", "rank": 4}]
    assert merged[0]["snippet"] == ""


def test_limit_and_empty_legs() -> None:
    legs = {"google": page(*GOOGLE_PAGE), "bing": [], "brave": None}
    assert [r["url"] for r in merge(legs, limit=3)] == [r["url"] for r in merge(legs)[:3]]
    assert merge(legs, limit=0) == []
    assert merge({}) == []


@pytest.mark.parametrize("weight", [0, -1, float("nan"), float("inf"), "2", True])
def test_bad_weights_are_refused(weight: Any) -> None:
    with pytest.raises(ValueError, match="weight"):
        merge({"google": page(*GOOGLE_PAGE)}, {"google": weight})


def test_bad_k_is_refused() -> None:
    with pytest.raises(ValueError, match="k must"):
        merge({"google": page(*GOOGLE_PAGE)}, k=-1)


def test_merge_does_not_touch_its_input() -> None:
    legs = {"brave": brave_results(), "gemini": gemini_answer().citations}
    before = copy.deepcopy(legs)
    merge(legs)
    assert legs == before


# --- merge: properties ---------------------------------------------------------------------------

POOL = [
    "https://www.sleepfoundation.org/nutrition/caffeine-and-sleep",
    "http://sleepfoundation.org/nutrition/caffeine-and-sleep/",
    "https://m.sleepfoundation.org/nutrition/caffeine-and-sleep#faq",
    "https://www.w3schools.com/js/",
    "https://www.w3schools.com/Js/",
    "https://w3schools.com/js/?utm_source=x",
    "https://www.google.com/",
    "http://www.google.com/",
    "https://www.python-httpx.org/advanced/timeouts/",
    "https://python-httpx.org/advanced/timeouts?ref=brave",
    "https://example.com/s?b=2&a=1",
    "https://example.com/s?a=1&b=2",
    "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AAA",
    "https://vertexaisearch.cloud.google.com/grounding-api-redirect/BBB",
    "ftp://example.com/x",
]
TITLES = ["", "A title", "sleepfoundation.org", "google.com", "w3schools.com"]
leg_items = st.lists(
    st.builds(
        lambda url, title: {"title": title, "url": url, "snippet": title[::-1]},
        st.sampled_from(POOL),
        st.sampled_from(TITLES),
    ),
    max_size=8,
)
legs_strategy = st.dictionaries(
    st.sampled_from(["brave", "gemini", "google", "bing", "duckduckgo"]), leg_items, max_size=4
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legs=legs_strategy, seed=st.integers(0, 2**16), weights=st.data())
def test_merge_properties(legs: dict[str, list[dict[str, str]]], seed: int, weights: Any) -> None:
    weight_map = weights.draw(
        st.dictionaries(st.sampled_from(sorted(legs) or ["x"]), st.sampled_from([0.5, 1.0, 1.7]))
    )
    weight_map = {k: v for k, v in weight_map.items() if k in legs}
    merged = merge(legs, weight_map)

    # Deterministic whatever the order of the legs.
    names = list(legs)
    random.Random(seed).shuffle(names)
    assert merge({name: legs[name] for name in names}, weight_map) == merged

    # No result lost: every http(s) item is one entry of exactly one result's sources.
    given_items = Counter(
        (name, rank)
        for name, items in legs.items()
        for rank, item in enumerate(items, start=1)
        if merge_key(item["url"]) is not None
    )
    found = Counter((s["source"], s["rank"]) for r in merged for s in r["sources"])
    assert found == given_items
    # Sources are the union of the legs that gave something.
    assert {s["source"] for r in merged for s in r["sources"]} == {n for n, _ in given_items}

    keys = [r["ranking"]["canonical_url"] for r in merged]
    assert len(keys) == len(set(keys))
    order = [(-r["ranking"]["corroboration"], -r["ranking"]["score"]) for r in merged]
    assert order == sorted(order)
    for position, result in enumerate(merged, start=1):
        ranking = result["ranking"]
        assert ranking["position"] == position
        assert ranking["corroboration"] == len({s["source"] for s in result["sources"]})
        assert ranking["best_rank"] == min(s["rank"] for s in result["sources"])
        assert abs(ranking["score"] - sum(ranking["contributions"].values())) < 1e-5
        # The result's url is one its sources gave for this very page.
        own = [s for s in result["sources"] if "matched" not in s]
        assert any("url" not in s for s in own)
        assert all(merge_key(s.get("url", result["url"])) == ranking["canonical_url"] for s in own)
    assert_schema_valid(merged)


# --- the worked example in docs/deep-search.md ("Worked example") ---------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "deep-search.md"
REDIRECT = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/"


def doc_example_legs() -> dict[str, list[dict[str, str]]]:
    """Brave's real payload (its first four results) for "httpx timeout", a web engine's list of
    some of the same pages in other forms, and Gemini's citations in their real shape."""
    return {
        "brave": brave_results()[:4],
        "duckduckgo": [
            {
                "title": "Timeouts - HTTPX",
                "url": "http://python-httpx.org/advanced/timeouts?utm_source=ddg",
                "snippet": "HTTPX is careful to enforce timeouts everywhere by default.",
            },
            {
                "title": "How to set a timeout for httpx AsyncClient?",
                "url": "https://www.stackoverflow.com/questions/00000001/"
                "how-to-set-a-timeout-for-httpx-asyncclient/#answers",
                "snippet": "Pass httpx.Timeout(10.0, connect=60.0) to the client.",
            },
            {
                "title": "Tuning HTTP client timeouts",
                "url": "https://docs.example.org/http-timeouts",
                "snippet": "Connect, read, write and pool timeouts explained.",
            },
        ],
        "gemini": [
            {"title": "python-httpx.org", "url": REDIRECT + "EXAMPLE-TOKEN-1"},
            {"title": "github.com", "url": REDIRECT + "EXAMPLE-TOKEN-2"},
        ],
    }


def test_docs_worked_example_is_what_merge_returns() -> None:
    text = DOCS.read_text()
    marker = "<!-- worked example: merge(doc_example_legs()) -->"
    assert marker in text
    before, after = text.split(marker, 1)
    legs_block = before.rsplit("```json", 1)[1].split("```", 1)[0]
    assert json.loads(legs_block) == doc_example_legs()
    output_block = after.split("```json", 1)[1].split("```", 1)[0]
    assert json.loads(output_block) == merge(doc_example_legs())
