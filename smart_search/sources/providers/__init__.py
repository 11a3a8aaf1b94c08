"""The search APIs behind one call: build, send, parse, retry. Each provider is one module
here that declares its `SOURCE` (sources/registry.py collects them).

Each provider module only builds an `HttpRequest` and parses an `HttpResponse` into an `Answer`
or one of our `errors` classes; `call_provider` does the I/O through `http.send` under
`retry.run_with_retries`. Quota, the circuit breaker and logging belong to the planner: nothing
here touches them.
"""

# Modules here that are not providers: the registry does not look for a SOURCE in them.
HELPERS = ("calls", "parsing")
