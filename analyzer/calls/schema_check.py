"""Checking a tool result's ``structuredContent`` against the tool's ``outputSchema`` with ``jsonschema``.

The dialect is the one the schema's ``$schema`` names, Draft 2020-12 when it names none (the MCP default).
A schema that cannot be judged (invalid, a ``$ref`` that leads outside it, nested too deep, anything the
library raises) is reported as unchecked, never as a violation: a false OUTPUT_SCHEMA_VIOLATION is worse
than a missed one.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# jsonschema is imported where a schema is checked, not here: the recorder imports the classifier
# (analyzer.live) into mitmproxy, whose environment need not have jsonschema, and judges one exchange
# at a time with no tools/list in view, so it never checks a schema.

MAX_PROBLEMS = 5
MAX_CHARS = 200  # per problem or reason: messages quote the offending value, which may be large


@dataclass(frozen=True, slots=True)
class SchemaCheck:
    problems: tuple[str, ...] = ()  # where the value breaks the schema, at most MAX_PROBLEMS
    unchecked: str | None = None  # why the schema could not be judged (fully)


def check_structured_content(value: Any, schema: Any) -> SchemaCheck:
    """Judge ``value`` (a tools/call ``structuredContent``) against ``schema`` (the tool's ``outputSchema``)."""
    validator = _validator(schema)
    if isinstance(validator, str):
        return SchemaCheck(unchecked=validator)
    problems: list[str] = []
    try:
        # Errors come lazily: a large array with a broken item in every slot stops at the limit.
        for error in itertools.islice(validator.iter_errors(value), MAX_PROBLEMS):
            problems.append(_cut(f"{error.json_path}: {error.message}"))
    except Exception as err:
        # Problems found before the failure stand: each error jsonschema yields fails the whole schema.
        return SchemaCheck(tuple(problems), _reason(err))
    return SchemaCheck(tuple(problems))


def _validator(schema: Any) -> Validator | str:
    """The validator for ``schema``, shared by every equal schema; a string says why there is none."""
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except Exception as err:
        return _reason(err)
    return _build(key)


@lru_cache(maxsize=256)
def _build(key: str) -> Validator | str:
    # Built from the key, not the caller's object: the validator keeps its schema, which must not change later.
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for
    from referencing import Registry

    try:
        schema = json.loads(key)
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
        # An empty registry: jsonschema's default one fetches remote $refs over the network. The
        # meta-schemas still resolve: jsonschema adds its bundled ones to any registry it is given.
        return cls(schema, registry=Registry())
    except Exception as err:
        return _reason(err)


def _reason(err: BaseException) -> str:
    from jsonschema.exceptions import SchemaError
    from referencing.exceptions import Unresolvable

    if isinstance(err, SchemaError):
        return _cut(f"the outputSchema is not a valid JSON Schema: {err.json_path}: {err.message}")
    if isinstance(err, Unresolvable):
        ref = getattr(err, "ref", "?")
        return _cut(f"cannot resolve $ref {ref!r} (only references inside the schema are followed)")
    if isinstance(err, RecursionError):
        return "the outputSchema or structuredContent is nested deeper than Python recurses"
    return _cut(f"{type(err).__name__}: {err}")


def _cut(text: str) -> str:
    # The middle goes: messages start with the offending value and end with what the schema wanted.
    if len(text) <= MAX_CHARS:
        return text
    half = (MAX_CHARS - 3) // 2
    return f"{text[:half]} … {text[-half:]}"
