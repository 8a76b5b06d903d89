"""A small JSON Schema check for tool ``outputSchema``s.

Covers the keywords tool schemas use in practice (type, properties, required,
additionalProperties, items, enum, const). Unknown keywords pass: a false
OUTPUT_SCHEMA_VIOLATION would be worse than a missed one.
"""

from __future__ import annotations

import contextlib
from typing import Any

_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected = _TYPES.get(name)
    return True if expected is None else isinstance(value, expected)


def schema_problems(value: Any, schema: Any, path: str = "$", limit: int = 5) -> list[str]:
    """Where ``value`` breaks ``schema``; empty when it conforms."""
    problems: list[str] = []
    # Nested deeper than Python recurses: what was found so far, never a false alarm.
    with contextlib.suppress(RecursionError):
        _check(value, schema, path, problems, limit)
    return problems


def _check(value: Any, schema: Any, path: str, problems: list[str], limit: int) -> None:
    if len(problems) >= limit or not isinstance(schema, dict):
        return
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, n) for n in names if isinstance(n, str)):
            problems.append(f"{path}: expected {'/'.join(map(str, names))}, got {type(value).__name__}")
            return
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in enum")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: expected {schema['const']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required")
        for name in required if isinstance(required, list) else []:
            if isinstance(name, str) and name not in value:
                problems.append(f"{path}: missing required {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                _check(item, properties[name], f"{path}.{name}", problems, limit)
            elif extra is False:
                problems.append(f"{path}: unexpected property {name!r}")
            elif isinstance(extra, dict):
                _check(item, extra, f"{path}.{name}", problems, limit)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for position, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{position}]", problems, limit)
