"""Cross-call rules learned from ecosystem peers (tests/truth: pydantic-ai, mcp-remote, nginx, the TS SDK's OAuth).

Stateless 2026-07-28 clients of one software share a lineage; their own connections tell them apart. A gateway's
copy and the application's re-send are attempts of one request, each with its own origin. OAuth exchanges that
carry MCP headers are auth steps, and the same request re-sent under its id after a 401 is no reused id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write

MODERN = {"user-agent": "python-httpx2/2.16", "mcp-protocol-version": "2026-07-28"}
WRITE_TOOL = {"name": "write_record", "annotations": {"readOnlyHint": False}}


def lookup(rpc_id: int, at: float, *, fail: bool = False, text: str = "same", **kw: Any) -> Any:
    message = tool_call(rpc_id, "lookup")
    message["params"]["arguments"] = {"text": text}
    if fail:
        return exchange(message, status=503, body=b"busy", content_type="text/plain", request_headers=MODERN, at=at,
                        duration=0.001, **kw)  # fmt: skip
    body = result(rpc_id, text_result("ok"))
    return exchange(message, body=body, request_headers=MODERN, at=at, duration=0.001, **kw)


def discover(at: float) -> Any:
    return exchange(rpc(1, "server/discover", {}), body=result(1, {}), request_headers=MODERN, at=at, duration=0.001)


def on_connection(flows: list[Any]) -> list[Any]:
    for flow in flows[1:]:
        flow.client_conn = flows[0].client_conn
    return flows


def analysis_of(tmp_path: Path, *flows: Any) -> Any:
    return analyze([write(tmp_path, *flows)])


def test_stateless_clients_at_once_each_retry_only_their_own_call(tmp_path: Path) -> None:
    """Three clients (one connection each, same software) send the identical call at once; two get a 503 and
    re-send on their own connection. The third's success must not hide the others' failures, and nobody's
    first call is another's retry."""
    one = on_connection([discover(100.0), lookup(2, 100.100, fail=True), lookup(3, 100.600)])
    two = on_connection([discover(100.0), lookup(2, 100.101, fail=True), lookup(3, 100.601)])
    three = on_connection([discover(100.0), lookup(2, 100.1015)])
    analysis = analysis_of(tmp_path, *sorted([*one, *two, *three], key=lambda f: f.request.timestamp_start))
    calls = [c for c in analysis.calls if c["method"] == "tools/call"]
    assert len({c["client"]["lineage"] for c in calls}) == 1, "one software, one address: one lineage"
    groups = [g.record() for g in analysis.retry_groups]
    assert len(groups) == 2
    by_id = {c["call_id"]: c for c in calls}
    for group in groups:
        first, retry = (by_id[m] for m in group["members"])
        assert first["client"]["unit"] == retry["client"]["unit"], group
        assert (first["jsonrpc_id"], retry["jsonrpc_id"]) == (2, 3)


def test_a_new_run_on_its_own_connection_is_not_a_retry_of_the_last_runs_error(tmp_path: Path) -> None:
    """A new run of a stateless agent opens a connection with server/discover and sends, by chance, the call
    that failed in the previous run: a new request, noted but not linked."""
    first = on_connection([discover(100.0), lookup(2, 100.1, fail=True)])
    second = on_connection([discover(100.5), lookup(2, 100.6)])
    analysis = analysis_of(tmp_path, *first, *second)
    assert analysis.retry_groups == []
    failed, later = [c for c in analysis.calls if c["method"] == "tools/call"]
    assert any(f"not linked as a retry: {failed['call_id']}" in line for line in later["evidence"])


def test_a_pooled_client_re_sending_on_another_connection_is_still_its_retry(tmp_path: Path) -> None:
    """Mid-run (the connection did not begin with a negotiation) and alone: the pool's other connection."""
    first = on_connection([discover(100.0), lookup(2, 100.1, fail=True)])
    again = lookup(3, 101.1)
    analysis = analysis_of(tmp_path, *first, again)
    (group,) = [g.record() for g in analysis.retry_groups]
    assert (group["origin"], group["confidence"]) == ("app-retry", "medium")


def gateway_copy(message: dict[str, Any], *, at: float, server: str, status: int | None, **kw: Any) -> Any:
    headers = {**MODERN, "x-request-id": kw.pop("request_id")}
    if status is None:  # the gateway gave up on a slow upstream: no response
        return exchange(message, status=None, request_headers=headers, at=at, server=server, duration=1.0,
                        error_message="client disconnected")  # fmt: skip
    if status == 503:
        return exchange(message, status=503, body=b"busy", content_type="text/plain", request_headers=headers, at=at,
                        server=server, duration=0.001)  # fmt: skip
    body = result(message["id"], text_result("written"))
    return exchange(message, body=body, request_headers=headers, at=at, server=server, duration=0.001)


def test_a_gateways_copy_and_the_applications_re_send_each_keep_their_origin(tmp_path: Path) -> None:
    """Behind nginx: A answers 503, the gateway re-sends to B (503 too), the client gets the 503 and re-sends
    a second later under a new request id, which A serves."""
    message = tool_call(2, "lookup")
    a, b = "http://127.0.0.1:8001", "http://127.0.0.1:8002"
    flows = [
        gateway_copy(message, at=100.0, server=a, status=503, request_id="r1"),
        gateway_copy(message, at=100.01, server=b, status=503, request_id="r1"),
        gateway_copy(message, at=101.1, server=a, status=200, request_id="r2"),
    ]
    analysis = analysis_of(tmp_path, *flows)
    (group,) = [g.record() for g in analysis.retry_groups]
    origins = [(c["retry_origin"], c["retry_confidence"]) for c in analysis.calls if c["retry_group"]]
    assert origins == [(None, None), ("proxy", "high"), ("app-retry", "medium")]
    assert (group["origin"], group["confidence"]) == ("proxy", "medium"), "a chain is as sure as its weakest link"


def test_a_write_the_gateway_re_sent_to_a_replica_ran_twice(tmp_path: Path) -> None:
    """A was too slow: the gateway gave up and sent the write to B. Both are one service: it ran twice."""
    tools = exchange(rpc(1, "tools/list"), body=result(1, {"tools": [WRITE_TOOL]}), request_headers=MODERN, at=99.0)
    message = tool_call(2, "write_record")
    a, b = "http://127.0.0.1:8001", "http://127.0.0.1:8002"
    slow = gateway_copy(message, at=100.0, server=a, status=None, request_id="r1")
    copy = gateway_copy(message, at=101.01, server=b, status=200, request_id="r1")
    analysis = analysis_of(tmp_path, tools, slow, copy)
    copy_record = analysis.calls[-1]
    assert "DUPLICATE_EXECUTION" in copy_record["flags"]
    assert any("a replica behind the same gateway" in line for line in copy_record["evidence"])
    (tmp_path / "other").mkdir()
    unrelated = analysis_of(
        tmp_path / "other", tools, slow, gateway_copy(message, at=101.01, server=b, status=200, request_id="r9")
    )
    assert "DUPLICATE_EXECUTION" not in unrelated.calls[-1]["flags"], "two servers, no gateway between: two services"


def test_oauth_metadata_with_mcp_headers_is_an_auth_step(tmp_path: Path) -> None:
    """The TypeScript SDK sends MCP-Protocol-Version on its metadata requests; mcp-remote probes the OpenID
    form after the path. Neither is a call, a stream event or a skipped flow."""
    headers = {"mcp-protocol-version": "2025-11-25"}
    flows = [
        exchange(method="GET", path="/.well-known/oauth-protected-resource/mcp", request_headers=headers,
                 body={"resource": "http://127.0.0.1:8000/mcp"}, at=100.0),
        exchange(method="GET", path="/.well-known/oauth-authorization-server", request_headers=headers,
                 body={"issuer": "http://127.0.0.1:8000"}, at=100.1),
        exchange(method="GET", path="/mcp/.well-known/openid-configuration", status=404, body=b"", at=100.2),
    ]  # fmt: skip
    analysis = analysis_of(tmp_path, *flows)
    assert analysis.calls == [] and analysis.stream_events == []
    steps = [step["step"] for step in analysis.auth_steps]
    assert steps == ["protected-resource metadata", "authorization-server metadata", "OpenID configuration"]


def test_the_same_request_re_sent_under_its_id_after_a_401_is_no_reused_id(tmp_path: Path) -> None:
    session = {"mcp-session-id": "S", "user-agent": "node"}
    message = tool_call(2, "lookup")
    refused = exchange(message, status=401, body={"error": "invalid_token"}, request_headers=session, at=100.0)
    again = exchange(message, body=result(2, text_result()), request_headers={**session, "authorization": "Bearer b"},
                     at=100.2)  # fmt: skip
    other = tool_call(2, "echo")  # another request under the same id: that is a reused id
    reused = exchange(other, body=result(2, text_result()), request_headers=session, at=100.4)
    calls = analysis_of(tmp_path, refused, again, reused).calls
    assert [("ID_REUSED" in c["flags"]) for c in calls] == [False, False, True]
