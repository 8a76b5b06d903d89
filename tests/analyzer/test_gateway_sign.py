"""A gateway between the recorder and the server is named, once, from what its responses show (issue 21,
part 5): a Server header naming a proxy, a Via header, or an error page of its own. Look-alikes name none: an
MCP server's own Server header, a JSON 5xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write

HTML = "text/html"
NGINX_502 = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"  # noqa: E501
HAPROXY_503 = (
    "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>"
)


def notes_of(tmp_path: Path, *flows: Any) -> list[str]:
    return [note for note in analyze([write(tmp_path, *flows)]).notes if "gateway" in note]


def ok(rpc_id: int, at: float, **kw: Any) -> Any:
    kw.setdefault("body", result(rpc_id, text_result("hi")))
    return exchange(tool_call(rpc_id, "echo"), at=at, **kw)


@pytest.mark.parametrize(
    ("flow_kw", "named", "how"),
    [
        ({"response_headers": {"server": "nginx/1.22.1"}}, "nginx", "Server: nginx/1.22.1"),
        ({"response_headers": {"via": "1.1 varnish, 1.1 caddy"}}, "caddy", "Via: 1.1 varnish, 1.1 caddy"),
        ({"status": 502, "body": NGINX_502.encode(), "content_type": "text/html"}, "nginx", "its HTTP 502 error page"),
        (
            {"status": 503, "body": HAPROXY_503.encode(), "content_type": "text/html"},
            "haproxy",
            "its HTTP 503 error page",
        ),
    ],
)
def test_a_gateway_is_named_once_with_how_it_showed(
    tmp_path: Path, flow_kw: dict[str, Any], named: str, how: str
) -> None:
    flows = [
        exchange(tool_call(n, "echo"), at=100.0 + n, **{"body": result(n, text_result("hi")), **flow_kw})
        for n in (1, 2)
    ]
    (note,) = notes_of(tmp_path, *flows)
    assert f"a gateway is in the path: {named} ({how}; 2 response(s) show it)" in note
    assert "may have run, more than once" in note


@pytest.mark.parametrize(
    "flow_kw",
    [
        {"response_headers": {"server": "uvicorn"}},
        {"response_headers": {"server": "Werkzeug/3.0 Python/3.12"}},
        {"status": 503, "body": {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "busy"}}},
        {"status": 500, "body": b"<html>Internal Server Error</html>", "content_type": "text/html"},
    ],
)
def test_an_mcp_servers_own_answers_name_no_gateway(tmp_path: Path, flow_kw: dict[str, Any]) -> None:
    assert notes_of(tmp_path, ok(1, 100.0, **flow_kw)) == []


def test_a_gateways_504_to_a_write_may_have_run_more_than_once(tmp_path: Path) -> None:
    tools = {"tools": [{"name": "lookup", "annotations": {"readOnlyHint": True}}, {"name": "write_record"}]}
    gateway = {"server": "nginx/1.22.1"}
    timeout = b"<html><center><h1>504 Gateway Time-out</h1></center><hr><center>nginx</center></html>"
    flows = [
        exchange(rpc(1, "tools/list"), body=result(1, tools), at=100.0),
        exchange(tool_call(2, "write_record"), status=504, body=timeout, content_type=HTML,
                 response_headers=gateway, at=101.0),
        exchange(tool_call(3, "lookup"), status=504, body=timeout, content_type=HTML,
                 response_headers=gateway, at=102.0),  # read-only: running it twice changes nothing
        exchange(tool_call(4, "write_record"), status=504, body=b"upstream timed out", content_type="text/plain",
                 at=103.0),  # no gateway shows: the server's own 504
    ]  # fmt: skip
    calls = {c["jsonrpc_id"]: c for c in analyze([write(tmp_path, *flows)]).calls}
    line = "nginx answered 504 (Server: nginx/1.22.1): the write may have run, possibly more than once"
    assert calls[2]["evidence"][-1] == f"{line} (the gateway's own retries are invisible here)"
    assert not any("may have run" in e for c in (calls[3], calls[4]) for e in c["evidence"])
