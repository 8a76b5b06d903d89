"""The windowed analysis (analysis.CallStream with a window) against the whole-capture one.

Where nothing spans more than the window, the two must agree on every call, retry group and duplicate
execution; and the windowed one must hold a window's calls, not the capture's, and write calls while
it still reads.
"""

from __future__ import annotations

import bisect
import io
import json
import random
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer.across.call_stream import NEAR
from mcp_blackbox.analyzer.across.retries import HISTORY, RETRY_WINDOW
from mcp_blackbox.analyzer.outputs.analysis import CallStream, analyze
from mcp_blackbox.analyzer.outputs.export import write_json
from mcp_blackbox.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import synthetic_capture

SAMPLES = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About an hour of four clients' traffic: sessions, retries after 503 and 429, cut and resumed
    streams, errors, isError, malformed answers, timeouts with cancels."""
    path = tmp_path_factory.mktemp("windowed") / "capture.flows"
    with path.open("wb") as fo:
        synthetic_capture.CaptureGenerator(6000, seed=11, clients=4).write(fo)
    return path


def exported(source: Any) -> dict[str, Any]:
    out = io.StringIO()
    write_json(source, out)
    return json.loads(out.getvalue())


def test_a_window_longer_than_every_flow_gives_the_whole_capture_answer(capture: Path) -> None:
    whole = exported(analyze([capture]))
    windowed = exported(CallStream([capture], window=300))
    assert whole["summary"]["calls"] > 5000
    # The capture spans many windows, and holds what the later stages link.
    assert whole["calls"][-1]["t_start"] - whole["calls"][0]["t_start"] > 4 * 300
    assert whole["retry_groups"] and whole["duplicate_executions"]
    assert any(c["retry_origin"] == "transport-resume" for c in whole["calls"])
    for section in whole:
        assert windowed[section] == whole[section], section


def test_a_windowed_analysis_holds_a_window_and_writes_while_it_reads(capture: Path) -> None:
    window = 5.0
    stream = CallStream([capture], window=window)
    held, read_at_first_call = 0, None
    for _ in stream:
        if read_at_first_call is None:
            read_at_first_call = stream.flows_read
        held = max(held, len(stream._waiting) + len(stream._complete) + len(stream._linked))
    assert read_at_first_call is not None and read_at_first_call < stream.flows_read / 2
    # A call is held from its start until final: 4 windows, the retry window and NEAR after it, plus the
    # round it waits for (an eighth of a window); a retried call also until its group's next attempt is
    # final, which starts at most a window and the retry window later (the groups of this capture have at
    # most one retry). No more than the calls that start within that long.
    starts = sorted(c["t_start"] for c in exported(analyze([capture]))["calls"])
    span = 5 * window + 2 * RETRY_WINDOW + NEAR + window / 8 + 1
    most = max(bisect.bisect_left(starts, t + span) - i for i, t in enumerate(starts))
    assert most < len(starts) / 2, "the capture must span more than what a call waits for"
    assert held <= most, (held, most)


def test_a_flow_open_longer_than_the_window_is_paired_late_not_lost(capture: Path) -> None:
    """The documented limit: a resumed stream that stays open longer than the window arrives after its
    call was judged. The call is still there, once, and so is every other."""
    whole = exported(analyze([capture]))
    narrow = exported(CallStream([capture], window=5))
    # Calls judged late are numbered late: the same calls, not in the same order.
    assert sorted(c["call_id"] for c in narrow["calls"]) == sorted(c["call_id"] for c in whole["calls"])
    by_id = {c["call_id"]: c["outcome"] for c in whole["calls"]}
    changed = [(by_id[c["call_id"]], c["outcome"]) for c in narrow["calls"] if by_id[c["call_id"]] != c["outcome"]]
    assert ("TOOL_SUCCESS", "STREAM_INCOMPLETE") in changed, "a 5 s window misses what resumed streams carry later"
    # Issue 22: the window's cut is said, on each call it judged early and in the notes; the whole analysis
    # (and the default window, test_export_writes_the_same_with_the_default_window_and_without) says nothing.
    window_line = "judged with 5 s of the capture read past it (--window)"
    cut = [c for c in narrow["calls"] if by_id[c["call_id"]] == "TOOL_SUCCESS" and c["outcome"] == "STREAM_INCOMPLETE"]
    assert cut and all(any(e.startswith(window_line) for e in c["evidence"]) for c in cut)
    assert not any(e.startswith("judged with") for c in whole["calls"] for e in c["evidence"])
    stream = CallStream([capture], window=5)
    for _ in stream:
        pass
    (note,) = [n for n in stream.notes if "judged before the capture was read to its end" in n]
    assert note.endswith("--window 0 reads the whole capture first")
    assert not any("judged before" in n for n in analyze([capture]).notes)


def test_export_writes_the_same_with_the_default_window_and_without(capture: Path, tmp_path: Path) -> None:
    default, whole = tmp_path / "default.json", tmp_path / "whole.json"
    assert main(["export", str(capture), "-o", str(default)]) == 0
    assert main(["export", str(capture), "--window", "0", "-o", str(whole)]) == 0
    assert json.loads(default.read_text()) == json.loads(whole.read_text())


def test_several_recordings_are_read_whole(tmp_path: Path) -> None:
    """Sample captures were recorded one after another, not in the order of their names: a window over
    them in that order would read older flows after newer ones."""
    narrow, whole = tmp_path / "narrow.json", tmp_path / "whole.json"
    assert main(["export", *SAMPLES, "--window", "1", "-o", str(narrow)]) == 0
    assert main(["export", *SAMPLES, "--window", "0", "-o", str(whole)]) == 0
    assert json.loads(narrow.read_text()) == json.loads(whole.read_text())
    assert json.loads(whole.read_text())["summary"]["calls"] > 50


def stretched(source: str, factor: float, start: float | None = None) -> list[Any]:
    """The capture's flows with every time stretched ``factor`` times from its first (moved to ``start``),
    the addon's stream record's included: longer flows, the same story."""
    from mitmproxy import io as flow_io

    with open(source, "rb") as fo:
        flows = list(flow_io.FlowReader(fo).stream())
    t0 = min(f.timestamp_created for f in flows)
    to = t0 if start is None else start

    def at(t: float) -> float:
        return to + (t - t0) * factor

    def scaled(obj: Any, *names: str) -> None:
        for name in names:
            if obj is not None and getattr(obj, name, None) is not None:
                setattr(obj, name, at(getattr(obj, name)))

    for f in flows:
        scaled(f, "timestamp_created")
        scaled(f.client_conn, "timestamp_start", "timestamp_tls_setup", "timestamp_end")
        scaled(f.server_conn, "timestamp_start", "timestamp_tcp_setup", "timestamp_tls_setup", "timestamp_end")
        scaled(f.request, "timestamp_start", "timestamp_end")
        scaled(f.response, "timestamp_start", "timestamp_end")
        scaled(f.error, "timestamp")
        stream = (f.metadata.get("mcp_blackbox") or {}).get("stream")
        if stream:
            for name in ("started", "end_time"):
                if stream.get(name) is not None:
                    stream[name] = at(stream[name])
            stream["event_times"] = [at(t) for t in stream.get("event_times") or []]
            stream["chunks"] = [[at(t), size] for t, size in stream.get("chunks") or []]
    return flows


def written(flows: list[Any], target: Path) -> Path:
    """The flows in one file as the recorder writes them: each when it ended."""
    from mitmproxy import io as flow_io

    def ended(f: Any) -> float:
        stream = (f.metadata.get("mcp_blackbox") or {}).get("stream") or {}
        ends = [f.error and f.error.timestamp, f.response and f.response.timestamp_end, stream.get("end_time")]
        return max((t for t in ends if t), default=f.request.timestamp_start)

    with target.open("wb") as fo:
        writer = flow_io.FlowWriter(fo)
        for f in sorted(flows, key=ended):
            writer.add(f)
    return target


def test_an_http_sse_session_is_awaited_past_the_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2024-11-05: every POST is answered on the session's event stream, which is written when the session
    ends. While other traffic goes on, a window shorter than the session waits for that stream, and pairs
    as the whole capture does."""
    legacy = stretched(next(p for p in SAMPLES if "legacy-sse" in p), 200.0)
    session_start = min(f.timestamp_created for f in legacy)
    # The client keeps the session open, idle, for 200 s more before it closes the stream.
    (stream,) = [f for f in legacy if f.request.method == "GET"]
    record = stream.metadata["mcp_blackbox"]["stream"]
    record["end_time"] += 200
    for obj, name in (
        (stream.response, "timestamp_end"),
        (stream.error, "timestamp"),
        (stream.client_conn, "timestamp_end"),
    ):
        if obj is not None and getattr(obj, name, None) is not None:
            setattr(obj, name, getattr(obj, name) + 200)
    # Stateless clients meanwhile and after: a 40 s run ten times, each flow under a new id.
    ids = random.Random(7)
    others = []
    for run in range(10):
        for f in stretched(next(p for p in SAMPLES if "2026-stateless" in p), 100.0, start=session_start + 45 * run):
            f.id = str(uuid.UUID(int=ids.getrandbits(128), version=4))
            others.append(f)
    capture = written(legacy + others, tmp_path / "legacy-and-others.flows")
    whole = exported(analyze([capture]))
    # Longer than a call takes here (the slowest tool answers on the stream 32 s after its POST), and
    # AWAIT_WINDOWS of it longer than the session (280 s); the other traffic goes on for 7 minutes.
    window = 50.0
    legacy_calls = [c for c in whole["calls"] if c["scope"].startswith("sse-session:")]
    assert len(legacy_calls) == 6
    assert {c["outcome"] for c in legacy_calls} == {"SUCCESS", "TOOL_SUCCESS", "ACCEPTED", "TOOL_ERROR"}
    assert max(c["t_start"] for c in whole["calls"]) - session_start > 2 * window + 280
    assert exported(CallStream([capture], window=window)) == whole
    # What the wait does: without it the POSTs are judged before their answers arrive.
    monkeypatch.setattr(CallStream, "_await", lambda self, exchange, extracted: None)
    unawaited = exported(CallStream([capture], window=window))
    assert any(c["outcome"] == "NO_RESPONSE" for c in unawaited["calls"] if c["scope"].startswith("sse-session:"))


def test_the_terminal_summary_reads_a_window_at_a_time(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_blackbox.analyzer.review.summary_text import summary_text

    whole = summary_text(analyze([capture]))
    assert "calls to look at:" in whole and "retry chains:" in whole
    assert summary_text(CallStream([capture], window=300)) == whole
    assert main(["summary", str(capture)]) == 0
    assert capsys.readouterr().out == whole + "\n"


def test_a_long_session_costs_what_its_last_minutes_sent(capture: Path) -> None:
    """Issue 23: what a client unit sent is kept to tell an application loop re-running the sequence that led
    to a failure (retries._History): as far back as HISTORY, and until the unit's last call is final. An
    hour of sessions holds the tool calls of about the last quarter hour, not the hour's."""
    window = 5.0
    stream = CallStream([capture], window=window)
    held = 0
    for _ in stream:
        held = max(held, sum(len(sent.facts) for sent in stream._retries.history._tool_calls.values()))
    calls = exported(analyze([capture]))["calls"]
    tools = sorted(c["t_start"] for c in calls if c["method"] == "tools/call")
    # At most the tool calls that start within HISTORY of each other, plus those still held since (a unit's
    # last call is final a retry window and a few windows after it starts).
    span = HISTORY + RETRY_WINDOW + 6 * window + NEAR
    most = max(bisect.bisect_left(tools, t + span) - i for i, t in enumerate(tools))
    assert most < len(tools) / 2, "the capture must span more than what a unit's history holds"
    assert 0 < held <= most, (held, most, len(tools))
