"""Search filters (issue 15): each source's own parameters, what it cannot honour, the requests
build_request makes with them, and the argument schema's messages for them. No network."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_search import contract, errors
from smart_search.sources.engines import bing, duckduckgo, google
from smart_search.sources.providers import brave, gemini

NOW = datetime(2026, 3, 15, 12, 30, 45, 123456, tzinfo=UTC)
SOURCES = {
    "brave": brave,
    "gemini": gemini,
    "google": google,
    "bing": bing,
    "duckduckgo": duckduckgo,
}
KEY = "SENTINEL-KEY-filters-51c2"


# --- Brave --------------------------------------------------------------------------------------


def test_brave_maps_every_filter() -> None:
    params, unsupported = brave.filter_params(
        {"count": 15, "freshness": "week", "country": "de", "language": "de"}
    )
    assert params == {"count": "15", "freshness": "pw", "country": "DE", "search_lang": "de"}
    assert unsupported == []


@pytest.mark.parametrize(
    ("freshness", "code"), [("day", "pd"), ("week", "pw"), ("month", "pm"), ("year", "py")]
)
def test_brave_freshness_codes(freshness: str, code: str) -> None:
    assert brave.filter_params({"freshness": freshness}) == ({"freshness": code}, [])


@pytest.mark.parametrize(
    ("language", "country", "search_lang"),
    [
        ("ja", None, "jp"),  # Brave's own name for Japanese
        ("no", None, "nb"),
        ("en", None, "en"),
        ("en", "GB", "en-gb"),
        ("pt", None, "pt-pt"),
        ("pt", "br", "pt-br"),
        ("zh", None, "zh-hans"),
        ("zh", "TW", "zh-hant"),
        ("zh", "HK", "zh-hant"),
        ("fr", "CA", "fr"),
    ],
)
def test_brave_language_variants(language: str, country: str | None, search_lang: str) -> None:
    params, _ = brave.filter_params({"language": language, "country": country})
    assert params["search_lang"] == search_lang


def test_brave_reports_countries_and_languages_it_does_not_have() -> None:
    # Ireland is not in Brave's country list; Swahili not in its languages: sent, they are a 422.
    params, unsupported = brave.filter_params({"country": "IE", "language": "sw", "count": 3})
    assert params == {"count": "3"}
    assert unsupported == ["country", "language"]


# --- Gemini -------------------------------------------------------------------------------------


def test_gemini_freshness_is_a_time_range_on_the_search_tool() -> None:
    body, unsupported = gemini.filter_params({"freshness": "week"}, now=NOW)
    assert unsupported == []
    assert body == {
        "tools": [
            {
                "google_search": {
                    "timeRangeFilter": {
                        "startTime": "2026-03-08T12:30:45Z",
                        "endTime": "2026-03-15T12:30:45Z",
                    }
                }
            }
        ]
    }


@pytest.mark.parametrize(("freshness", "days"), [("day", 1), ("month", 30), ("year", 365)])
def test_gemini_time_range_lengths(freshness: str, days: int) -> None:
    body, _ = gemini.filter_params({"freshness": freshness}, now=NOW)
    window = body["tools"][0]["google_search"]["timeRangeFilter"]
    start = datetime.strptime(window["startTime"], "%Y-%m-%dT%H:%M:%SZ")
    end = datetime.strptime(window["endTime"], "%Y-%m-%dT%H:%M:%SZ")
    assert end - start == timedelta(days=days)


def test_gemini_country_and_language_become_one_instruction_and_count_is_unsupported() -> None:
    body, unsupported = gemini.filter_params({"count": 5, "country": "fr", "language": "fr"})
    assert unsupported == ["count"]
    assert "tools" not in body
    (part,) = body["system_instruction"]["parts"]
    assert "ISO 3166-1 code FR" in part["text"]
    assert "ISO 639-1 code fr" in part["text"]
    assert "answer in that language" in part["text"]


# --- Google -------------------------------------------------------------------------------------


def test_google_maps_every_filter() -> None:
    params, unsupported = google.filter_params(
        {"count": 8, "freshness": "month", "country": "DE", "language": "de"}
    )
    assert params == {"num": "8", "tbs": "qdr:m", "gl": "de", "hl": "de", "lr": "lang_de"}
    assert unsupported == []


@pytest.mark.parametrize(
    ("freshness", "tbs"), [("day", "qdr:d"), ("week", "qdr:w"), ("year", "qdr:y")]
)
def test_google_tbs(freshness: str, tbs: str) -> None:
    assert google.filter_params({"freshness": freshness}) == ({"tbs": tbs}, [])


def test_google_language_codes_that_differ_and_counts_past_one_page() -> None:
    assert google.filter_params({"language": "he"})[0] == {"hl": "iw", "lr": "lang_iw"}
    assert google.filter_params({"language": "zh", "country": "tw"})[0]["lr"] == "lang_zh-TW"
    assert google.filter_params({"language": "zh"})[0]["hl"] == "zh-CN"
    params, unsupported = google.filter_params({"count": 20})
    assert params == {"num": "20"} and unsupported == ["count"]


# --- Bing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("freshness", "value"),
    [("day", 'ex1:"ez1"'), ("week", 'ex1:"ez2"'), ("month", 'ex1:"ez3"')],
)
def test_bing_date_filters(freshness: str, value: str) -> None:
    assert bing.filter_params({"freshness": freshness}) == ({"filters": value}, [])


def test_bing_year_is_a_custom_range_in_days_since_1970() -> None:
    params, unsupported = bing.filter_params({"freshness": "year"}, now=NOW)
    today = (NOW.date() - date(1970, 1, 1)).days
    assert today == 20527
    assert params == {"filters": f'ex1:"ez5_{today - 365}_{today}"'} and unsupported == []


def test_bing_country_language_and_count() -> None:
    params, unsupported = bing.filter_params(
        {"count": 12, "country": "jp", "language": "ja", "freshness": "day"}
    )
    assert params == {"cc": "JP", "setlang": "ja", "filters": 'ex1:"ez1"'}
    assert unsupported == ["count"]
    assert bing.filter_params({"count": 10}) == ({}, [])
    assert bing.filter_params({"language": "zh", "country": "HK"})[0]["setlang"] == "zh-hant"


# --- DuckDuckGo ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "params", "unsupported"),
    [
        ({"freshness": "day"}, {"df": "d"}, []),
        ({"freshness": "year"}, {"df": "y"}, []),
        ({"country": "US"}, {"kl": "us-en"}, []),
        ({"country": "gb", "language": "en"}, {"kl": "uk-en"}, []),  # DuckDuckGo's "uk"
        ({"country": "US", "language": "es"}, {"kl": "ue-es"}, []),
        ({"country": "CH", "language": "it"}, {"kl": "ch-it"}, []),
        ({"country": "JP", "language": "ja"}, {"kl": "jp-jp"}, []),
        ({"country": "SI"}, {"kl": "sl-sl"}, []),
        # The country's default region, and the language it has no region for reported.
        ({"country": "CH", "language": "en"}, {"kl": "ch-de"}, ["language"]),
        # No language filter of its own: the search stays world-wide.
        ({"language": "de"}, {}, ["language"]),
        ({"country": "KE"}, {}, ["country"]),
        ({"count": 10}, {}, []),
        ({"count": 11}, {}, ["count"]),
    ],
)
def test_duckduckgo_mapping(
    filters: dict[str, Any], params: dict[str, str], unsupported: list[str]
) -> None:
    assert duckduckgo.filter_params(filters) == (params, unsupported)


def test_duckduckgo_regions_are_well_formed() -> None:
    for (country, language), kl in duckduckgo.REGIONS.items():
        assert len(country) == 2 and country.isupper()
        assert len(language) == 2 and language.islower()
        assert kl.count("-") == 1 and kl != duckduckgo.REGION


# --- every source -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SOURCES)
@pytest.mark.parametrize(
    "filters",
    [
        {"freshness": "hour"},
        {"country": "USA"},
        {"country": 7},
        {"language": ["en"]},
        {"count": 0},
        {"count": 21},
        {"count": True},
        {"freshness": {"d": 1}},
    ],
)
def test_values_a_source_cannot_use_are_reported_never_raised(
    name: str, filters: dict[str, Any]
) -> None:
    params, unsupported = SOURCES[name].filter_params(filters)
    assert unsupported == list(filters)
    assert params == {}


@pytest.mark.parametrize("name", SOURCES)
def test_no_filters_no_parameters(name: str) -> None:
    assert SOURCES[name].filter_params({}) == ({}, [])
    assert SOURCES[name].filter_params({"country": None, "other": "x"}) == ({}, [])


@given(
    filters=st.fixed_dictionaries(
        {},
        optional={
            "count": st.one_of(st.integers(-3, 25), st.none(), st.text(max_size=3)),
            "freshness": st.one_of(st.sampled_from(["day", "week", "month", "year"]), st.text()),
            "country": st.one_of(st.text(max_size=3), st.none()),
            "language": st.one_of(st.text(max_size=3), st.none()),
        },
    )
)
def test_every_filter_is_either_mapped_or_reported(filters: dict[str, Any]) -> None:
    """Whatever the values, no source raises, and a filter it reports is one that was given."""
    given_names = [name for name, value in filters.items() if value is not None]
    for module in SOURCES.values():
        params, unsupported = module.filter_params(filters)
        assert set(unsupported) <= set(given_names)
        assert all(isinstance(v, str) for v in params.values()) or module is gemini


# --- build_request with filters -----------------------------------------------------------------


@pytest.fixture
def settings(env: Any) -> Any:
    env.write_config(
        {
            "endpoints": {name: f"http://127.0.0.1:{9100 + i}" for i, name in enumerate(SOURCES)},
            "brave_count": 7,
        },
        env={"GEMINI_API_KEY": KEY, "BRAVE_API_KEY": KEY},
    )
    return env.settings()


def _as_data(request: Any) -> tuple:
    return (
        request.method,
        request.url,
        request.params,
        request.headers,
        request.json,
        request.cookies,
        request.follow_redirects,
    )


@pytest.mark.parametrize("name", SOURCES)
def test_without_filters_the_request_is_unchanged(name: str, settings: Any) -> None:
    module = SOURCES[name]
    plain = _as_data(module.build_request("james webb launch", settings))
    assert _as_data(module.build_request("james webb launch", settings, filters=None)) == plain
    assert _as_data(module.build_request("james webb launch", settings, filters={})) == plain


def test_brave_request_with_filters(settings: Any) -> None:
    request = brave.build_request(
        "james webb launch",
        settings,
        filters={"count": 3, "freshness": "day", "country": "us", "language": "en"},
    )
    assert request.params == {
        "q": "james webb launch",
        "count": "3",  # the call's count wins over brave_count (7)
        "freshness": "pd",
        "country": "US",
        "search_lang": "en",
    }
    assert request.headers["X-Subscription-Token"] == KEY
    assert KEY not in request.url and KEY not in str(request.params)


def test_gemini_request_with_filters(settings: Any) -> None:
    request = gemini.build_request(
        "james webb launch", settings, filters={"freshness": "month", "language": "de"}
    )
    body = request.json
    assert body["contents"] == [{"role": "user", "parts": [{"text": "james webb launch"}]}]
    window = body["tools"][0]["google_search"]["timeRangeFilter"]
    assert set(window) == {"startTime", "endTime"}
    end = datetime.strptime(window["endTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - end).total_seconds()) < 3600
    assert "ISO 639-1 code de" in body["system_instruction"]["parts"][0]["text"]
    assert KEY not in request.url and KEY not in str(body)


def test_google_request_with_filters(settings: Any) -> None:
    request = google.build_request(
        "caffeine", settings, filters={"freshness": "week", "country": "FR", "language": "fr"}
    )
    assert request.params["tbs"] == "qdr:w"
    assert (request.params["gl"], request.params["hl"], request.params["lr"]) == (
        "fr",
        "fr",
        "lang_fr",
    )
    assert request.params["gbv"] == "1" and request.params["q"] == "caffeine"


def test_bing_request_with_filters(settings: Any) -> None:
    request = bing.build_request(
        "javascript tutorial", settings, filters={"freshness": "day", "country": "de"}
    )
    assert request.params == {
        "q": "javascript tutorial",
        "setlang": "en",
        "cc": "DE",
        "form": "QBLH",
        "filters": 'ex1:"ez1"',
    }


def test_duckduckgo_request_with_filters(settings: Any) -> None:
    request = duckduckgo.build_request(
        "caffeine", settings, filters={"freshness": "month", "country": "de", "language": "de"}
    )
    assert request.params == {"q": "caffeine", "kl": "de-de", "df": "m"}


# --- the argument schema ------------------------------------------------------------------------

SEARCH = "smart_search.args.json"


def check_message(args: dict[str, Any]) -> tuple[str, str] | None:
    try:
        contract.check(SEARCH, {"query": "q", "agent_id": "a", **args})
    except errors.SearchError as err:
        return err.error_code, err.message
    return None


@pytest.mark.parametrize(
    "args",
    [
        {"mode": "first"},
        {"mode": "deep"},
        {"count": 1},
        {"count": 20},
        {"count": 5.0},  # JSON's 5.0 is the integer 5, for jsonschema too
        {"freshness": "year"},
        {"country": "US"},
        {"country": "de"},
        {"country": "Gb"},
        {"language": "en"},
        {"mode": None, "count": None, "freshness": None, "country": None, "language": None},
        {"mode": "deep", "count": 10, "freshness": "day", "country": "NZ", "language": "mi"},
    ],
)
def test_new_arguments_accepted(args: dict[str, Any]) -> None:
    assert check_message(args) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"mode": "fast"}, 'Invalid mode: "fast". Use "first" or "deep".'),
        ({"mode": 1}, 'Invalid mode: "1". Use "first" or "deep".'),
        ({"count": 0}, 'Invalid count: "0". Use an integer from 1 to 20.'),
        ({"count": 21}, 'Invalid count: "21". Use an integer from 1 to 20.'),
        ({"count": "5"}, 'Invalid count: "5". Use an integer from 1 to 20.'),
        ({"count": 2.5}, 'Invalid count: "2.5". Use an integer from 1 to 20.'),
        ({"count": True}, 'Invalid count: "true". Use an integer from 1 to 20.'),
        (
            {"freshness": "hour"},
            'Invalid freshness: "hour". Use "day", "week", "month" or "year".',
        ),
        (
            {"country": "USA"},
            'Invalid country: "USA". Use a two-letter ISO 3166-1 code such as "US".',
        ),
        (
            {"country": "us\n"},
            'Invalid country: "us\n". Use a two-letter ISO 3166-1 code such as "US".',
        ),
        ({"country": 1}, 'Invalid country: "1". Use a two-letter ISO 3166-1 code such as "US".'),
        (
            {"language": "EN"},
            'Invalid language: "EN". Use a two-letter lower-case ISO 639-1 code such as "en".',
        ),
        (
            {"language": "eng"},
            'Invalid language: "eng". Use a two-letter lower-case ISO 639-1 code such as "en".',
        ),
    ],
)
def test_new_argument_messages(args: dict[str, Any], message: str) -> None:
    assert check_message(args) == ("invalid_input", message)


def test_new_arguments_are_checked_in_schema_order_after_the_spec_ones() -> None:
    bad = {"force_provider": "x", "mode": "x", "count": 0, "freshness": "x", "language": "X"}
    assert check_message(bad)[1].startswith("Invalid force_provider")
    del bad["force_provider"]
    assert check_message(bad)[1].startswith("Invalid mode")
    del bad["mode"]
    assert check_message(bad)[1].startswith("Invalid count")
    del bad["count"]
    assert check_message(bad)[1].startswith("Invalid freshness")
    del bad["freshness"]
    assert check_message(bad)[1].startswith("Invalid language")


def test_unknown_argument_message_names_every_argument() -> None:
    code, message = check_message({"limit": 3})
    assert code == "invalid_input"
    assert message == (
        'Unknown argument: "limit". smart_search takes query, agent_id, force_provider, fresh, '
        "mode, count, freshness, country and language."
    )


# --- the warning ---------------------------------------------------------------------------------


def test_unsupported_filters_make_one_warning_sentence() -> None:
    from smart_search.sources.filters import unsupported_warning

    filters = {"language": "DE", "country": "ke", "count": 15}
    _, unsupported = duckduckgo.filter_params(filters)
    assert unsupported == ["count", "country", "language"]
    assert unsupported_warning("DuckDuckGo", unsupported, filters) == (
        'DuckDuckGo could not apply these filters: count "15", country "KE", language "de" '
        "(searched without them)."
    )
    _, unsupported = brave.filter_params({"country": "de"})
    assert unsupported_warning("Brave", unsupported, {"country": "de"}) is None
