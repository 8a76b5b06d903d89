"""Retry groups, their origins and replay safety, on captures built with mitmproxy's classes.

Origins that real clients produce here are also asserted on sample_captures (test_sample_retries.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from tests.analyzer.flows import error, exchange, from_process, result, rpc, sse, text_result, tool_call, write

WRITE_TOOL = {"name": "write_record", "annotations": {"readOnlyHint": False, "destructiveHint": True}}
READ_TOOL = {"name": "lookup", "annotations": {"readOnlyHint": True}}
TOOLS = result(0, {"tools": [WRITE_TOOL, READ_TOOL]})


AGENT = {"user-agent": "client/1"}


def session(name: str, **extra: str) -> dict[str, str]:
    return {"mcp-session-id": name, "user-agent": "client/1", **extra}


def run(tmp_path: Path, *flows: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    analysis = analyze([write(tmp_path, *flows)])
    records = analysis.calls
    return records, [g.record() for g in analysis.retry_groups]


def tools_list(at: float, scope: str = "A") -> Any:
    return exchange(rpc(0, "tools/list"), body=TOOLS, request_headers=session(scope), at=at)


def call(
    rpc_id: Any,
    tool: str,
    *,
    at: float,
    scope: str = "A",
    args: dict[str, Any] | None = None,
    ok: bool = False,
    **kw: Any,
) -> Any:
    """A tools/call; ``ok`` answers it with a result under its own id."""
    message = tool_call(rpc_id, tool)
    message["params"]["arguments"] = args or {"key": "k1"}
    headers = session(scope, **kw.pop("headers", {}))
    if ok:
        kw["body"] = result(rpc_id, text_result("done"))
    return exchange(message, request_headers=headers, at=at, **kw)


OK = {"ok": True}


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["call_id"]: r for r in records}


def app_starting_over(pid: int | None = None) -> list[Any]:
    """The application starts over 2 s after a 500 (the write may have run before it failed): the new session
    re-runs the lookup that came first, then the write; ``pid``: the recorder named the process that sent
    them all."""
    flows = [
        tools_list(100),
        call(1, "lookup", at=100.5, ok=True),
        call(2, "write_record", at=101, status=500, body=b"internal error", content_type="text/plain"),
        call(1, "lookup", at=103, scope="B", ok=True),
        call(2, "write_record", at=103.1, scope="B", ok=True),
    ]
    return from_process(pid, *flows) if pid is not None else flows


def test_app_retry_on_a_fresh_session_is_unsafe_for_a_write_tool(tmp_path: Path) -> None:
    records, groups = run(tmp_path, *app_starting_over(pid=4242))
    (group,) = groups
    # Medium, not high: one process may host several clients, and its next case may send the same request.
    assert (group["origin"], group["confidence"], group["attempts"]) == ("app-retry", "medium", 2)
    assert group["safety"] == "unsafe" and group["may_have_run_twice"] is True
    retry = by_id(records)[group["members"][1]]
    assert (retry["attempt"], retry["retry_origin"]) == (2, "app-retry")
    assert retry["flags"] == ["DUPLICATE_EXECUTION", "UNSAFE_RETRY"], "the 500 may have run it: now it ran again"
    assert any("destructiveHint" in e for e in retry["evidence"])
    assert by_id(records)[group["members"][0]]["attempt"] == 1


def test_without_a_recorded_process_a_new_session_2_s_later_may_be_the_next_run(tmp_path: Path) -> None:
    """The same wire with no process named: the new session began 2 s after the first went quiet, as long as a
    new process takes to start. The link stays (the chain shows what may have run twice), but low."""
    records, groups = run(tmp_path, *app_starting_over())
    (group,) = groups
    assert (group["origin"], group["confidence"], group["attempts"]) == ("app-retry", "low", 2)
    assert any("may be the application's next run" in e for e in group["evidence"])
    retry = by_id(records)[group["members"][1]]
    assert "may be the application's next run" in retry["client"]["joined"]
    assert retry["flags"] == ["DUPLICATE_EXECUTION", "UNSAFE_RETRY"], "the chain holds both executions"


def test_a_lone_write_on_a_fresh_session_is_a_duplicate_execution_not_a_linked_retry(tmp_path: Path) -> None:
    """Retry or the client's next case in the same process: the capture cannot tell, so no group; but the
    process that ran the write ran it again."""
    flows = [
        tools_list(100),
        call(1, "write_record", at=101, status=500, body=b"internal error", content_type="text/plain"),
        call(1, "write_record", at=103, scope="B", ok=True),
    ]
    records, groups = run(tmp_path, *from_process(4242, *flows))
    assert groups == []
    first, again = (r for r in records if r["method"] == "tools/call")
    assert again["flags"] == ["DUPLICATE_EXECUTION"] and again["retry_group"] is None
    assert any(f"not linked as a retry: {first['call_id']}" in e for e in again["evidence"])


def test_a_lone_write_of_what_may_be_the_next_run_is_said_not_counted(tmp_path: Path) -> None:
    """No process recorded, 2 s between the sessions: the same write again may be the next run's own."""
    records, groups = run(
        tmp_path,
        tools_list(100),
        call(1, "write_record", at=101, status=500, body=b"internal error", content_type="text/plain"),
        call(1, "write_record", at=103, scope="B", ok=True),
    )
    assert groups == []
    first, again = (r for r in records if r["method"] == "tools/call")
    assert again["flags"] == [] and again["retry_group"] is None
    assert any(f"before in {first['call_id']}" in e and "not counted as run twice" in e for e in again["evidence"])


def test_two_recorded_processes_are_two_clients_whatever_the_wire_says(tmp_path: Path) -> None:
    """Sequential runs of one script: identical calls, the second process 2 s after the first one's 503."""
    first = from_process(4242, tools_list(100), call(1, "write_record", at=101, status=503, body=b"x"))
    second = from_process(4343, call(1, "write_record", at=103, scope="B", ok=True), started_at=102.0)
    records, groups = run(tmp_path, *first, *second)
    assert groups == []
    tool_calls = [r for r in records if r["method"] == "tools/call"]
    assert [r["client"]["process"]["pid"] for r in tool_calls] == [4242, 4343]
    assert tool_calls[0]["client"]["lineage"] != tool_calls[1]["client"]["lineage"]
    assert all(r["flags"] == [] for r in tool_calls[1:])


def test_read_only_tool_may_be_retried(tmp_path: Path) -> None:
    records, groups = run(
        tmp_path,
        tools_list(100),
        call(1, "lookup", at=101, status=503, body=b"", content_type="text/plain"),
        call(2, "lookup", at=102, **OK),
    )
    (group,) = groups
    assert group["safety"] == "safe"
    assert not any("UNSAFE_RETRY" in r["flags"] for r in records)


def test_retry_after_a_429_is_not_unsafe_but_must_wait(tmp_path: Path) -> None:
    too_soon = run(
        tmp_path,
        call(1, "write_record", at=100, status=429, body=b"slow", response_headers={"retry-after": "5"}),
        call(2, "write_record", at=102, **OK),
    )
    records, (group,) = too_soon
    retry = by_id(records)[group["members"][1]]
    assert retry["flags"] == ["RETRY_AFTER_IGNORED"] and group["safety"] == "retry-after-ignored"
    assert any("Retry-After asked for 5 s" in e for e in retry["evidence"])
    patient = run(
        tmp_path,
        call(1, "write_record", at=200, status=429, body=b"slow", response_headers={"retry-after": "5"}),
        call(2, "write_record", at=206, **OK),
    )
    records, (group,) = patient
    assert all(not r["flags"] for r in records) and group["safety"] == "safe"


def test_auth_retry_resends_the_same_id_with_credentials(tmp_path: Path) -> None:
    _, (group,) = run(
        tmp_path,
        call(1, "lookup", at=100, status=401, body=b"", response_headers={"www-authenticate": "Bearer"}, duration=0.1),
        call(1, "lookup", at=100.3, headers={"authorization": "Bearer t"}, **OK),
    )
    assert (group["origin"], group["confidence"], group["safety"]) == ("auth-retry", "high", "safe")
    assert group["may_have_run_twice"] is False


def test_session_reinit_after_404(tmp_path: Path) -> None:
    _, (group,) = run(
        tmp_path,
        call(4, "lookup", at=100, status=404, body=b"session not found", content_type="text/plain"),
        exchange(
            rpc(1, "initialize", {"protocolVersion": "2025-11-25"}),
            body=result(1, {}),
            at=101,
            request_headers={"user-agent": "client/1"},
            response_headers={"mcp-session-id": "B"},
        ),
        call(2, "lookup", at=102, scope="B", **OK),
    )
    assert (group["origin"], group["confidence"]) == ("session-reinit", "high")


def test_proxy_copies(tmp_path: Path) -> None:
    _, (envoy,) = run(
        tmp_path,
        call(1, "lookup", at=100, status=503, body=b"", duration=0.1),
        call(1, "lookup", at=100.2, headers={"x-envoy-attempt-count": "2"}, **OK),
    )
    assert (envoy["origin"], envoy["confidence"]) == ("proxy", "high")
    _, (quick,) = run(
        tmp_path,
        call(1, "lookup", at=200, status=None, error_message="connection reset", duration=0.1),
        call(1, "lookup", at=200.2, **OK),
    )
    assert (quick["origin"], quick["confidence"]) == ("proxy", "medium")


def test_manual_and_agent_retries(tmp_path: Path) -> None:
    _, (late,) = run(
        tmp_path,
        call(1, "lookup", at=100, status=502, body=b""),
        call(2, "lookup", at=190, **OK),
    )
    assert (late["origin"], late["confidence"]) == ("manual", "low")
    # Another client (curl after the application) sending the same request is not a retry of it.
    _, others = run(
        tmp_path,
        call(1, "lookup", at=300, status=502, body=b""),
        call(2, "lookup", at=302, scope="B", headers={"user-agent": "curl/8"}, **OK),
    )
    assert others == []
    _, (agent,) = run(
        tmp_path,
        call(1, "lookup", at=400, body=result(1, text_result("no such key", isError=True))),
        call(2, "lookup", at=401, args={"key": "k2"}, **OK),
    )
    assert (agent["origin"], agent["confidence"]) == ("agent-retry", "medium")


def test_protocol_fallback_and_mrtr_are_linked_but_not_failures(tmp_path: Path) -> None:
    discover = rpc(1, "server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    first_round = tool_call(2, "ask")
    second_round = tool_call(3, "ask")
    second_round["params"]["inputResponses"] = {"name": {"action": "accept"}}
    agent = {"user-agent": "client/1"}
    _, groups = run(
        tmp_path,
        exchange(discover, status=400, body=error(1, -32601, "Method not found"), request_headers=agent, at=100,
                 duration=0.05),
        exchange(rpc(1, "initialize", {"protocolVersion": "2025-11-25"}), body=result(1, {}), request_headers=agent,
                 at=100.1),
        exchange(first_round, body=result(2, {"resultType": "input_required", "inputRequests": {}}),
                 request_headers=agent, at=101),
        exchange(second_round, body=result(3, text_result("hello")), request_headers=agent, at=102),
    )  # fmt: skip
    assert [(g["origin"], g["failure_retry"], g["safety"]) for g in groups] == [
        ("protocol-fallback", False, "not-a-failure-retry"),
        ("mrtr-round", False, "not-a-failure-retry"),
    ]


def test_transport_resume_and_planned_reconnect(tmp_path: Path) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    cut = {"ended": "upstream-error", "error": "peer closed", "event_times": None}
    answer = sse(result(1, text_result("done")), ids=True)
    records, (resumed,) = run(
        tmp_path,
        call(
            1,
            "lookup",
            at=100,
            body=sse(progress, ids=True),
            content_type="text/event-stream",
            error_message="peer closed",
            stream=cut,
        ),
        exchange(
            None,
            method="GET",
            body=answer,
            content_type="text/event-stream",
            at=101.6,
            request_headers=session("A", **{"last-event-id": "0"}),
        ),
    )
    assert (resumed["origin"], resumed["failure_retry"], resumed["attempts"]) == ("transport-resume", True, 1)
    assert records[0]["retry_origin"] == "transport-resume" and "UNSAFE_RETRY" not in records[0]["flags"]
    _, (planned,) = run(
        tmp_path,
        call(
            1,
            "lookup",
            at=200,
            body=b"id: 0\ndata:\nretry: 500\n\n",
            content_type="text/event-stream",
            stream={"ended": "complete", "error": None, "event_times": [200.1]},
        ),
        exchange(
            None,
            method="GET",
            body=answer,
            content_type="text/event-stream",
            at=200.6,
            request_headers=session("A", **{"last-event-id": "0"}),
        ),
    )
    assert planned["failure_retry"] is False and any("planned reconnect" in e for e in planned["evidence"])


def test_unrelated_calls_are_not_grouped(tmp_path: Path) -> None:
    """Same id in two sessions with other params; identical reads that succeed (polling)."""
    _, groups = run(
        tmp_path,
        call(1, "lookup", at=100, scope="A", args={"key": "a"}, status=503, body=b""),
        call(1, "lookup", at=101, scope="B", args={"key": "b"}, **OK),
        call(2, "lookup", at=200, scope="C", args={"key": "poll"}, **OK),
        call(3, "lookup", at=260, scope="C", args={"key": "poll"}, **OK),
        call(4, "lookup", at=320, scope="C", args={"key": "poll"}, **OK),
    )
    assert groups == []


def test_retry_decision_table_for_answers_that_did_arrive(tmp_path: Path) -> None:
    """Unchanged after -32602 fails again; after a malformed answer, do not replay (lookup is read-only)."""
    records, groups = run(
        tmp_path,
        tools_list(99),
        call(1, "write_record", at=100, body=error(1, -32602, "bad key")),
        call(2, "write_record", at=101, **OK),
        call(3, "lookup", at=200, body=b"{not json"),
        call(4, "lookup", at=201, **OK),
    )
    assert [g["safety"] for g in groups] == ["pointless", "do-not-replay"]
    assert any("it will fail again" in e for e in by_id(records)[groups[0]["members"][1]]["evidence"])
    assert not any(r["flags"] for r in records if r["method"] == "tools/call")


def test_fallback_from_streamable_http_to_the_2024_transport(tmp_path: Path) -> None:
    init = rpc(1, "initialize", {"protocolVersion": "2025-11-25"})
    stream = b"event: endpoint\ndata: /messages/?session_id=abc\n\n" + sse(result(1, {"protocolVersion": "2024-11-05"}))
    records, groups = run(
        tmp_path,
        exchange(init, status=405, body=b"", request_headers=AGENT, at=100, duration=0.05),
        exchange(
            None,
            method="GET",
            path="/sse",
            body=stream,
            content_type="text/event-stream",
            at=100.2,
            duration=5,
            request_headers=AGENT,
        ),
        exchange(init, path="/messages/?session_id=abc", status=202, body=b"", request_headers=AGENT, at=100.3),
    )
    (group,) = groups
    assert (group["origin"], group["failure_retry"]) == ("protocol-fallback", False)
    second = by_id(records)[group["members"][1]]
    assert second["scope"] == "sse-session:abc" and second["outcome"] == "SUCCESS"


def test_the_same_request_to_another_server_is_not_a_retry(tmp_path: Path) -> None:
    _, groups = run(
        tmp_path,
        call(1, "lookup", at=100, status=503, body=b""),
        call(1, "lookup", at=101, server="http://127.0.0.1:9000", **OK),
    )
    assert groups == []


def test_a_process_continues_its_own_session_though_an_unnamed_client_went_idle_too(tmp_path: Path) -> None:
    """The recorder named the process of sessions A and B but not of X (its lookup missed a short connection):
    B is A's process starting its job over after A's 500, and its write ran twice. X, idle too, must not make
    that ambiguous. Look-alike: with no process named, the two idle sessions leave B's client unknown."""

    def unnamed() -> list[Any]:  # X is busy when A begins (another client), and idle when B begins
        return [tools_list(99.5, scope="X"), call(1, "lookup", at=100.3, scope="X", ok=True)]

    def job() -> list[Any]:
        return [
            tools_list(100, scope="A"),
            call(1, "lookup", at=100.5, ok=True),
            call(2, "write_record", at=101, status=500, body=b"internal error", content_type="text/plain"),
            call(1, "lookup", at=101.5, scope="B", ok=True),
            call(2, "write_record", at=101.6, scope="B", ok=True),
        ]

    records, groups = run(tmp_path, *unnamed(), *from_process(4242, *job()))
    (group,) = groups
    assert (group["origin"], group["attempts"]) == ("app-retry", 2)
    again = by_id(records)[group["members"][1]]
    assert "same software and process (pid 4242)" in again["client"]["joined"]
    assert "DUPLICATE_EXECUTION" in again["flags"]
    (tmp_path / "plain").mkdir()
    records, _ = run(tmp_path / "plain", *unnamed(), *job())
    (again,) = [r for r in records if r["scope"] == "session:B" and r["tool"] == "write_record"]
    assert "2 idle clients of the same software: cannot tell which" in again["client"]["joined"]
    assert "DUPLICATE_EXECUTION" not in again["flags"]


def test_a_session_open_for_hours_keeps_what_it_sent_in_the_last_history() -> None:
    """Issue 23: a unit's tool calls are kept as far back as HISTORY (retries._Sent), counted from its first
    call all the same; what came before is not asked about."""
    from mcp_blackbox.analyzer.across.retries import HISTORY, _Sent
    from mcp_blackbox.analyzer.model.slim import RequestFacts

    sent = _Sent()
    places = [sent.add(RequestFacts(f"t{n % 7}", None, None, str(n), None), n * 10.0) for n in range(720)]  # 2 hours
    assert places == list(range(720)), "places count from the unit's first call"
    assert len(sent.facts) == HISTORY / 10 + 1 and sent.dropped == 720 - len(sent.facts)
    assert sent.before(719) == {(f"t{n % 7}", str(n)) for n in range(sent.dropped, 719)}
    assert sent.before(sent.dropped) == set(), "what came before the kept part is not asked about"
