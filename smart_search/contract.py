"""Checks tool arguments against `schemas/*.json`, the single source of truth for the contract.

jsonschema costs ~180 ms to import, more than a whole quota call, so the runner does not use it.
Instead this module interprets the small subset of JSON Schema 2020-12 the argument schemas use,
straight from the schema files, and reports the FIRST failure in the order the schema is written
(properties in the spec's parameter order, keywords in the order listed), with the message the
schema gives in its `x-errors` annotation. jsonschema ignores `x-` keywords, so the same files stay
standard; tests check that this interpreter and jsonschema agree on generated inputs, and that the
schemas use no keyword outside `SUPPORTED` (so they cannot drift apart silently).
"""

from __future__ import annotations

import os
import re
from typing import Any

import orjson

from smart_search.errors import InvalidInput, SearchError, UnknownTool

# Keywords the interpreter enforces; annotations (`description`, `title`, `$schema`, `$id`,
# `x-*`) carry no rule.
SUPPORTED = frozenset(
    {
        "type",
        "enum",
        "const",
        "not",
        "pattern",
        "minLength",
        "maxLength",
        "properties",
        "required",
        "additionalProperties",
        "anyOf",
        "$ref",
        "$defs",
    }
)
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "x-errors", "x-error-code"})
ERROR_CLASSES: dict[str, type[SearchError]] = {
    "invalid_input": InvalidInput,
    "unknown_tool": UnknownTool,
}

_MISSING = object()
_schemas: dict[str, dict[str, Any]] = {}
_patterns: dict[str, re.Pattern[str]] = {}


def schema_dir() -> str:
    """`schemas/` inside the installed package, else beside it in a source checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    inside = os.path.join(here, "schemas")
    return inside if os.path.isdir(inside) else os.path.join(os.path.dirname(here), "schemas")


def load_schema(file_name: str) -> dict[str, Any]:
    schema = _schemas.get(file_name)
    if schema is None:
        with open(os.path.join(schema_dir(), file_name), "rb") as fh:
            schema = _schemas[file_name] = orjson.loads(fh.read())
    return schema


def check(file_name: str, value: Any) -> None:
    """Raise the schema's error (InvalidInput, UnknownTool...) for the first rule `value` breaks."""
    failure = _first_failure(load_schema(file_name), value, file_name)
    if failure is not None:
        raise failure


def _first_failure(schema: dict[str, Any], value: Any, file_name: str) -> SearchError | None:
    try:
        _check(schema, value, file_name, name=None)
    except SearchError as err:
        return err
    return None


def resolve_ref(ref: str, file_name: str) -> tuple[dict[str, Any], str]:
    """The schema node a `$ref` in `file_name` points at, and the file it sits in."""
    target_file, _, pointer = ref.partition("#")
    target_file = target_file or file_name
    node: Any = load_schema(target_file)
    for part in pointer.strip("/").split("/") if pointer.strip("/") else []:
        node = node[part]
    return node, target_file




def _fail(schema: dict[str, Any], keyword: str, value: Any, name: str | None) -> SearchError:
    messages = schema.get("x-errors", {})
    template = messages.get(keyword)
    if template is None:
        # A rule with no message of its own still fails clearly rather than silently passing.
        where = f" {name}" if name else ""
        template = f"Invalid argument{where}: fails {keyword}."
    shown = value if isinstance(value, str) else _render(value)
    if len(shown) > 64:
        shown = shown[:64] + "…"
    message = template.replace("{value}", shown).replace("{name}", str(name))
    cls = ERROR_CLASSES[schema.get("x-error-code", "invalid_input")]
    err = cls(message)
    err.field, err.shown = name, shown
    return err


def _render(value: Any) -> str:
    """JSON text of a caller's value for a message; repr when orjson cannot (huge integers)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def _type_ok(expected: str | list[str], value: Any) -> bool:
    kinds = [expected] if isinstance(expected, str) else expected
    for kind in kinds:
        if kind == "string" and isinstance(value, str):
            return True
        if kind == "object" and isinstance(value, dict):
            return True
        if kind == "array" and isinstance(value, list):
            return True
        if kind == "null" and value is None:
            return True
        if kind == "boolean" and isinstance(value, bool):
            return True
        if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
            return True
    return False


def _search(pattern: str, value: str) -> bool:
    compiled = _patterns.get(pattern)
    if compiled is None:
        compiled = _patterns[pattern] = re.compile(pattern)
    # JSON Schema's `pattern` is an unanchored search, as jsonschema does it.
    return compiled.search(value) is not None


def _check(schema: dict[str, Any], value: Any, file_name: str, name: str | None) -> None:
    for keyword, rule in schema.items():
        if keyword == "$ref":
            target, target_file = resolve_ref(rule, file_name)
            _check(target, value, target_file, name)
        elif keyword == "type":
            if not _type_ok(rule, value):
                raise _fail(schema, keyword, value, name)
        elif keyword == "enum":
            if not any(_equal(value, option) for option in rule):
                raise _fail(schema, keyword, value, name)
        elif keyword == "const":
            if not _equal(value, rule):
                raise _fail(schema, keyword, value, name)
        elif keyword == "not":
            try:
                _check(rule, value, file_name, name)
            except SearchError:
                continue
            raise _fail(schema, keyword, value, name)
        elif keyword == "anyOf":
            last: SearchError | None = None
            for branch in rule:
                try:
                    _check(branch, value, file_name, name)
                    break
                except SearchError as err:
                    last = err
            else:
                assert last is not None
                raise last
        elif isinstance(value, str) and keyword in ("pattern", "minLength", "maxLength"):
            if keyword == "pattern":
                ok = _search(rule, value)
            elif keyword == "minLength":
                ok = len(value) >= rule
            else:
                ok = len(value) <= rule
            if not ok:
                raise _fail(schema, keyword, value, name)
        elif keyword == "properties" and isinstance(value, dict):
            _check_object(schema, value, file_name)
        elif keyword not in SUPPORTED and keyword not in ANNOTATIONS:
            raise ValueError(f"schema keyword {keyword!r} is not supported by contract.py")


def _check_object(schema: dict[str, Any], value: dict[str, Any], file_name: str) -> None:
    """Properties in schema order (missing ones as `required`), then unknown keys."""
    properties: dict[str, Any] = schema["properties"]
    required = schema.get("required", ())
    for prop, sub in properties.items():
        item = value.get(prop, _MISSING)
        if item is _MISSING:
            if prop in required:
                target, _ = resolve_ref(sub["$ref"], file_name) if "$ref" in sub else (sub, None)
                raise _fail(target, "required", None, prop)
            continue
        _check(sub, item, file_name, prop)
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in properties:
                raise _fail(schema, "additionalProperties", value[key], key)


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, and 1 equals 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b
