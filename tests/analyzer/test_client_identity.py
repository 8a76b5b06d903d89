"""Who sent each call, and retries only by the same client: concurrency and look-alikes are not retries.

Each call carries a client identity (unit, lineage, address, User-Agent, clientInfo, protocol version).
Sessions alive at the same time are different clients; a client's next session joins its lineage only
where the capture can tell; a retry is the same lineage's, and changed arguments only in one session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write

UA = "python-httpx/0.28"


def headers(scope: str, agent: str = UA) -> dict[str, str]:
    return {"mcp-session-id": scope, "user-agent": agent}


def initialize(scope: str, at: float, client: str = "agent/1.0") -> Any:
    name, _, version = client.partition("/")
    params = {"protocolVersion": "2025-11-25", "clientInfo": {"name": name, "version": version}, "capabilities": {}}
    return exchange(rpc(0, "initialize", params), body=result(0, {"protocolVersion": "2025-11-25"}),
                    request_headers={"user-agent": UA}, response_headers={"mcp-session-id": scope}, at=at,
                    duration=0.01)  # fmt: skip


def lookup(rpc_id: int, scope: str, at: float, *, fail: bool = False, key: str = "k1", **kw: Any) -> Any:
    message = tool_call(rpc_id, "lookup")
    message["params"]["arguments"] = {"key": key}
    if fail:
        return exchange(message, status=503, body=b"busy", content_type="text/plain", request_headers=headers(scope),
                        at=at, duration=0.01, **kw)  # fmt: skip
    kw.setdefault("body", result(rpc_id, text_result("ok")))
    return exchange(message, request_headers=headers(scope), at=at, duration=0.01, **kw)


def analysis_of(tmp_path: Path, *flows: Any, name: str = "capture.flows") -> Any:
    return analyze([write(tmp_path, *flows, name=name)])


def test_every_call_names_its_client(tmp_path: Path) -> None:
    analysis = analysis_of(tmp_path, initialize("A", 100.0), lookup(1, "A", 100.1))
    init, call = analysis.calls
    assert call["client"] == init["client"]
    client = call["client"]
    assert (client["unit"], client["session"], client["user_agent"]) == ("session:A", "A", UA)
    assert client["client_info"] == "agent/1.0" and client["protocol_version"] == "2025-11-25"
    assert client["lineage"] == "k1" and client["address"].count(":") == 1


def test_thirty_concurrent_clients_with_identical_calls_are_not_each_others_retries(tmp_path: Path) -> None:
    """Thirty sessions call the same tool with the same arguments at once; ten get a 503 and re-send in their
    own session a second later. Ten retry groups, each inside one session; nothing links two clients."""
    flows = []
    for n in range(30):
        scope = f"S{n}"
        flows.append(initialize(scope, 100.0 + n * 0.001))
        flows.append(lookup(1, scope, 100.5 + n * 0.001, fail=n % 3 == 0))
        if n % 3 == 0:
            flows.append(lookup(2, scope, 101.5 + n * 0.001))
    analysis = analysis_of(tmp_path, *flows)
    calls = {c["call_id"]: c for c in analysis.calls}
    lineages = {c["client"]["lineage"] for c in analysis.calls}
    assert len(lineages) == 30, "sessions alive at the same time are different clients"
    groups = [g.record() for g in analysis.retry_groups]
    assert len(groups) == 10
    for group in groups:
        first, second = (calls[m] for m in group["members"])
        assert first["scope"] == second["scope"] and group["origin"] == "app-retry"
        assert group["confidence"] == "high", "same session, new id, after a visible 503"


def test_a_new_agent_run_is_not_an_agent_retry_of_the_last_runs_failure(tmp_path: Path) -> None:
    """Run 1 ends with an isError; run 2 (a fresh session, other arguments) calls the same tool."""
    analysis = analysis_of(
        tmp_path,
        initialize("A", 100.0),
        lookup(1, "A", 100.1, body=result(1, text_result("no such key", isError=True))),
        initialize("B", 101.0),
        lookup(1, "B", 101.1, key="k2"),
    )  # fmt: skip
    assert analysis.retry_groups == []
    a, b = (c for c in analysis.calls if c["method"] == "tools/call")
    assert a["client"]["lineage"] == b["client"]["lineage"], "the same client's next run"


def test_agent_retry_with_other_arguments_in_the_same_session(tmp_path: Path) -> None:
    analysis = analysis_of(
        tmp_path,
        initialize("A", 100.0),
        lookup(1, "A", 100.1, body=result(1, text_result("no such key", isError=True))),
        lookup(2, "A", 100.15, key="k2"),
    )  # fmt: skip
    (group,) = [g.record() for g in analysis.retry_groups]
    assert (group["origin"], group["confidence"]) == ("agent-retry", "medium")


def test_the_next_scenario_on_a_fresh_session_is_not_linked_but_noted(tmp_path: Path) -> None:
    """A test suite's next scenario sends the identical request 19 ms later on a fresh session: the capture
    cannot tell it from a retry, so it is not linked; the call says why."""
    analysis = analysis_of(
        tmp_path, initialize("A", 100.0), lookup(1, "A", 100.1, fail=True), initialize("B", 100.13),
        lookup(1, "B", 100.15),
    )  # fmt: skip
    assert analysis.retry_groups == []
    failed, again = [c for c in analysis.calls if c["method"] == "tools/call"]
    assert failed["client"]["lineage"] == again["client"]["lineage"]
    assert any(f"not linked as a retry: {failed['call_id']}" in line for line in again["evidence"])


def test_an_application_that_starts_over_on_a_fresh_session_retries(tmp_path: Path) -> None:
    """The new session first re-runs the call that came before the failed one: a loop starting over."""
    analysis = analysis_of(
        tmp_path, initialize("A", 100.0), lookup(1, "A", 100.1, key="k0"), lookup(2, "A", 100.2, fail=True),
        initialize("B", 100.3), lookup(1, "B", 100.4, key="k0"), lookup(2, "B", 100.5),
    )  # fmt: skip
    (group,) = [g.record() for g in analysis.retry_groups]
    assert (group["origin"], group["confidence"]) == ("app-retry", "medium")
    assert any("re-ran the calls before the failed one" in line for line in group["evidence"])
    failed, retried = (c for c in analysis.calls if c["retry_group"] == group["retry_group"])
    assert (failed["scope"], retried["scope"]) == ("session:A", "session:B")


def test_a_rerun_of_other_calls_is_no_evidence(tmp_path: Path) -> None:
    """The new session's earlier call is not one the failed session made: not a sequence starting over."""
    analysis = analysis_of(
        tmp_path, initialize("A", 100.0), lookup(1, "A", 100.1, key="k0"), lookup(2, "A", 100.2, fail=True),
        initialize("B", 100.3), lookup(1, "B", 100.4, key="other"), lookup(2, "B", 100.5),
    )  # fmt: skip
    assert analysis.retry_groups == []


def test_identical_calls_in_two_captures_are_not_one_retry(tmp_path: Path) -> None:
    first = write(tmp_path, initialize("A", 100.0), lookup(1, "A", 100.1, fail=True), name="one.flows")
    second = write(tmp_path, initialize("B", 123.0), lookup(1, "B", 123.1), name="two.flows")
    analysis = analyze([first, second])
    assert analysis.retry_groups == []
    lineages = {c["source"]: c["client"]["lineage"] for c in analysis.calls}
    assert len(set(lineages.values())) == 2


def test_a_client_that_cannot_be_told_from_another_starts_its_own_lineage(tmp_path: Path) -> None:
    """Two clients of the same software end their sessions; a third session begins: whose is it?"""
    analysis = analysis_of(
        tmp_path, initialize("A", 100.0), initialize("B", 100.001), lookup(1, "A", 100.1, fail=True),
        lookup(1, "B", 100.1), initialize("C", 101.0), lookup(1, "C", 101.1),
    )  # fmt: skip
    by_scope = {c["scope"]: c["client"] for c in analysis.calls}
    assert len({client["lineage"] for client in by_scope.values()}) == 3
    assert "cannot tell" in by_scope["session:C"]["joined"]
    assert analysis.retry_groups == []


def test_a_shared_connection_ties_sessions_to_one_client(tmp_path: Path) -> None:
    """Two sessions on one keep-alive connection are one client's, whatever else is idle."""
    one, two = initialize("A", 100.0), initialize("B", 101.0)
    two.client_conn = one.client_conn
    analysis = analysis_of(tmp_path, one, initialize("X", 100.005), two)  # X overlaps A: another client
    by_scope = {c["scope"]: c["client"] for c in analysis.calls}
    assert by_scope["session:A"]["lineage"] == by_scope["session:B"]["lineage"] != by_scope["session:X"]["lineage"]
    assert by_scope["session:B"]["joined"].startswith("same connection")


def test_client_identity_is_exported_as_json_in_csv(tmp_path: Path) -> None:
    import csv
    import io
    import json

    from mcp_blackbox.analyzer.outputs.export import write_csv

    analysis = analysis_of(tmp_path, initialize("A", 100.0))
    out = io.StringIO()
    write_csv(analysis, out)
    (row,) = csv.DictReader(io.StringIO(out.getvalue()))
    assert json.loads(row["client"])["unit"] == "session:A"


def test_sessions_alive_at_once_on_one_pooled_connection_are_different_clients(tmp_path: Path) -> None:
    """A gateway multiplexes two users over one upstream connection: A's 502, then B's identical call."""
    a_init, b_init = initialize("A", 100.0), initialize("B", 100.001)
    a_call, b_call = lookup(1, "A", 100.1, fail=True), lookup(1, "B", 100.2)
    for flow in (b_init, a_call, b_call):
        flow.client_conn = a_init.client_conn
    analysis = analysis_of(tmp_path, a_init, b_init, a_call, b_call)
    by_scope = {c["scope"]: c["client"]["lineage"] for c in analysis.calls}
    assert by_scope["session:A"] != by_scope["session:B"]
    assert analysis.retry_groups == []


def test_stateless_calls_on_pooled_connections_are_one_lineage_and_never_high(tmp_path: Path) -> None:
    """2026-07-28 without sessions: a 503 on one pooled connection, the same call on another."""
    message = tool_call(1, "lookup")
    headers = {"user-agent": UA}
    overlapping = [
        exchange(tool_call(9, "echo"), body=result(9, text_result()), request_headers=headers, at=100.0,
                 duration=1.0),
        exchange(tool_call(8, "echo"), body=result(8, text_result()), request_headers=headers, at=100.1,
                 duration=1.0),
    ]  # fmt: skip
    failed = exchange(message, status=503, body=b"busy", content_type="text/plain", request_headers=headers,
                      at=102.0, duration=0.01)  # fmt: skip
    again = exchange(message, body=result(1, text_result("ok")), request_headers=headers, at=103.0, duration=0.01)
    failed.client_conn, again.client_conn = overlapping[0].client_conn, overlapping[1].client_conn
    analysis = analysis_of(tmp_path, *overlapping, failed, again)
    assert len({c["client"]["lineage"] for c in analysis.calls}) == 1
    (group,) = [g.record() for g in analysis.retry_groups]
    assert (group["origin"], group["confidence"]) == ("app-retry", "medium")


def test_an_ambiguous_moment_does_not_leave_later_sessions_unlinked(tmp_path: Path) -> None:
    """Two clients were idle at once early on; ten minutes later one client fails and retries anew."""
    analysis = analysis_of(
        tmp_path, initialize("A", 100.0), initialize("B", 100.001), initialize("C", 101.0),
        initialize("D", 700.0), lookup(1, "D", 700.1, key="k0"), lookup(2, "D", 700.2, fail=True),
        initialize("E", 701.0), lookup(1, "E", 701.1, key="k0"), lookup(2, "E", 701.2),
    )  # fmt: skip
    by_scope = {c["scope"]: c["client"] for c in analysis.calls}
    assert "cannot tell" in by_scope["session:C"]["joined"]
    assert by_scope["session:D"]["lineage"] == by_scope["session:E"]["lineage"]
    (group,) = [g.record() for g in analysis.retry_groups]
    assert group["origin"] == "app-retry"


def test_look_alike_stateless_clients_that_start_together_are_not_each_others_retries(tmp_path: Path) -> None:
    """Three stateless bridges of one software on one host send the same request at once; the server refuses
    each with a 503 in turn, so each next one looks like the last one's retry (0.00 s later, a new connection).
    Each bridge then retries on its own connection: those are the retries, and the only ones (found by the
    truth corpus's mcp-remote family on a loaded machine)."""
    message = tool_call(2, "write_record")
    headers = {"user-agent": "node"}
    firsts = [
        exchange(message, status=503, body=b"busy", content_type="text/plain", request_headers=headers,
                 at=100.0 + 0.004 * n, duration=0.003)
        for n in range(3)
    ]  # fmt: skip
    again = [
        exchange(tool_call(3, "write_record"), body=result(3, text_result("ok")), request_headers=headers,
                 at=100.65 + 0.01 * n, duration=0.01)
        for n in range(3)
    ]  # fmt: skip
    for n, (first, retry) in enumerate(zip(firsts, again, strict=True)):
        retry.client_conn = first.client_conn
        first.client_conn.peername = ("127.0.0.1", 50000 + n)
    analysis = analysis_of(tmp_path, *firsts, *again)
    groups = [g.record() for g in analysis.retry_groups]
    by_flow = {c["call_id"]: c["exchanges"][0] for c in analysis.calls}
    pairs = sorted(tuple(by_flow[m] for m in g["members"]) for g in groups)
    assert pairs == sorted((f.id, a.id) for f, a in zip(firsts, again, strict=True)), groups
    assert {(g["origin"], g["confidence"]) for g in groups} == {("app-retry", "high")}
