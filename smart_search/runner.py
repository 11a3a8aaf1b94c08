"""One JSON tool call in, one JSON result out (RULINGS §1).

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

from . import contract
from .errors import INVALID_JSON, InvalidInput, SearchError

MAX_INPUT_BYTES = 16 * 1024 * 1024


def handle(raw: bytes, environ: Any = None, **options: Any) -> dict[str, Any]:
    """The whole contract as a function: request bytes → result object. Never raises."""
    try:
        if len(raw) > MAX_INPUT_BYTES:
            raise InvalidInput("Input exceeds the 16 MiB limit.")
        try:
            request = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise InvalidInput(INVALID_JSON) from None
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
    tool: str | None = None
    settings = None
    try:
        contract.check("request.json", request)
        tool = request["tool"]
        args = request.get("args", {})
        contract.check(f"{tool}.args.json", args)
        from .tools import call_tool

        if settings_loader is None:
            from .config import load_settings

            settings = load_settings(os.environ if environ is None else environ)
        else:
            settings = settings_loader()
        return call_tool(tool, args, settings, **options)
    except SearchError as err:
        return _error(tool, err)
    except Exception as exc:  # noqa: BLE001 - the contract: never a traceback, always JSON
        _record_internal(exc, settings, environ)
        from .errors import InternalError

        return _error(tool, InternalError(f"Internal error: {exc.__class__.__name__}"))


def _error(tool: str | None, err: SearchError) -> dict[str, Any]:
    from .tools import failure_result

    return failure_result(tool, err)


def _record_internal(exc: BaseException, settings: Any, environ: Any) -> None:
    try:
        import time
        import traceback

        if settings is None:
            from .config import _state_dir

            settings_dir = _state_dir(os.environ if environ is None else environ, None)
        else:
            settings_dir = settings.state_dir
        directory = os.path.join(settings_dir, "logs")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        text = time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + "".join(
            traceback.format_exception(exc)
        )
        fd = os.open(
            os.path.join(directory, "internal-errors.log"),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT,
            0o600,
        )
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:  # noqa: BLE001 - recording a fault must not cause another
        pass


def dumps(result: dict[str, Any]) -> bytes:
    return orjson.dumps(result, option=orjson.OPT_APPEND_NEWLINE)
