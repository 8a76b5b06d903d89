"""The committed sample captures (sample_captures/*.flows) read completely and still show what they are for.

No processes run here: the files were recorded by sample_captures/record_samples.py and these
tests read them as the analyzer will, so a re-recording that no longer shows a scenario's key
fact (or a capture that mitmproxy cannot read) fails here. Facts are checked by content and
request start times, never by position in the file: mitmproxy writes a flow when it completes.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow

from mcp_blackbox.analyzer.wire.jsonrpc import parse_messages
from mcp_blackbox.analyzer.wire.sse_framing import SseEvent, split_sse

SAMPLES = Path(__file__).resolve().parents[1] / "sample_captures"
KEY = "mcp_blackbox"
ADDON_CAPTURES = [
    "py-2025-session-tools",
    "ts-2025-session-tools",
    "ts-2025-resume-after-cut",
    "py-2026-stateless",
    "py-2025-cut-2026-no-resume",
    "py-2024-legacy-sse",
    "py-app-retry-after-503",
    "ts-protocol-faults",
    "py-session-expired",
    "py-protocol-fallback",
    "py-auth-retry",
]
PLAIN_CAPTURES = ["plain-mitmdump-progress"]
ALL_CAPTURES = ADDON_CAPTURES + PLAIN_CAPTURES
STDIO_SAMPLE = "stdio-faults.stdio"  # sample_captures/record_stdio_sample.py
STDIO_CLIENT = ".client.json"
STREAM_ENDS = {"complete", "upstream-error", "client-abort", "proxy-shutdown", "killed"}
# 429, malformed_json, wrong_id, result_and_error, content_not_array (PROTOCOL_FAULTS in record_samples.py)
FAULTED_ARGUMENTS = [
    {"text": "rate limited"},
    {"text": "malformed"},
    {"text": "wrong id"},
    {"a": 20, "b": 22},
    {"a": 1, "b": 1},
]
SESSION_TOOLS = {"echo", "add", "tool_error", "protocol_error", "raise_error", "progress", "ask_name", "write_record"}


# ---------------------------------------------------------------- reading


@cache
def flows(name: str) -> tuple[HTTPFlow, ...]:
    """The capture's flows in request start order (the file holds them in completion order)."""
    with (SAMPLES / f"{name}.flows").open("rb") as f:
        read = list(flow_io.FlowReader(f).stream())
    assert all(isinstance(flow, HTTPFlow) for flow in read)
    return tuple(sorted(read, key=lambda flow: flow.request.timestamp_start))


def client_runs(name: str) -> list[dict[str, Any]]:
    return json.loads((SAMPLES / f"{name}.client.json").read_text())["runs"]


def request(flow: HTTPFlow) -> dict[str, Any]:
    messages = parse_messages(flow.request.raw_content or b"") or [{}]
    return messages[0]


def rpc_method(flow: HTTPFlow) -> str | None:
    return request(flow).get("method")


def tool(flow: HTTPFlow) -> str | None:
    message = request(flow)
    return message.get("params", {}).get("name") if message.get("method") == "tools/call" else None


def session(flow: HTTPFlow) -> str | None:
    if "mcp-session-id" in flow.request.headers:
        return flow.request.headers["mcp-session-id"]
    return flow.response.headers.get("mcp-session-id") if flow.response else None


def is_sse(flow: HTTPFlow) -> bool:
    return flow.response is not None and flow.response.headers.get("content-type", "").startswith("text/event-stream")


def events(flow: HTTPFlow) -> list[SseEvent]:
    assert flow.response is not None
    return split_sse(flow.response.raw_content or b"")[0]


def answers(flow: HTTPFlow) -> list[dict[str, Any]]:
    """The JSON-RPC messages of the response: the SSE events' data, or the JSON body."""
    if flow.response is None:
        return []
    if is_sse(flow):
        return [m for e in events(flow) if e.data for m in parse_messages(e.data) or []]
    return parse_messages(flow.response.raw_content or b"") or []


def progress_count(flow: HTTPFlow) -> int:
    return sum(m.get("method") == "notifications/progress" for m in answers(flow))


def result_text(message: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in message["result"]["content"])


def calls(name: str, tool_name: str) -> list[HTTPFlow]:
    return [f for f in flows(name) if tool(f) == tool_name]


def stream_meta(flow: HTTPFlow) -> dict[str, Any]:
    return flow.metadata[KEY]["stream"]


# ---------------------------------------------------------------- every capture


def test_the_directory_holds_exactly_the_scenarios() -> None:
    assert sorted(p.stem for p in SAMPLES.glob("*.flows")) == sorted(ALL_CAPTURES)
    flow_clients = [p for p in SAMPLES.glob("*.client.json") if not p.name.startswith(STDIO_SAMPLE)]
    assert sorted(p.name.removesuffix(".client.json") for p in flow_clients) == sorted(ALL_CAPTURES)
    assert sorted(p.name for p in SAMPLES.glob("*.stdio.*")) == [STDIO_SAMPLE + STDIO_CLIENT, STDIO_SAMPLE + ".jsonl"]


@pytest.mark.parametrize("name", ALL_CAPTURES)
def test_capture_reads_completely_and_is_small(name: str) -> None:
    path = SAMPLES / f"{name}.flows"
    assert path.stat().st_size < 200_000
    with path.open("rb") as f:
        reader = flow_io.FlowReader(f)
        count = sum(1 for _ in reader.stream())  # raises on a truncated or corrupt file
        assert f.read() == b""  # nothing left over after the last flow
    assert count == len(flows(name)) > 0
    assert all(flow.response is not None or flow.error is not None for flow in flows(name))


@pytest.mark.parametrize("name", ADDON_CAPTURES)
def test_addon_capture_has_metadata_on_every_mcp_flow(name: str) -> None:
    for flow in flows(name):  # every exchange in these captures is MCP
        record = flow.metadata.get(KEY)
        assert record is not None, f"{flow.request.method} {flow.request.path} has no {KEY} metadata"
        assert record["version"] == 1 and record["mcp"], record
        assert "failure" in record
        if is_sse(flow):
            stream = record["stream"]
            assert stream["ended"] in STREAM_ENDS
            assert stream["stored_bytes"] == len(flow.response.raw_content) == stream["bytes"]
            assert len(stream["event_times"]) == len(events(flow))
        else:
            assert "stream" not in record


@pytest.mark.parametrize("name", ALL_CAPTURES)
def test_client_json_is_there_and_names_its_sdk(name: str) -> None:
    runs = client_runs(name)
    assert runs and all(run["steps"] for run in runs)
    for run in runs:
        assert run["sdk_version"]
        assert run["client"] == ("python-mcp" if name.startswith("py-") else "typescript-sdk")


# ---------------------------------------------------------------- each scenario's key fact


@pytest.mark.parametrize("name", ["py-2025-session-tools", "ts-2025-session-tools"])
def test_2025_session_with_every_tool(name: str) -> None:
    captured = flows(name)
    assert rpc_method(captured[0]) == "initialize"
    assert {session(f) for f in captured} == {session(captured[0])} != {None}  # one session throughout
    assert {tool(f) for f in captured} - {None} == SESSION_TOOLS
    initialized = next(f for f in captured if rpc_method(f) == "notifications/initialized")
    assert initialized.response.status_code == 202
    assert any(f.request.method == "GET" and is_sse(f) for f in captured)  # the standalone stream
    # Elicitation, 2025 style: a server request on the tools/call stream, answered by a POST -> 202.
    [ask] = calls(name, "ask_name")
    elicit = next(m for m in answers(ask) if m.get("method") == "elicitation/create")
    answer = next(f for f in captured if request(f).get("id") == elicit["id"] and "result" in request(f))
    assert answer.response.status_code == 202 and request(answer)["result"]["action"] == "accept"
    assert result_text(answers(ask)[-1]) == "hello Ada"
    [progress] = calls(name, "progress")
    assert progress_count(progress) == 3
    assert events(progress)[0].is_priming  # resumable stream: priming event, ids on every event
    assert all(e.id for e in events(progress))
    [protocol_error] = calls(name, "protocol_error")
    assert answers(protocol_error)[-1]["error"]["code"] == -32602
    if name.startswith("py-"):
        assert [f.response.status_code for f in captured if f.request.method == "DELETE"] == [200]


def test_ts_resume_after_cut() -> None:
    name = "ts-2025-resume-after-cut"
    [post] = calls(name, "progress")  # the POST is never re-sent
    assert stream_meta(post)["ended"] == "upstream-error"
    assert progress_count(post) == 2
    last_id = events(post)[-1].id
    assert last_id
    resumed = [f for f in flows(name) if f.request.method == "GET" and "last-event-id" in f.request.headers]
    assert len(resumed) == 1
    [get] = resumed
    assert get.request.headers["last-event-id"] == last_id
    assert get.request.timestamp_start > stream_meta(post)["end_time"] + 0.9  # the SDK waits ~1 s
    assert get.response.status_code == 200
    final = [m for m in answers(get) if m.get("id") == request(post)["id"]]
    assert len(final) == 1 and result_text(final[0]) == "done 5"
    assert progress_count(get) == 3
    [run] = client_runs(name)
    assert [p["progress"] for p in run["steps"][0]["progress"]] == [1, 2, 3, 4, 5]


def test_py_2026_stateless_mrtr() -> None:
    name = "py-2026-stateless"
    captured = flows(name)
    assert rpc_method(captured[0]) == "server/discover"
    assert all(session(f) is None for f in captured)
    assert {f.request.headers.get("mcp-protocol-version") for f in captured} == {"2026-07-28"}
    first, retry = calls(name, "ask_name")
    assert answers(first)[0]["result"]["resultType"] == "input_required"
    assert request(first)["id"] != request(retry)["id"]
    assert "inputResponses" in request(retry)["params"]
    assert result_text(answers(retry)[0]) == "hello Ada"
    [progress] = calls(name, "progress")
    assert progress_count(progress) == 3 and not any(e.id for e in events(progress))


def test_py_2026_cut_is_not_resumed() -> None:
    name = "py-2025-cut-2026-no-resume"
    [progress] = calls(name, "progress")
    assert progress.request.headers["mcp-protocol-version"] == "2026-07-28"
    assert stream_meta(progress)["ended"] == "upstream-error"
    assert progress_count(progress) == 1
    assert not any(e.id for e in events(progress))  # nothing to resume from
    assert not any(f.request.method == "GET" for f in flows(name))
    assert not any(m.get("id") == request(progress)["id"] for f in flows(name) for m in answers(f))
    [run] = client_runs(name)
    assert run["steps"][0]["ok"] is False and run["steps"][1]["ok"] is True


def test_py_legacy_sse() -> None:
    name = "py-2024-legacy-sse"
    [stream] = [f for f in flows(name) if f.request.method == "GET"]
    assert stream.request.path == "/sse"
    assert stream.metadata[KEY]["mcp"] == "HTTP+SSE endpoint event"
    assert events(stream)[0].event == "endpoint"
    posts = [f for f in flows(name) if f.request.method == "POST"]
    assert posts and all(f.request.path.startswith("/messages/") and f.response.status_code == 202 for f in posts)
    answered = {m.get("id") for m in answers(stream) if "result" in m or "error" in m}
    assert {request(f).get("id") for f in posts if "id" in request(f)} <= answered
    assert progress_count(stream) == 3


def test_py_retry_after_503_on_a_fresh_session() -> None:
    name = "py-app-retry-after-503"
    failed, retried = calls(name, "write_record")
    assert failed.response.status_code == 503
    assert retried.response.status_code == 200
    assert result_text(answers(retried)[-1]).startswith("written order-1")
    assert session(failed) and session(retried) and session(failed) != session(retried)
    assert request(failed)["id"] == request(retried)["id"]  # a fresh session numbers its ids the same way
    assert len([f for f in flows(name) if rpc_method(f) == "initialize"]) == 2


def test_ts_protocol_faults() -> None:
    name = "ts-protocol-faults"
    captured = flows(name)
    assert len({session(f) for f in captured}) == 5
    by_arguments = {json.dumps(request(f)["params"]["arguments"], sort_keys=True): f for f in captured if tool(f)}
    faulted = [by_arguments[json.dumps(arguments, sort_keys=True)] for arguments in FAULTED_ARGUMENTS]
    rate_limited, malformed, wrong_id, both, not_array = faulted
    assert rate_limited.response.status_code == 429
    assert rate_limited.response.headers["retry-after"] == "2"
    assert rate_limited.metadata[KEY]["failure"] == "HTTP 429"
    data = [e.data for e in events(malformed) if e.data]
    assert len(data) == 1 and parse_messages(data[0]) is None  # the response event is not JSON
    assert [m["id"] for m in answers(wrong_id)] == [request(wrong_id)["id"] + 1000]
    [message] = answers(both)
    assert "result" in message and "error" in message
    assert answers(not_array)[0]["result"]["content"] == "not-an-array"
    # Each fault hit the first call of its session; the clean echo after it was answered.
    for flow in faulted:
        clean = next(f for f in calls(name, "echo") if session(f) == session(flow) and f is not flow)
        assert clean.request.timestamp_start > flow.request.timestamp_start
        assert result_text(answers(clean)[-1]).startswith("after ")


def test_py_session_expired_then_reinitialized() -> None:
    name = "py-session-expired"
    echoes = calls(name, "echo")
    expired = next(f for f in echoes if f.response.status_code == 404)
    assert expired.response.content == b"session not found"
    before = [f for f in echoes if session(f) == session(expired) and f is not expired]
    assert [f.response.status_code for f in before] == [200]
    later_init = [
        f
        for f in flows(name)
        if rpc_method(f) == "initialize" and f.request.timestamp_start > expired.request.timestamp_start
    ]
    assert len(later_init) == 1 and session(later_init[0]) != session(expired)
    after = [f for f in echoes if session(f) == session(later_init[0])]
    assert [f.response.status_code for f in after] == [200]
    resent, failed = (json.loads(f.request.content)["params"] for f in (after[0], expired))
    assert resent["arguments"] == failed["arguments"], "the failed request is sent again"


def test_py_protocol_fallback_after_refused_probe() -> None:
    name = "py-protocol-fallback"
    captured = flows(name)
    probe, init = captured[:2]
    assert rpc_method(probe) == "server/discover" and probe.request.method == "POST"
    assert probe.request.headers["mcp-protocol-version"] == "2026-07-28"
    assert probe.response.status_code == 400 and session(probe) is None
    [refusal] = answers(probe)
    assert refusal["error"]["code"] == -32601 and refusal["id"] == request(probe)["id"]
    # Version negotiation, not a retry: a different method under the next id, then a 2025 session.
    assert rpc_method(init) == "initialize" and request(init)["id"] != request(probe)["id"]
    assert init.response.status_code == 200
    assert [m["result"]["protocolVersion"] for m in answers(init) if "result" in m] == ["2025-11-25"]
    assert rpc_method(captured[2]) == "notifications/initialized" and captured[2].response.status_code == 202
    assert len({session(f) for f in captured[1:]}) == 1 and session(init)
    assert [rpc_method(f) for f in captured].count("server/discover") == 1
    [echo] = calls(name, "echo")
    assert session(echo) == session(init) and result_text(answers(echo)[-1]) == "after fallback"
    [run] = client_runs(name)
    assert run["protocol_version"] == "2025-11-25" and run["steps"][0]["ok"]


def test_py_auth_retry_resends_the_same_request_with_a_token() -> None:
    name = "py-auth-retry"
    captured = flows(name)
    refused, retried = captured[:2]
    assert rpc_method(refused) == "initialize"
    assert refused.response.status_code == 401
    assert refused.response.headers["www-authenticate"].startswith("Bearer")
    assert "authorization" not in refused.request.headers and session(refused) is None
    assert refused.metadata[KEY]["failure"] == "HTTP 401"
    # The identical message again (same JSON-RPC id, same bytes), now with the token.
    assert retried.request.raw_content == refused.request.raw_content
    assert request(retried)["id"] == request(refused)["id"]
    assert retried.request.headers["authorization"] == "Bearer s3cret"
    assert retried.response.status_code == 200 and session(retried)
    assert retried.request.timestamp_start - refused.response.timestamp_end < 1.0
    # Every later request carries the token from the start and succeeds: exactly one 401.
    assert all(f.request.headers.get("authorization") == "Bearer s3cret" for f in captured[1:])
    assert [f.response.status_code for f in captured].count(401) == 1
    assert all(f.response.status_code < 300 for f in captured[1:])
    assert [rpc_method(f) for f in captured if f.request.method == "POST"][3:] == ["tools/list", "tools/call"]
    [echo] = calls(name, "echo")
    assert result_text(answers(echo)[-1]) == "authorized"
    [run] = client_runs(name)
    assert [s["ok"] for s in run["steps"]] == [True, True]


def test_plain_mitmdump_has_no_metadata_and_buffered_sse() -> None:
    name = "plain-mitmdump-progress"
    assert not any(KEY in f.metadata for f in flows(name))
    [progress] = calls(name, "progress")
    assert progress_count(progress) == 5
    assert result_text(answers(progress)[-1]) == "done 5"
    # The client still got every progress event, but all at once when the buffered body was sent.
    [run] = client_runs(name)
    times = [p["t"] for p in run["steps"][0]["progress"]]
    assert len(times) == 5
    assert max(times) - min(times) < 0.1  # the server spaced them 100 ms apart


def test_stdio_sample() -> None:
    """The stdio sample (record --stdio around the TypeScript SDK server, the Python SDK client): read whole, and
    analyzed as what the client saw and what each tool does (tests/clients/ts/stdio_server.mjs)."""
    from mcp_blackbox.analyzer import analyze
    from mcp_blackbox.analyzer.wire import stdio_capture

    path = SAMPLES / (STDIO_SAMPLE + ".jsonl")
    assert path.stat().st_size < 200_000 and stdio_capture.is_stdio_capture(path)
    reading = stdio_capture.CaptureReading(str(path))
    records = list(stdio_capture.read_capture(path, reading))
    assert reading.problems == [] and records[-1]["type"] == stdio_capture.EXIT and records[-1]["code"] == 3
    [run] = json.loads((SAMPLES / (STDIO_SAMPLE + STDIO_CLIENT)).read_text())["runs"]
    steps = [s for s in run["output"]["steps"] if s["op"] == "call"]
    analysis = analyze([path])
    calls = [c for c in analysis.calls if c["method"] == "tools/call"]
    assert [c["tool"] for c in calls] == [s["tool"] for s in steps]
    for call, step in zip(calls, steps, strict=True):
        if step["tool"] == "log_to_stdout":  # answered, after a line on stdout that is not JSON
            assert step["ok"] and call["outcome"] == "MALFORMED_JSON"
        elif step["ok"]:
            assert call["outcome"] == "TOOL_SUCCESS", call
        else:
            assert step["tool"] == "crash" and call["outcome"] == "NO_RESPONSE"
    flagged = {c["tool"] for c in calls if "STDERR_DURING_CALL" in c["flags"]}
    assert flagged == {"swallow"}, "the swallowed exception, not chatty's info line"
    assert [c["tool"] for c in calls if c["stderr"]] == ["chatty", "swallow", "crash"]
    # The client probed server/discover, which the 2025 server refused, then initialized: negotiation, said
    # without HTTP.
    [group] = [g.record() for g in analysis.retry_groups]
    assert group["origin"] == "protocol-fallback" and "HTTP" not in " ".join(group["evidence"])
