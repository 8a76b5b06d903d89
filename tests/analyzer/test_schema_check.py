"""Checking structuredContent against a tool's outputSchema: what breaks it, and what cannot be judged."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.calls.schema_check import (
    MAX_CHARS,
    MAX_PROBLEMS,
    SchemaCheck,
    _validator,
    check_structured_content,
)
from mcp_blackbox.analyzer.wire import stdio_capture as fmt
from tests.analyzer.flows import exchange, result, rpc, sse, text_result, tool_call, write
from tests.analyzer.test_stdio_load import Capture


class Item(BaseModel):
    id: int
    name: str
    tags: list[str] = []


class Page(BaseModel):
    items: list[Item]
    next_cursor: str | None = None


def page_schema() -> dict[str, Any]:
    """The output schema the Python MCP SDK publishes for a tool returning a ``Page``."""
    schema = Page.model_json_schema()
    assert "$defs" in schema and schema["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}
    return schema


PATTERNED = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "patternProperties": {"^x-": {"type": "integer"}},
    "additionalProperties": False,
}


def test_a_property_matched_by_pattern_properties_is_not_additional() -> None:
    assert check_structured_content({"name": "a", "x-count": 3}, PATTERNED) == SchemaCheck()


def test_pattern_properties_still_judge_their_values_and_the_additional_ones() -> None:
    check = check_structured_content({"name": "a", "x-count": "3", "other": 1}, PATTERNED)
    assert check.unchecked is None
    assert len(check.problems) == 2
    assert any(p.startswith("$['x-count']: '3' is not of type 'integer'") for p in check.problems)
    assert any(p.startswith("$: ") and "'other'" in p for p in check.problems)


def test_a_value_breaking_a_referenced_definition_is_reported() -> None:
    schema = {
        "$defs": {"Item": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["items"],
    }
    check = check_structured_content({"items": [{"id": "one"}, {}]}, schema)
    assert check.problems == (
        "$.items[0].id: 'one' is not of type 'integer'",
        "$.items[1]: 'id' is a required property",
    )
    assert check.unchecked is None
    assert check_structured_content({"items": [{"id": 1}]}, schema) == SchemaCheck()


def test_a_pydantic_generated_schema_with_defs_accepts_its_own_dump() -> None:
    page = Page(items=[Item(id=1, name="a", tags=["t"]), Item(id=2, name="b")], next_cursor=None)
    assert check_structured_content(page.model_dump(mode="json"), page_schema()) == SchemaCheck()


def test_a_pydantic_generated_schema_with_defs_rejects_a_broken_nested_item() -> None:
    value = {"items": [{"id": 1, "name": "a"}, {"id": 2, "name": 5}], "next_cursor": None}
    check = check_structured_content(value, page_schema())
    assert check.problems == ("$.items[1].name: 5 is not of type 'string'",)


@pytest.mark.parametrize(
    ("value", "schema"),
    [
        (True, {"enum": [1, 2]}),
        (1, {"enum": [True, False]}),
        (True, {"const": 1}),
        (1, {"const": True}),
        (False, {"const": 0}),
        (0, {"enum": [False]}),
    ],
)
def test_booleans_and_numbers_differ_in_enum_and_const(value: Any, schema: dict[str, Any]) -> None:
    check = check_structured_content(value, schema)
    assert len(check.problems) == 1 and check.unchecked is None


def test_booleans_and_numbers_still_match_themselves_in_enum_and_const() -> None:
    assert check_structured_content(True, {"enum": [True, 1]}) == SchemaCheck()
    assert check_structured_content(1, {"const": 1.0}) == SchemaCheck()


def test_a_remote_ref_is_unchecked_and_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("network access in a test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}}
    check = check_structured_content({"a": 1}, schema)
    assert check.problems == ()
    assert check.unchecked is not None and "https://example.com/x.json" in check.unchecked
    assert attempts == []


def test_a_remote_ref_the_value_never_reaches_does_not_stop_the_check() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}, "required": ["b"]}
    assert check_structured_content({"b": 1}, schema) == SchemaCheck()
    assert check_structured_content({}, schema).problems == ("$: 'b' is a required property",)


def test_the_dialect_named_by_dollar_schema_is_used_and_its_meta_schema_resolves_locally() -> None:
    # Draft 7 ignores keywords next to $ref; Draft 2020-12 applies them.
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "#/definitions/n", "maximum": 1}
    draft7["definitions"] = {"n": {"type": "integer"}}
    assert check_structured_content(5, draft7) == SchemaCheck()
    draft2020 = {**draft7, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    assert len(check_structured_content(5, draft2020).problems) == 1
    meta = {"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "http://json-schema.org/draft-07/schema#"}
    assert check_structured_content({"type": "object"}, meta) == SchemaCheck()


def test_formats_are_not_asserted() -> None:
    assert check_structured_content("not a date", {"type": "string", "format": "date-time"}) == SchemaCheck()


@pytest.mark.parametrize(
    "schema",
    [
        {"type": 12},
        {"type": "object", "required": 5},
        {"type": "string", "pattern": "("},
        {"$schema": ["not", "a", "uri"]},
        {"$ref": "#/$defs/Missing"},
    ],
)
def test_a_schema_that_cannot_be_judged_is_unchecked_not_violated(schema: dict[str, Any]) -> None:
    check = check_structured_content({"a": 1}, schema)
    assert check.problems == ()
    assert check.unchecked
    assert len(check.unchecked) <= MAX_CHARS


def test_an_invalid_schema_says_it_is_invalid() -> None:
    unchecked = check_structured_content({}, {"type": 12}).unchecked
    assert unchecked is not None and unchecked.startswith("the outputSchema is not a valid JSON Schema: $.type")


def nested(depth: int, inner: Any, wrap: Any) -> Any:
    for _ in range(depth):
        inner = wrap(inner)
    return inner


def test_deep_nesting_is_unchecked_without_raising() -> None:
    deep_value = nested(5000, [], lambda v: [v])
    assert check_structured_content(deep_value, {"type": "array", "items": {"$ref": "#"}}).unchecked
    deep_schema = nested(5000, {"type": "array"}, lambda s: {"items": s})
    assert check_structured_content([], deep_schema).unchecked
    looping = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    assert check_structured_content(1, looping).unchecked


def test_problems_are_limited_in_number_and_length() -> None:
    check = check_structured_content(list(range(50)), {"type": "array", "items": {"type": "string"}})
    assert len(check.problems) == MAX_PROBLEMS
    long = check_structured_content({"sum": "5" * 10_000}, {"properties": {"sum": {"type": "integer"}}})
    (problem,) = long.problems
    assert len(problem) <= MAX_CHARS
    assert problem.startswith("$.sum: '555") and problem.endswith("is not of type 'integer'")


def test_an_equal_schema_reuses_the_built_validator() -> None:
    first = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    reordered = json.loads('{"required": ["a"], "properties": {"a": {"type": "integer"}}, "type": "object"}')
    validator = _validator(first)
    assert not isinstance(validator, str)
    assert _validator(reordered) is validator
    assert _validator({**first, "required": []}) is not validator


def test_the_built_validator_does_not_follow_later_changes_to_the_callers_schema() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"b": {"type": "string"}}}
    assert check_structured_content({"b": "x"}, schema) == SchemaCheck()
    schema["properties"]["b"]["type"] = "integer"
    assert len(check_structured_content({"b": "x"}, schema).problems) == 1


def tool_calls(tmp_path: Path, schema: dict[str, Any], *structured: Any) -> list[dict[str, Any]]:
    tools = {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema}]}
    flows = [exchange(rpc(1, "tools/list"), body=result(1, tools))]
    for n, value in enumerate(structured, start=2):
        flows.append(exchange(tool_call(n, "t"), body=result(n, text_result(structuredContent=value))))
    return [c for c in analyze([write(tmp_path, *flows)]).calls if c["method"] == "tools/call"]


def test_analyzer_flags_a_nested_ref_violation_in_a_pydantic_schema(tmp_path: Path) -> None:
    good = {"items": [{"id": 1, "name": "a"}]}
    bad = {"items": [{"id": "1", "name": "a"}]}
    calls = tool_calls(tmp_path, page_schema(), good, bad)
    assert [c["flags"] for c in calls] == [[], ["OUTPUT_SCHEMA_VIOLATION"]]
    assert "$.items[0].id: '1' is not of type 'integer'" in calls[1]["evidence"][-1]


def test_analyzer_accepts_a_pattern_properties_result_without_extra_properties(tmp_path: Path) -> None:
    calls = tool_calls(tmp_path, PATTERNED, {"name": "a", "x-count": 3}, {"name": "a", "y": 1})
    assert [c["flags"] for c in calls] == [[], ["OUTPUT_SCHEMA_VIOLATION"]]


def test_analyzer_notes_an_unchecked_schema_without_a_flag(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a"}}}
    (call,) = tool_calls(tmp_path, schema, {"a": 1})
    assert call["outcome"] == "TOOL_SUCCESS" and call["flags"] == []
    note = "structuredContent not checked against the outputSchema: cannot resolve $ref 'https://example.com/a'"
    assert any(e.startswith(note) for e in call["evidence"])


# The answer's cut in the capture: a stdio line past the wrapper's line_limit is kept as its head, and the loader
# reads the result from it (analyzer/read/stdio_load.py). What the head lacks may be in what the client got.
NUMBERED = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
UNCHECKED_CUT = "structuredContent not checked against the outputSchema: the capture cut the answer"


def stdio_tool_call(tmp_path: Path, answer: bytes, length: int | None = None) -> dict[str, Any]:
    """tools/list (the tool's outputSchema), then one tools/call answered by ``answer`` (its first ``length``
    bytes kept, when given) on a stdio server."""
    tools = {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": NUMBERED}]}
    cap = Capture(tmp_path / "schema.stdio.jsonl")
    cap.line(fmt.STDIN, 0.0, rpc(1, "tools/list"))
    cap.line(fmt.STDOUT, 0.1, result(1, tools))
    cap.line(fmt.STDIN, 0.2, tool_call(2, "t"))
    cap.line(fmt.STDOUT, 0.3, answer, length=length)
    (call,) = [c for c in analyze([cap.write()]).calls if c["method"] == "tools/call"]
    return call


@pytest.mark.parametrize("after_head", [b"", b'"structuredContent":{"n":'], ids=["missing", "cut"])
def test_no_schema_verdict_on_an_answer_the_capture_cut(tmp_path: Path, after_head: bytes) -> None:
    """A 5 MB answer whose structuredContent lies past the kept head (missing from it, or cut in it): the client
    got it whole, so nothing says it breaks the schema; the evidence says why it was not checked."""
    head = b'{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"' + b"x" * 100 + b'"}],' + after_head
    call = stdio_tool_call(tmp_path, head, length=5_000_000)
    assert call["outcome"] == "TOOL_SUCCESS" and call["flags"] == ["TRUNCATED_IN_CAPTURE"], call
    assert call["evidence"][-1] == UNCHECKED_CUT, call["evidence"]


def test_a_whole_stdio_answer_without_structured_content_still_breaks_the_schema(tmp_path: Path) -> None:
    call = stdio_tool_call(tmp_path, json.dumps(result(2, text_result("x" * 100))).encode())
    assert call["flags"] == ["OUTPUT_SCHEMA_VIOLATION"], call
    assert call["evidence"][-1] == "structuredContent breaks the tool's outputSchema: no structuredContent"


def test_a_whole_answer_in_a_stream_the_recorder_cut_still_breaks_the_schema(tmp_path: Path) -> None:
    """The recorder keeps a long stream's head and tail, each cut at an event boundary: the answer, its last
    event, is kept whole, and judged as it is."""
    tools = {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": NUMBERED}]}
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 2, "progress": 1}}
    stream = {"ended": "complete", "error": None, "bytes": 9000, "stored_bytes": 1000, "dropped_bytes": 8000}
    flows = [
        exchange(rpc(1, "tools/list"), body=result(1, tools)),
        exchange(
            tool_call(2, "t"),
            body=sse(progress, progress, result(2, text_result())),
            content_type="text/event-stream",
            stream=stream,
        ),
    ]
    (call,) = [c for c in analyze([write(tmp_path, *flows)]).calls if c["method"] == "tools/call"]
    assert call["flags"] == ["OUTPUT_SCHEMA_VIOLATION", "TRUNCATED_IN_CAPTURE"], call
    assert "structuredContent breaks the tool's outputSchema: no structuredContent" in call["evidence"]
