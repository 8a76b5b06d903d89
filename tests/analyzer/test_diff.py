"""How ``diff`` matches calls and what it calls worse, on small captures built with mitmproxy's classes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mitmproxy.http import HTTPFlow

from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream, analyze
from mcp_blackbox.analyzer.review import diff_side
from mcp_blackbox.analyzer.review.diff import diff
from mcp_blackbox.analyzer.review.diff_side import SLIM_FIELDS, Side, nearest_rank
from tests.analyzer import test_retries as retries
from tests.analyzer.flows import error, exchange, result, rpc, text_result, write


def call(
    rpc_id: int, tool: str, *, ok: bool = True, duration: float = 0.05, port: int = 8000, **arguments: Any
) -> HTTPFlow:
    body = result(rpc_id, text_result("fine")) if ok else error(rpc_id, -32603, "internal")
    request = rpc(rpc_id, "tools/call", {"name": tool, "arguments": arguments})
    return exchange(request, body=body, duration=duration, server=f"http://127.0.0.1:{port}")


def side(tmp_path: Path, name: str, *flows: Any) -> Side:
    return Side.of(analyze([str(write(tmp_path, *flows, name=name))]))


def test_calls_with_other_arguments_are_not_matched(tmp_path: Path) -> None:
    before = side(tmp_path, "b.flows", call(1, "echo", ok=False, text="a"))
    # A look-alike: same tool, other arguments, succeeding. It must not pass for the fix of the failing call.
    after = side(tmp_path, "a.flows", call(1, "echo", text="b"), call(2, "echo", ok=False, text="a"))
    out = diff(before, after)
    assert out["fixed"] == [] and out["new_failures"] == []
    assert out["calls"]["matched"] == 1 and out["only_after"] == 1
    assert out["regressions"] == []


def test_order_pairs_repeated_calls_and_a_new_port_is_the_same_server(tmp_path: Path) -> None:
    before = side(tmp_path, "b.flows", call(1, "echo", text="x"), call(2, "echo", ok=False, text="x"))
    after = side(tmp_path, "a.flows", call(1, "echo", port=9001, text="x"), call(2, "echo", port=9001, text="x"))
    out = diff(before, after)
    assert out["calls"]["matched"] == 2
    (fixed,) = out["fixed"]
    assert (fixed["before"]["outcome"], fixed["after"]["outcome"]) == ("JSONRPC_ERROR", "TOOL_SUCCESS")
    assert fixed["before"]["call_id"] == list(before.requests_in_order())[1].call["call_id"]


def test_another_host_is_another_server(tmp_path: Path) -> None:
    before = side(tmp_path, "b.flows", call(1, "echo", text="x"))
    moved = exchange(rpc(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}}),
                     body=error(1, -32603, "internal"), server="http://10.0.0.7:8000")  # fmt: skip
    out = diff(before, side(tmp_path, "a.flows", moved))
    assert out["calls"]["matched"] == 0
    assert [f["after"]["outcome"] for f in out["new_failures"]] == ["JSONRPC_ERROR"]
    assert out["regressions"] == [
        f"new failure: {out['new_failures'][0]['after']['call_id']} tools/call echo JSONRPC_ERROR"
    ]


def test_a_tool_is_slower_only_with_enough_calls_on_both_sides(tmp_path: Path) -> None:
    fast = [call(n, "search", duration=0.05, q=n) for n in range(5)]
    slow = [call(n, "search", duration=0.5, q=n) for n in range(5)]
    out = diff(side(tmp_path, "b.flows", *fast), side(tmp_path, "a.flows", *slow))
    (row,) = out["latency"]
    assert row["slower"] and row["after"]["p95"] > 2 * row["before"]["p95"]
    assert any(line.startswith("slower: search") for line in out["regressions"])
    few = diff(side(tmp_path, "b4.flows", *fast[:4]), side(tmp_path, "a4.flows", *slow[:4]))
    assert not few["latency"][0]["slower"] and few["regressions"] == []
    assert (
        diff(side(tmp_path, "b.flows", *fast), side(tmp_path, "a.flows", *slow), latency_ratio=0)["regressions"] == []
    )


def test_percentile_is_a_measured_value(tmp_path: Path) -> None:
    assert nearest_rank(0, 50) is None
    assert nearest_rank(3, 50) == 1  # of [1, 2, 3]: 2
    assert nearest_rank(100, 95) == 94  # of 1..100: 95
    assert nearest_rank(2, 95) == 1  # of [1, 100]: 100
    durations = [0.3, 0.1, 0.2, 0.9, 0.5, 0.4, 0.7]
    timed = side(tmp_path, "t.flows", *(call(n, "search", duration=d, q=n) for n, d in enumerate(durations)))
    (count, p50, p95) = timed.latency()["search"]
    assert (count, p50, p95) == (7, 400.0, 900.0)  # measured values, not interpolations


def session_side(tmp_path: Path, name: str, *flows: Any) -> Side:
    return Side.of(analyze([str(write(tmp_path, retries.tools_list(99), *flows, name=name))]))


def test_a_request_that_recovered_after_a_retry_is_no_new_failure_but_needs_a_retry(tmp_path: Path) -> None:
    """Issue 22: chains compared as chains. Before, the write succeeded at once; after, it got a 500 and its
    retry succeeded: no new failure, but it now needs a retry (a regression); the other way round it is
    fixed. Look-alike: a write that got a 500 and nothing after it failed, and that is a new failure."""
    once = session_side(tmp_path, "once.flows", retries.call(1, "write_record", at=100, ok=True))
    retried = [
        retries.call(1, "write_record", at=100, status=500, body=b"boom", content_type="text/plain"),
        retries.call(2, "write_record", at=100.5, ok=True),
    ]
    recovered = session_side(tmp_path, "recovered.flows", *retried)
    (chain,) = [request.chain for request in recovered.requests_in_order() if request.chain]
    out = diff(once, recovered)
    assert out["new_failures"] == [] and out["calls"]["after"] == 3  # tools/list and two attempts
    assert out["calls"]["requests_after"] == out["calls"]["requests_before"] == 2  # tools/list and the write
    (needs,) = out["needs_retry"]
    assert (needs["before"]["state"], needs["after"]["state"], needs["after"]["attempts"]) == ("ok", "recovered", 2)
    assert needs["after"]["final_outcome"] == "TOOL_SUCCESS" and chain["attempts"] == 2
    assert any(line.startswith("now needs a retry: ") for line in out["regressions"])
    assert not any(line.startswith("new failure") for line in out["regressions"])

    back = diff(recovered, once)
    assert back["regressions"] == [] and [f["before"]["state"] for f in back["fixed"]] == ["recovered"]

    failed = session_side(
        tmp_path,
        "failed.flows",
        retries.call(1, "write_record", at=100, status=500, body=b"boom", content_type="text/plain"),
    )
    out = diff(once, failed)
    assert [f["after"]["state"] for f in out["new_failures"]] == ["failed"] and out["needs_retry"] == []


def test_a_side_read_from_the_stream_is_the_whole_analysis_side_and_keeps_a_few_fields() -> None:
    """Issue 23: diff reads each capture through the export's stream and keeps a few fields per call; the
    side, and so the diff, is the whole analysis's on every sample capture."""
    samples = sorted(Path(__file__).resolve().parents[2].joinpath("sample_captures").glob("*.flows"))
    for sample in samples:
        stream = CallStream([str(sample)], window=DEFAULT_WINDOW)
        streamed, whole = Side.of(stream), Side.of(analyze([str(sample)]))
        requests = list(streamed.requests_in_order())
        assert requests == list(whole.requests_in_order()), sample.name
        kept = ("calls", "failures", "requests", "retries", "twice")
        assert [getattr(streamed, name) for name in kept] == [getattr(whole, name) for name in kept], sample.name
        assert requests and all(list(request.call) == list(SLIM_FIELDS) for request in requests)
    first, second = (Side.of(CallStream([str(s)], window=DEFAULT_WINDOW)) for s in samples[:2])
    assert diff(first, second) == diff(*(Side.of(analyze([str(s)])) for s in samples[:2]))


def test_a_chain_longer_than_one_query_takes_is_read_in_slices(tmp_path: Path, monkeypatch: Any) -> None:
    """A chain's members are looked up a slice at a time (SQLite takes at most 32,766 values per
    statement; a retry storm's chain may hold more): one id per query gives the same side."""
    retried = [
        retries.call(1, "write_record", at=100, status=500, body=b"boom", content_type="text/plain"),
        retries.call(2, "write_record", at=100.5, status=500, body=b"boom", content_type="text/plain"),
        retries.call(3, "write_record", at=101, ok=True),
    ]
    capture = str(write(tmp_path, retries.tools_list(99), *retried, name="r.flows"))
    whole = Side.of(analyze([capture]))
    monkeypatch.setattr(diff_side, "IDS_PER_QUERY", 1)
    sliced = Side.of(analyze([capture]))
    (chain,) = [request.chain for request in sliced.requests_in_order() if request.chain]
    assert chain["attempts"] == 3 and sliced.requests == 2 and sliced.retries == whole.retries
    assert list(sliced.requests_in_order()) == list(whole.requests_in_order())


def test_text_with_a_lone_surrogate_is_kept_as_it_came(tmp_path: Path) -> None:
    """Captured text may hold a lone surrogate (a server that cut an emoji in half and sent "\\ud83d"), which
    sqlite3 refuses in a str: a side keeps its UTF-8 bytes, and the diff gives the text back unchanged."""
    cut = "quota exceeded \ud83d"
    failing = exchange(rpc(1, "tools/call", {"name": "e\ud800", "arguments": {}}), body=error(1, -32603, cut))
    passing = exchange(rpc(1, "tools/call", {"name": "e\ud800", "arguments": {}}), body=result(1, text_result()))
    out = diff(side(tmp_path, "b.flows", failing), side(tmp_path, "a.flows", passing))
    (fixed,) = out["fixed"]
    assert fixed["what"] == "tools/call e\ud800" and cut in fixed["before"]["reason"]
    assert out["calls"]["matched"] == 1
