"""The synthetic capture behind the analyzer benchmark (tests/benchmarks/synthetic_capture.py).

It must read back completely with mitmproxy's reader, hold the mix its docstring claims (checked
against the file, not only against the generator's own counts), look like what the addon records,
and be the same bytes for the same seed.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import io as flow_io
from mitmproxy import tcp
from mitmproxy.http import HTTPFlow
from mitmproxy.io import tnetstring

from mcp_blackbox.analyzer.wire.sse_framing import split_sse
from tests.benchmarks import synthetic_capture

CALLS = 300
SEED = 11
KEY = synthetic_capture.METADATA_KEY


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, synthetic_capture.Stats, list[Any]]:
    path = tmp_path_factory.mktemp("synthetic") / "capture.flows"
    stats = synthetic_capture.generate(path, CALLS, SEED)
    with path.open("rb") as f:
        flows = list(flow_io.FlowReader(f).stream())
    return path, stats, flows


def http_flows(flows: list[Any]) -> list[HTTPFlow]:
    return [f for f in flows if isinstance(f, HTTPFlow)]


def body_json(raw: bytes | None) -> Any:
    try:
        return json.loads(raw or b"")
    except ValueError:
        return None


def session_of(flow: HTTPFlow) -> str | None:
    if "mcp-session-id" in flow.request.headers:
        return flow.request.headers["mcp-session-id"]
    if flow.response is not None and "mcp-session-id" in flow.response.headers:
        return flow.response.headers["mcp-session-id"]
    return None


def sse_messages(flow: HTTPFlow) -> list[Any]:
    assert flow.response is not None
    events, _ = split_sse(flow.response.raw_content or b"")
    return [body_json(e.data.encode()) for e in events if e.data]


def rpc_requests(flows: list[HTTPFlow]) -> list[tuple[HTTPFlow, dict[str, Any]]]:
    out = []
    for f in flows:
        message = body_json(f.request.raw_content) if f.request.method == "POST" else None
        if isinstance(message, dict) and "id" in message and "method" in message:
            out.append((f, message))
    return out


def test_reads_back_completely_in_format_21(capture):
    path, stats, flows = capture
    assert len(flows) == stats["flows"]
    with path.open("rb") as f:
        first = tnetstring.load(f)
    assert first["version"] == 21
    assert Counter(type(f).__name__ for f in flows) == {
        "HTTPFlow": stats["flows"] - stats["non_mcp_tcp"],
        "TCPFlow": stats["non_mcp_tcp"],
    }


def test_calls_counts_jsonrpc_requests_and_ids_restart_per_session(capture):
    _, stats, flows = capture
    requests = rpc_requests(http_flows(flows))
    assert len(requests) == CALLS == stats["requests"]
    by_session: dict[str | None, list[tuple[float, Any]]] = defaultdict(list)
    for f, message in requests:
        by_session[session_of(f)].append((f.request.timestamp_start, message))
    assert None not in by_session
    assert len(by_session) == stats["sessions"]
    for messages in by_session.values():
        messages.sort(key=lambda item: item[0])
        ids = [m["id"] for _, m in messages]
        assert messages[0][1]["method"] == "initialize"
        assert ids[0] in (0, 1)
        assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert stats["sessions_py"] and stats["sessions_ts"]
    assert sum(1 for m in by_session.values() if m[0][1]["id"] == 0) == stats["sessions_ts"]


def test_session_shape(capture):
    _, _, flows = capture
    flows_by_session: dict[str | None, list[HTTPFlow]] = defaultdict(list)
    for f in http_flows(flows):
        flows_by_session[session_of(f)].append(f)
    non_mcp = flows_by_session.pop(None)
    assert {f.request.path for f in non_mcp} == {"/favicon.ico", "/healthz"}
    for session_flows in flows_by_session.values():
        session_flows.sort(key=lambda f: f.request.timestamp_start)
        init, initialized, get = session_flows[:3]
        assert body_json(init.request.raw_content)["method"] == "initialize"
        assert init.response.headers["content-type"] == "text/event-stream"
        assert body_json(initialized.request.raw_content)["method"] == "notifications/initialized"
        assert initialized.response.status_code == 202
        assert get.request.method == "GET" and "last-event-id" not in get.request.headers
        assert get.metadata[KEY]["stream"]["ended"] in ("complete", "client-abort")
        assert session_flows[-1].request.method == "DELETE" and session_flows[-1].response.status_code == 200


def test_failure_mix_is_in_the_file(capture):
    _, stats, flows = capture
    web = http_flows(flows)
    statuses = Counter(f.response.status_code for f in web if f.response is not None)
    assert statuses[503] == stats["http_503"] >= 1 and statuses[502] == stats["http_502"] >= 1
    assert statuses[429] == stats["http_429"] >= 1
    assert all("retry-after" in f.response.headers for f in web if f.response and f.response.status_code == 429)
    no_response = [f for f in web if f.response is None]
    assert len(no_response) == stats["scenario_no_response"] >= 1
    assert all(f.error is not None and f.metadata[KEY]["failure"].startswith("NO_RESPONSE:") for f in no_response)

    answers = []
    for f in web:
        if f.response is None or f.response.status_code != 200:
            continue
        if f.response.headers.get("content-type") == "application/json" and f.response.raw_content:
            answers.append(body_json(f.response.raw_content))
        elif f.response.headers.get("content-type") == "text/event-stream":
            answers.extend(sse_messages(f))
    errors = [a for a in answers if isinstance(a, dict) and "error" in a]
    is_error = [a for a in answers if isinstance(a, dict) and (a.get("result") or {}).get("isError") is True]
    assert len(errors) == stats["scenario_jsonrpc_error"] >= 1
    assert len(is_error) == stats["scenario_tool_is_error"] >= 1
    assert answers.count(None) == stats["scenario_malformed_json"] >= 1


def test_retries_after_5xx_and_429_use_a_new_id_and_the_same_call(capture):
    _, stats, flows = capture
    requests = sorted(rpc_requests(http_flows(flows)), key=lambda item: item[0].request.timestamp_start)
    next_in_session: dict[str, list[tuple[HTTPFlow, dict[str, Any]]]] = defaultdict(list)
    for f, message in requests:
        next_in_session[session_of(f)].append((f, message))
    retried = 0
    for session in next_in_session.values():
        for (f, message), (retry_flow, retry) in itertools.pairwise(session):
            if f.response is None or f.response.status_code not in (502, 503, 429):
                continue
            retried += 1
            assert retry["id"] == message["id"] + 1
            assert retry["params"]["name"] == message["params"]["name"]
            assert retry["params"]["arguments"] == message["params"]["arguments"]
            assert retry_flow.response.status_code == 200
            if f.response.status_code in (502, 503):
                assert retry_flow.request.timestamp_start - f.response.timestamp_end >= 1.0
    assert retried == stats["retries"] == stats["http_502"] + stats["http_503"] + stats["http_429"]


def test_cut_streams_are_resumed_by_a_get_with_last_event_id(capture):
    _, stats, flows = capture
    web = http_flows(flows)
    cut = [
        f
        for f in web
        if f.request.method == "POST" and f.metadata.get(KEY, {}).get("stream", {}).get("ended") == "upstream-error"
    ]
    resumes = [f for f in web if f.request.method == "GET" and "last-event-id" in f.request.headers]
    assert len(cut) == len(resumes) == stats["cut_streams"] == stats["resume_gets"] >= 1
    resume_by_key = {(session_of(g), g.request.headers["last-event-id"]): g for g in resumes}
    for f in cut:
        assert f.error is not None and f.response is not None and f.response.timestamp_end is None
        assert f.metadata[KEY]["stream"]["error"] == f.error.msg
        # Cut after the priming event's id: resumable, so the addon says pending, not FAILED.
        assert f.metadata[KEY]["failure"] is None and "can be resumed" in f.metadata[KEY]["pending"]
        request_id = body_json(f.request.raw_content)["id"]
        events, _ = split_sse(f.response.raw_content)
        assert events[0].is_priming
        assert not any(isinstance(m, dict) and m.get("id") == request_id for m in sse_messages(f))
        resume = resume_by_key[(session_of(f), events[-1].id)]
        assert resume.request.timestamp_start > f.error.timestamp
        assert any(isinstance(m, dict) and m.get("id") == request_id and "result" in m for m in sse_messages(resume))


def test_stream_metadata_matches_the_bodies(capture):
    _, _, flows = capture
    streams = 0
    for f in http_flows(flows):
        if f.response is None or f.response.headers.get("content-type") != "text/event-stream":
            assert "stream" not in f.metadata.get(KEY, {})
            continue
        streams += 1
        stream = f.metadata[KEY]["stream"]
        body = f.response.raw_content or b""
        events, rest = split_sse(body)
        assert rest == len(body)
        assert stream["bytes"] == stream["stored_bytes"] == len(body) == sum(size for _, size in stream["chunks"])
        assert len(stream["event_times"]) == len(events)
        assert stream["event_times"] == sorted(stream["event_times"])
        assert stream["started"] <= (stream["event_times"] or [stream["end_time"]])[0] <= stream["end_time"]
        assert (stream["ended"] == "complete") == (f.error is None)
    assert streams


def test_non_mcp_flows_and_completion_order(capture):
    _, stats, flows = capture
    assert stats["non_mcp_favicon"] >= 1 and stats["non_mcp_health"] >= 1 and stats["non_mcp_tcp"] >= 1
    assert sum(isinstance(f, tcp.TCPFlow) for f in flows) == stats["non_mcp_tcp"]
    assert all(KEY not in f.metadata for f in http_flows(flows) if f.request.path != "/mcp")

    def completed(f: Any) -> float:
        if f.error is not None:
            return f.error.timestamp
        if isinstance(f, tcp.TCPFlow):
            return f.messages[-1].timestamp
        if f.response is not None and f.response.timestamp_end is not None:
            return f.response.timestamp_end
        return f.request.timestamp_end

    # mitmproxy writes a flow when it ends; the small slack covers the addon's end_time bookkeeping.
    times = [completed(f) for f in flows]
    assert all(later >= earlier - 0.2 for earlier, later in itertools.pairwise(times))


def test_mix_follows_the_documented_weights():
    with open(os.devnull, "wb") as sink:
        stats = synthetic_capture.CaptureGenerator(4000, seed=5).write(sink)
    slots = sum(stats[f"scenario_{name}"] for name, _ in synthetic_capture.SCENARIOS)
    for name, weight in synthetic_capture.SCENARIOS:
        share = stats[f"scenario_{name}"] / slots
        sigma = (weight / 100 * (1 - weight / 100) / slots) ** 0.5
        assert abs(share - weight / 100) < 4 * sigma + 0.002, (name, share, weight)
    assert stats["requests"] == 4000


def test_same_seed_same_bytes(tmp_path):
    first, second, other = tmp_path / "a.flows", tmp_path / "b.flows", tmp_path / "c.flows"
    synthetic_capture.generate(first, 200, seed=3)
    synthetic_capture.generate(second, 200, seed=3)
    synthetic_capture.generate(other, 200, seed=4)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()
