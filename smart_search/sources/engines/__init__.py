"""Keyless web_fetch engines (spec 6): Google, Bing and DuckDuckGo results pages.

Each engine is one module with the same two pure functions, so the planner can treat them alike:

- `build_request(query, settings) -> HttpRequest` only builds the request (no I/O);
- `parse(body) -> list[dict]` only reads a page: a non-empty list of
  `{"title", "url", "snippet"}` (plain text, real target URLs; plus `sitelinks`, a list of
  `{"title", "url"}`, on a result the engine nests links under), or it raises `errors.Blocked`
  (CAPTCHA, consent wall, bot challenge, JavaScript shell), `errors.NoResults` (a genuine empty
  results page) or `errors.ParseError` (anything else). Never a success with junk (RULINGS 5).

`classify_status` turns a non-2xx answer into the same error tree before any parsing, and
`fetch_engine` runs the three steps (build, send, classify + parse) for the tier walker.
Engine requests follow redirects (consent and locale hops): a wall at the end of the chain is
recognised by `parse`, and an unfollowed redirect by `classify_status`.

Each engine module declares its `SOURCE` (sources/registry.py collects them). Beside them:
`request.py` (the browser GET every engine sends), `html.py` (the HTML toolkit and the one
outcome ladder `classify_page`) and `fetch.py` (`fetch_engine`, `classify_status`). This
package's own module holds nothing, so declaring the engines loads none of the walk, and lxml
loads only when a page is parsed.
"""

# Modules here that are not engines: the registry does not look for a SOURCE in them.
HELPERS = ("fetch", "html", "request")
