"""One JSON tool call in, one JSON result out (RULINGS 1).

stdin bytes → parse → check against `schemas/` → settings → the tool → one line of JSON. Every
failure, from invalid UTF-8 to a bug, ends as a JSON object with `error` and `error_code`; nothing
else ever reaches stdout, and no traceback reaches stdout or stderr (an internal fault's traceback
goes to `<state_dir>/logs/internal-errors.log`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import orjson

from smart_search import contract
from smart_search.errors import INVALID_JSON, NESTED_TOO_DEEP, InvalidInput, SearchError

MAX_INPUT_BYTES = 16 * 1024 * 1024


def handle(raw: bytes, environ: Any = None, **options: Any) -> dict[str, Any]:
    """The whole contract as a function: request bytes → result object. Never raises."""
    try:
        if len(raw) > MAX_INPUT_BYTES:
            raise InvalidInput("Input exceeds the 16 MiB limit.")
        try:
            request = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            # Valid JSON nested deeper than orjson's 1024 levels is not "invalid JSON".
            message = NESTED_TOO_DEEP if "depth limit" in str(exc) else INVALID_JSON
            raise InvalidInput(message) from None
    except SearchError as err:
        return _error(None, err)
    return handle_request(request, environ, **options)


def handle_request(
    request: Any,
    environ: Any = None,
    *,
    settings_loader: Callable[[], Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """`handle` after parsing: a decoded request object → result object. Never raises.

    `settings_loader` replaces `load_settings(environ)`: the MCP server passes one that keeps the
    parsed config until the file changes. Everything else is the CLI's path, byte for byte.
    """
    holder: dict[str, Any] = {}
    result = _handle(request, environ, holder, settings_loader, options)
    settings = holder.get("settings")
    if settings is not None:
        # The last gate before stdout: no configured key leaves in any string of the result.
        from smart_search.text.scrub import scrub, settings_secrets

        result = scrub(result, settings_secrets(settings))
    return result


def _handle(
    request: Any,
    environ: Any,
    holder: dict[str, Any],
    settings_loader: Callable[[], Any] | None,
    options: dict[str, Any],
) -> dict[str, Any]:
    tool: str | None = None
    try:
        try:
            contract.check("request.json", request)
            tool = request["tool"]
            args = request.get("args", {})
            contract.check(f"{tool}.args.json", args)
        except RecursionError:
            raise InvalidInput(NESTED_TOO_DEEP) from None
        except InvalidInput as err:
            if tool == "smart_search" and err.field == "force_provider":
                raise _force_provider_error(err, environ, holder, settings_loader) from None
            raise
        from smart_search.search.tools import call_tool

        settings = _settings(environ, holder, settings_loader)
        return call_tool(tool, args, settings, **options)
    except SearchError as err:
        return _error(tool, err)
    except Exception as exc:  # noqa: BLE001 - the contract: never a traceback, always JSON
        _record_internal(exc, holder.get("settings"), environ)
        from smart_search.errors import InternalError

        return _error(tool, InternalError(f"Internal error: {exc.__class__.__name__}"))


def _settings(environ: Any, holder: dict[str, Any], loader: Callable[[], Any] | None) -> Any:
    if loader is None:
        from smart_search.host.config import load_settings

        settings = load_settings(os.environ if environ is None else environ)
    else:
        settings = loader()
    holder["settings"] = settings
    return settings


def _force_provider_error(
    err: InvalidInput, environ: Any, holder: dict[str, Any], loader: Callable[[], Any] | None
) -> InvalidInput:
    """A bad force_provider names the APIs the config has (it stays the spec's message, the
    input error, when the config cannot be read: a bad argument is reported before a bad
    config)."""
    try:
        settings = _settings(environ, holder, loader)
    except SearchError:
        return err
    from smart_search.search.planner import invalid_force_provider

    return invalid_force_provider(err, settings)


def _error(tool: str | None, err: SearchError) -> dict[str, Any]:
    from smart_search.search.tools import failure_result

    return failure_result(tool, err)


def _record_internal(exc: BaseException, settings: Any, environ: Any) -> None:
    """The traceback of an internal fault, scrubbed of every configured key, to the log."""
    try:
        import traceback

        from smart_search.logs.files import append_internal_error
        from smart_search.text.scrub import secret_values, settings_secrets

        if settings is None:
            from smart_search.host.config import configured_key_values, default_state_dir

            env = os.environ if environ is None else environ
            state_dir = default_state_dir(env)
            secrets = secret_values(configured_key_values(env))
        else:
            state_dir = settings.state_dir
            secrets = settings_secrets(settings)
        append_internal_error(state_dir, "".join(traceback.format_exception(exc)), secrets)
    except Exception:  # noqa: BLE001 - recording a fault must not cause another
        pass


def dumps(result: dict[str, Any]) -> bytes:
    return orjson.dumps(result, option=orjson.OPT_APPEND_NEWLINE)
