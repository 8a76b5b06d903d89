"""Record the sample captures: named MCP scenarios, real SDK clients, through the recording addon.

    .venv/bin/python sample_captures/record_samples.py [--only NAME ...] [--readme-only] [--list]
    make samples

Per scenario: a fresh test-bed server (tests/support/mcp_server.py, faults set through its
control endpoints), a fresh mitmdump with addon/mcp_recorder.py in reverse mode on 127.0.0.1,
the official Python and/or TypeScript SDK client runners pointed at the proxy, then mitmdump is
stopped with SIGINT. What the clients observed is checked against what the scenario is meant to
show; only then is the capture copied to ``sample_captures/<name>.flows`` (and the clients' JSON
output to ``<name>.client.json``). One scenario, ``plain-mitmdump-progress``, runs plain
``mitmdump -w`` without the addon, for contrast.

Afterwards the table and the per-flow listing in sample_captures/README.md (between the
``<!-- samples:... -->`` markers) are rewritten from the flow files on disk, so the counts in
the README are always those of the committed files. ``--readme-only`` does only that.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.support and addon, when run as a script

from mitmproxy import io as flow_io  # noqa: E402
from mitmproxy.http import HTTPFlow  # noqa: E402

from mcp_blackbox.analyzer.wire.jsonrpc import parse_messages  # noqa: E402
from mcp_blackbox.analyzer.wire.sse_framing import split_sse  # noqa: E402
from tests.support.processes import run_py_client, run_ts_client, start_server  # noqa: E402
from tests.support.proxy import start_mitmdump  # noqa: E402
from tests.support.raw_http import Control  # noqa: E402

README = HERE / "README.md"
MAX_FILE_BYTES = 200_000
METADATA_KEY = "mcp_blackbox"

Steps = list[dict[str, Any]]


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"op": "call", "tool": tool, "args": args}


LIST_TOOLS: dict[str, Any] = {"op": "list_tools"}
SESSION_TOOLS: Steps = [
    LIST_TOOLS,
    call("echo", text="hello wire"),
    call("add", a=2, b=3),
    call("tool_error", message="tool says no"),
    call("protocol_error", message="bad params"),
    call("raise_error", message="boom"),
    call("progress", steps=3, delay_ms=50),
    call("ask_name"),
    call("write_record", key="k1", value="v1"),
]


# ---------------------------------------------------------------- running a scenario


@dataclass
class Bed:
    """What a scenario's body gets: the proxy URL, the server's fault control, the runs so far."""

    url: str
    control: Control
    runs: list[dict[str, Any]] = field(default_factory=list)

    def py(
        self,
        label: str,
        steps: Steps,
        *,
        mode: str,
        transport: str = "streamable-http",
        auth_retry_token: str | None = None,
    ) -> dict[str, Any]:
        out = run_py_client(
            self.url,
            steps,
            mode=mode,
            transport=transport,
            auth_retry_token=auth_retry_token,
            timeout=30,
            step_timeout=10,
        )
        out["sdk_version"] = importlib.metadata.version("mcp")
        return self._keep(label, out)

    def ts(self, label: str, steps: Steps, *, timeout_ms: int = 20_000) -> dict[str, Any]:
        return self._keep(label, run_ts_client(self.url, steps, timeout_ms=timeout_ms))

    def _keep(self, label: str, out: dict[str, Any]) -> dict[str, Any]:
        out = {"label": label, **out}
        self.runs.append(out)
        return out


def text_of(result: dict[str, Any] | None) -> str:
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return ""
    return "".join(c.get("text", "") for c in result["content"] if isinstance(c, dict))


def outcome(step: dict[str, Any]) -> str:
    """One word for a client step: the result text, 'isError: text', or 'error CODE'."""
    if not step["ok"]:
        error = step["error"] or {}
        return f"error {error['code']}" if error.get("code") is not None else f"error {error.get('type')}"
    result = step["result"]
    if step["op"] == "list_tools":
        return f"{len(result['tools'])} tools"
    if isinstance(result.get("structuredContent"), dict):
        return json.dumps(result["structuredContent"], separators=(",", ":"))
    return ("isError: " if result.get("isError") else "") + text_of(result)


def outcomes(run: dict[str, Any]) -> list[str]:
    return [outcome(s) for s in run["steps"]]


# ---------------------------------------------------------------- the scenarios


@dataclass(frozen=True)
class Scenario:
    name: str
    client: str  # "python" | "typescript"
    server_mode: str
    what: str  # one sentence for the README: what the capture shows
    body: Callable[[Bed], None]
    check: Callable[[list[dict[str, Any]]], None]
    addon: bool = True
    client_note: Callable[[list[dict[str, Any]]], str] | None = None  # extra README note from the client's view
    auth_token: str | None = None  # the server answers 401 without `Authorization: Bearer <auth_token>`


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def py_2025_session_tools(bed: Bed) -> None:
    bed.py("session", SESSION_TOOLS, mode="legacy")


def check_session_tools(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    _expect(run["fatal"] is None, f"fatal: {run['fatal']}")
    got = outcomes(run)
    want_prefix = ["8 tools", "hello wire", '{"sum":5}', "isError: tool says no", "error -32602"]
    _expect(got[:5] == want_prefix, f"unexpected outcomes {got}")
    _expect(got[6:8] == ["done 3", "hello Ada"], f"unexpected outcomes {got}")
    _expect(got[8].startswith("written k1"), f"unexpected outcomes {got}")
    _expect(len(run["steps"][6]["progress"]) == 3, f"progress: {run['steps'][6]['progress']}")


def ts_2025_session_tools(bed: Bed) -> None:
    bed.ts("session", SESSION_TOOLS)


def ts_2025_resume_after_cut(bed: Bed) -> None:
    bed.control.faults({"match": {"tool": "progress"}, "action": {"cut_after_events": 2}})
    bed.ts("resume", [call("progress", steps=5, delay_ms=100), call("echo", text="after resume")])


def check_resume(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    _expect(outcomes(run) == ["done 5", "after resume"], f"unexpected outcomes {outcomes(run)}")
    _expect([p["progress"] for p in run["steps"][0]["progress"]] == [1, 2, 3, 4, 5], "progress not 1..5")


def py_2026_stateless(bed: Bed) -> None:
    steps = [
        LIST_TOOLS,
        call("echo", text="hello 2026"),
        call("tool_error", message="tool says no"),
        call("protocol_error", message="bad params"),
        call("progress", steps=3, delay_ms=50),
        call("ask_name"),
    ]
    bed.py("modern", steps, mode="auto")


def check_2026(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    _expect(run["protocol_version"] == "2026-07-28", f"protocol {run['protocol_version']}")
    want = ["8 tools", "hello 2026", "isError: tool says no", "error -32602", "done 3", "hello Ada"]
    _expect(outcomes(run) == want, f"unexpected outcomes {outcomes(run)}")


def py_2025_cut_2026_no_resume(bed: Bed) -> None:
    bed.control.faults({"match": {"tool": "progress"}, "action": {"cut_after_events": 1}})
    bed.py("modern-cut", [call("progress", steps=3, delay_ms=50), call("echo", text="after cut")], mode="auto")


def check_no_resume(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    _expect(run["protocol_version"] == "2026-07-28", f"protocol {run['protocol_version']}")
    progress, echo = run["steps"]
    _expect(not progress["ok"], "the cut call succeeded")
    _expect(len(progress["progress"]) == 1, f"progress: {progress['progress']}")
    _expect(outcome(echo) == "after cut", f"echo after the cut: {outcome(echo)}")


def py_2024_legacy_sse(bed: Bed) -> None:
    steps = [
        LIST_TOOLS,
        call("echo", text="hello sse"),
        call("tool_error", message="tool says no"),
        call("progress", steps=3, delay_ms=50),
    ]
    bed.py("legacy-sse", steps, mode="legacy", transport="sse")


def check_legacy_sse(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    want = ["8 tools", "hello sse", "isError: tool says no", "done 3"]
    _expect(outcomes(run) == want, f"unexpected outcomes {outcomes(run)}")


def py_app_retry_after_503(bed: Bed) -> None:
    bed.control.faults(
        {"match": {"rpc_method": "tools/call", "tool": "write_record"}, "action": {"status": 503}, "times": 1}
    )
    steps = [call("echo", text="before write"), call("write_record", key="order-1", value="paid")]
    bed.py("attempt-1", steps, mode="legacy")
    bed.py("attempt-2", steps, mode="legacy")


def check_retry(runs: list[dict[str, Any]]) -> None:
    first, second = runs
    _expect(outcomes(first)[0] == "before write", f"attempt 1: {outcomes(first)}")
    _expect(not first["steps"][1]["ok"], f"attempt 1 write_record succeeded: {outcomes(first)}")
    _expect(outcomes(second)[1].startswith("written order-1 #1"), f"attempt 2: {outcomes(second)}")


PROTOCOL_FAULTS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "429-retry-after",
        {"status": 429, "headers": {"Retry-After": "2"}, "body": "slow down"},
        call("echo", text="rate limited"),
    ),
    ("malformed_json", {"rewrite": "malformed_json"}, call("echo", text="malformed")),
    ("wrong_id", {"rewrite": "wrong_id"}, call("echo", text="wrong id")),
    ("result_and_error", {"rewrite": "result_and_error"}, call("add", a=20, b=22)),
    ("content_not_array", {"rewrite": "content_not_array"}, call("add", a=1, b=1)),
]


def ts_protocol_faults(bed: Bed) -> None:
    # Rules match by tool only, so each fault gets its own short client session, set just before it.
    for label, action, faulted in PROTOCOL_FAULTS:
        bed.control.faults({"match": {"rpc_method": "tools/call", "tool": faulted["tool"]}, "action": action})
        bed.ts(label, [faulted, call("echo", text=f"after {label}")], timeout_ms=3000)
    bed.control.faults()


def check_protocol_faults(runs: list[dict[str, Any]]) -> None:
    _expect([r["label"] for r in runs] == [label for label, _, _ in PROTOCOL_FAULTS], "runs missing")
    for run in runs:
        _expect(run["fatal"] is None, f"{run['label']}: fatal {run['fatal']}")
        _expect(outcome(run["steps"][1]) == f"after {run['label']}", f"{run['label']}: {outcomes(run)}")
    rate_limited = runs[0]["steps"][0]
    _expect(not rate_limited["ok"] and rate_limited["error"]["code"] == 429, f"429: {rate_limited}")


def py_session_expired(bed: Bed) -> None:
    # The first tools/call passes, the second (same session) gets 404 as if the server had dropped it.
    bed.control.faults(
        {
            "match": {"http_method": "POST", "rpc_method": "tools/call"},
            "action": {"statuses": [200, 404], "body": "session not found"},
        }
    )
    bed.py("expiring", [call("echo", text="first"), call("echo", text="second")], mode="legacy")
    # The application re-initializes and sends the failed request again (session-reinit).
    bed.py("reinit", [call("echo", text="second")], mode="legacy")


def check_session_expired(runs: list[dict[str, Any]]) -> None:
    first, second = runs
    _expect(outcome(first["steps"][0]) == "first", f"expiring: {outcomes(first)}")
    _expect(not first["steps"][1]["ok"], f"the 404 call succeeded: {outcomes(first)}")
    _expect(outcomes(second) == ["second"], f"reinit: {outcomes(second)}")


# What a server that does not know the 2026 probe answers (the JSON-RPC id is the one the Python
# SDK gives `server/discover`, its first request; the transport uses its own request id either way).
# mcp/client/_probe.py falls back to `initialize` on any MCPError except -32022 naming only modern
# versions, and the transport turns every 4xx into one: a bare 404 or 405 falls back the same way.
DISCOVER_REFUSAL = {
    "status": 400,
    "headers": {"content-type": "application/json"},
    "body": json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}),
}


def py_protocol_fallback(bed: Bed) -> None:
    bed.control.faults({"match": {"rpc_method": "server/discover"}, "action": DISCOVER_REFUSAL, "times": None})
    bed.py("fallback", [call("echo", text="after fallback")], mode="auto")


def check_fallback(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    _expect(run["fatal"] is None, f"fatal: {run['fatal']}")
    _expect(run["protocol_version"] == "2025-11-25", f"protocol {run['protocol_version']}")
    _expect(outcomes(run) == ["after fallback"], f"unexpected outcomes {outcomes(run)}")


AUTH_TOKEN = "s3cret"  # a test token; the capture holds it in clear (nothing is redacted yet)


def py_auth_retry(bed: Bed) -> None:
    bed.py("auth-retry", [LIST_TOOLS, call("echo", text="authorized")], mode="legacy", auth_retry_token=AUTH_TOKEN)


def check_auth_retry(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    _expect(run["fatal"] is None, f"fatal: {run['fatal']}")
    _expect(outcomes(run) == ["8 tools", "authorized"], f"unexpected outcomes {outcomes(run)}")


def plain_mitmdump_progress(bed: Bed) -> None:
    bed.ts("plain", [call("progress", steps=5, delay_ms=100)])


def progress_note(runs: list[dict[str, Any]]) -> str:
    """When the client's progress callback fired, relative to the start of the call."""
    notes = []
    for run in runs:
        for step in run["steps"]:
            if step["progress"]:
                offsets = ", ".join(f"{(p['t'] - step['t_start']) * 1000:.0f}" for p in step["progress"])
                notes.append(f"client got {len(step['progress'])} progress events at +[{offsets}] ms")
    return "; ".join(notes)


def check_plain(runs: list[dict[str, Any]]) -> None:
    [run] = runs
    _expect(outcomes(run) == ["done 5"], f"unexpected outcomes {outcomes(run)}")


SCENARIOS = [
    Scenario(
        "py-2025-session-tools",
        "python",
        "stateful",
        "initialize, initialized, standalone GET stream, list + 8 tool calls incl. progress, elicitation "
        "answered by a POST (202), side effect; the client's DELETE",
        py_2025_session_tools,
        check_session_tools,
    ),
    Scenario(
        "ts-2025-session-tools",
        "typescript",
        "stateful",
        "the same steps as py-2025-session-tools with the TypeScript client",
        ts_2025_session_tools,
        check_session_tools,
    ),
    Scenario(
        "ts-2025-resume-after-cut",
        "typescript",
        "stateful",
        "progress(5, 100): the fault layer cuts the POST stream after 2 data events; the client resumes "
        "with GET + Last-Event-ID after ~1 s and gets the rest and `done 5`; then an echo",
        ts_2025_resume_after_cut,
        check_resume,
        client_note=progress_note,
    ),
    Scenario(
        "py-2026-stateless",
        "python",
        "stateless",
        "server/discover probe, then sessionless calls; ask_name as MRTR rounds (input_required, "
        "retried under a new id with inputResponses)",
        py_2026_stateless,
        check_2026,
    ),
    Scenario(
        "py-2025-cut-2026-no-resume",
        "python",
        "stateful",
        "a 2026-07-28 client on the stateful server (served statelessly): progress stream cut after 1 "
        "event, no event ids, no resumption, the call fails; the next call works",
        py_2025_cut_2026_no_resume,
        check_no_resume,
    ),
    Scenario(
        "py-2024-legacy-sse",
        "python",
        "legacy-sse",
        "HTTP+SSE: GET /sse with the endpoint event, every POST to /messages/ answered 202, all responses "
        "and progress on the one GET stream (open until the client leaves)",
        py_2024_legacy_sse,
        check_legacy_sse,
    ),
    Scenario(
        "py-app-retry-after-503",
        "python",
        "stateful",
        "run 1: write_record gets 503 (session A); the application retries with a fresh client "
        "process: session B, same JSON-RPC ids, write_record succeeds",
        py_app_retry_after_503,
        check_retry,
    ),
    Scenario(
        "ts-protocol-faults",
        "typescript",
        "stateful",
        "five short sessions, one fault each on the first call, then a clean echo: 429 + Retry-After: 2, "
        "malformed_json, wrong_id, result_and_error (add), content_not_array (add)",
        ts_protocol_faults,
        check_protocol_faults,
    ),
    Scenario(
        "py-session-expired",
        "python",
        "stateful",
        "echo OK, then the session's next tools/call gets 404 `session not found` (fault "
        "`statuses: [200, 404]`, so it happens inside one client run) and fails; a new client process "
        "re-initializes and succeeds",
        py_session_expired,
        check_session_expired,
    ),
    Scenario(
        "py-protocol-fallback",
        "python",
        "stateful",
        "`--mode auto` against a server that refuses the 2026 probe: `server/discover` answered 400 with "
        "JSON-RPC error -32601 (fault rule), the client falls back to `initialize` (2025-11-25) and runs echo",
        py_protocol_fallback,
        check_fallback,
    ),
    Scenario(
        "py-auth-retry",
        "python",
        "stateful",
        "bearer-token server: the first `initialize` goes without a token and gets 401 + "
        "`WWW-Authenticate: Bearer`; the client's httpx2.Auth flow re-sends the identical request with "
        "`Authorization: Bearer s3cret`; list + echo then carry the token",
        py_auth_retry,
        check_auth_retry,
        auth_token=AUTH_TOKEN,
    ),
    Scenario(
        "plain-mitmdump-progress",
        "typescript",
        "stateful",
        "contrast: plain `mitmdump -w`, no addon, progress(5, 100): no mcp_blackbox metadata; SSE "
        "bodies buffered by mitmproxy, so the client gets the progress events all at once at the end",
        plain_mitmdump_progress,
        check_plain,
        addon=False,
        client_note=progress_note,
    ),
]
BY_NAME = {s.name: s for s in SCENARIOS}


# ---------------------------------------------------------------- proxies


# ---------------------------------------------------------------- recording


def read_flows(path: Path) -> list[HTTPFlow]:
    with path.open("rb") as f:
        return [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]


def record(scenario: Scenario) -> float:
    """Record one scenario into sample_captures/; return how long it took.

    On failure nothing here is touched; the capture, mitmdump's log and the clients' output are kept
    in a temp directory named in the error.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mcp-sample-") as tmp:
        workdir = Path(tmp)
        runs: list[dict[str, Any]] = []
        try:
            flow_file = _record_into(scenario, workdir, runs)
        except Exception as exc:
            kept = Path(tempfile.mkdtemp(prefix=f"mcp-sample-failed-{scenario.name}-"))
            shutil.copytree(workdir, kept, dirs_exist_ok=True)
            (kept / "client.json").write_text(json.dumps(runs, indent=1) + "\n")
            raise AssertionError(f"{exc}\n(capture, mitmdump log and client output kept in {kept})") from exc
        shutil.copyfile(flow_file, HERE / f"{scenario.name}.flows")
        client_json = {"scenario": scenario.name, "runs": runs}
        (HERE / f"{scenario.name}.client.json").write_text(json.dumps(client_json, indent=1) + "\n")
    return time.monotonic() - started


def _record_into(scenario: Scenario, workdir: Path, runs: list[dict[str, Any]]) -> Path:
    """Server, proxy, clients, checks; the clients' outputs go into `runs`. Returns the checked flow file."""
    with start_server(scenario.server_mode, auth_token=scenario.auth_token) as server:
        control = Control(server.port)
        control.reset()
        upstream = f"reverse:http://127.0.0.1:{server.port}"
        proxy = start_mitmdump(upstream, workdir, name=scenario.name, addon=scenario.addon)
        path = "/sse" if scenario.server_mode == "legacy-sse" else "/mcp"
        bed = Bed(url=f"{proxy.url}{path}", control=control, runs=runs)
        try:
            scenario.body(bed)
        finally:
            time.sleep(0.3)  # let the last DELETE / stream ends reach the proxy's hooks
            proxy.stop()
            server.assert_alive()
    try:
        scenario.check(runs)
    except AssertionError as exc:
        seen = "\n".join(f"{r['label']}: {outcomes(r)} fatal={r['fatal']}" for r in runs)
        message = f"{scenario.name}: the clients did not see what the scenario needs: {exc}\n{seen}"
        raise AssertionError(message) from None
    flows = read_flows(proxy.flow_file)
    size = proxy.flow_file.stat().st_size
    if not flows:
        raise AssertionError(f"{scenario.name}: empty capture; mitmdump log:\n{proxy.log()[-3000:]}")
    if size > MAX_FILE_BYTES:
        raise AssertionError(f"{scenario.name}: capture is {size} bytes, over {MAX_FILE_BYTES}")
    if scenario.addon:
        # Every exchange in these captures is MCP, so every flow must carry the addon's record.
        missing = [i for i, flow in enumerate(flows) if "mcp" not in flow.metadata.get(METADATA_KEY, {})]
        if missing:
            raise AssertionError(f"{scenario.name}: flows {missing} have no {METADATA_KEY}.mcp metadata")
    elif any(METADATA_KEY in flow.metadata for flow in flows):
        raise AssertionError(f"{scenario.name}: plain mitmdump capture has {METADATA_KEY} metadata")
    return proxy.flow_file


# ---------------------------------------------------------------- describing a capture (for the README)


def _short(text: str, limit: int = 28) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message_summary(message: dict[str, Any]) -> str:
    if "method" in message:
        method = message["method"]
        if method == "notifications/progress":
            return "progress"
        return f"{method}" + (f" id={message['id']}" if "id" in message else "")
    rid = message.get("id")
    if "error" in message and "result" in message:
        return f"result+error id={rid}"
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        return f"error {error.get('code')} id={rid}"
    result = message.get("result")
    if isinstance(result, dict):
        if result.get("resultType") == "input_required":
            return f"input_required id={rid}"
        if isinstance(result.get("content"), list) and result["content"]:
            prefix = "isError " if result.get("isError") else ""
            return f'{prefix}result id={rid} "{_short(text_of(result))}"'
        if isinstance(result.get("content"), str):
            return f"result id={rid} with content={result['content']!r}"
        if "tools" in result:
            return f"result id={rid} ({len(result['tools'])} tools)"
    return f"result id={rid}"


def _compress(items: list[str]) -> list[str]:
    """['progress', 'progress', 'x'] -> ['progress×2', 'x']."""
    out: list[str] = []
    for item in items:
        if out and out[-1].split("×")[0] == item:
            head, _, n = out[-1].partition("×")
            out[-1] = f"{head}×{int(n or 1) + 1}"
        else:
            out.append(item)
    return out


def _response_payload(body: bytes, content_type: str) -> tuple[list[str], list[dict[str, Any]]]:
    """A summary of a response body, one item per SSE event / JSON-RPC message, and the messages."""
    if content_type == "text/event-stream":
        events, rest = split_sse(body)
        parts: list[str] = []
        found: list[dict[str, Any]] = []
        for event in events:
            if event.event == "endpoint":
                parts.append(f"endpoint {event.data.split('?')[0]}")
            elif event.data == "":
                parts.append(f"priming id={event.id}")
            elif messages := parse_messages(event.data):
                parts.extend(_message_summary(m) for m in messages)
                found.extend(messages)
            else:
                parts.append(f"non-JSON data (id={event.id})")
        if rest < len(body):
            parts.append(f"{len(body) - rest} bytes of an unfinished event")
        return _compress(parts), found
    if content_type == "application/json" and body:
        messages = parse_messages(body) or []
        return ([_message_summary(m) for m in messages] or ["non-JSON body"]), messages
    return ([repr(_short(body.decode("utf-8", "replace"), 24))] if body else []), []


def describe_flow(flow: HTTPFlow) -> dict[str, Any]:
    """The facts about one flow the README's table and listing use."""
    request, response = flow.request, flow.response
    messages = parse_messages(request.raw_content) if request.raw_content else None
    first = messages[0] if messages else {}
    params = first.get("params") if isinstance(first.get("params"), dict) else {}
    meta = flow.metadata.get(METADATA_KEY)
    stream = (meta or {}).get("stream") or {}
    content_type = response.headers.get("content-type", "").split(";")[0].strip() if response else ""
    payload, answers = _response_payload(response.raw_content or b"", content_type) if response else ([], [])
    session = request.headers.get("mcp-session-id") or (response.headers.get("mcp-session-id") if response else None)
    return {
        "method": request.method,
        "path": request.path.split("?")[0],
        "rpc": first.get("method") or ("(response)" if first else None),
        "tool": params.get("name") if first.get("method") == "tools/call" else None,
        "id": first.get("id"),
        "last_event_id": request.headers.get("last-event-id"),
        "session": session or request.query.get("session_id") or request.query.get("sessionId"),
        "protocol_header": request.headers.get("mcp-protocol-version"),
        "negotiated": [
            m["result"]["protocolVersion"]
            for m in answers
            if isinstance(m.get("result"), dict) and isinstance(m["result"].get("protocolVersion"), str)
        ],
        "answer_ids": [m["id"] for m in answers if "method" not in m and ("result" in m or "error" in m)],
        "retry_after": response.headers.get("retry-after") if response else None,
        "status": response.status_code if response else None,
        "content_type": content_type,
        "payload": payload,
        "ended": stream.get("ended"),
        "failure": (meta or {}).get("failure"),
        "error": flow.error.msg if flow.error else None,
        "meta": meta is not None,
    }


ODD_PAYLOAD = ("elicitation/create", "input_required", "non-JSON", "result+error")


def _finished(payload: list[str]) -> bool:
    """A final response (result or error) is among the payload items."""
    return any(p.startswith(("result", "isError", "error", "input_required")) for p in payload)


def flow_line(index: int, d: dict[str, Any], sessions: dict[str, str]) -> str:
    parts = [f"{index:2d}", d["method"], d["path"]]
    if d["session"]:
        parts.append(f"[{sessions.setdefault(d['session'], 'ABCDEFGHIJ'[len(sessions) % 10])}]")
    if d["rpc"]:
        rpc_id = f" id={d['id']}" if d["id"] is not None else ""
        parts.append(d["rpc"] + (f" {d['tool']}" if d["tool"] else "") + rpc_id)
    if d["last_event_id"]:
        parts.append(f"Last-Event-ID={d['last_event_id']}")
    parts.append("→")
    parts.append(str(d["status"]) if d["status"] is not None else "no response")
    if d["content_type"]:
        parts.append({"text/event-stream": "sse", "application/json": "json"}.get(d["content_type"], d["content_type"]))
    if d["payload"]:
        parts[-1] += ":"
        parts.append(", ".join(d["payload"]))
    if d["ended"] and d["ended"] != "complete":
        parts.append(f"[stream ended {d['ended']}]")
    elif d["error"]:
        parts.append(f"[flow error: {_short(d['error'], 60)}]")
    return " ".join(parts)


def notable(descriptions: list[dict[str, Any]]) -> str:
    """The exchanges worth knowing about, derived from the flow file."""
    notes: list[str] = []
    sessions = {d["session"] for d in descriptions if d["session"]}
    notes.append(f"{len(sessions)} session{'s' * (len(sessions) != 1)}" if sessions else "no session")
    closed_after_answer = 0
    for d in descriptions:
        label = " ".join(filter(None, [d["method"], d["rpc"] if d["rpc"] != "(response)" else None, d["tool"]]))
        odd = [p for p in d["payload"] if p.startswith(ODD_PAYLOAD) or " with content=" in p]
        if d["last_event_id"]:
            notes.append(f"GET Last-Event-ID={d['last_event_id']} → {d['status']}: {', '.join(d['payload'])}")
            continue
        if d["ended"] == "client-abort" and (_finished(d["payload"]) or d["method"] == "GET"):
            closed_after_answer += d["method"] == "POST"  # the client hung up once it had its answer
        elif d["ended"] not in (None, "complete"):
            sent = [p for p in d["payload"] if not p.startswith("priming")]
            notes.append(f"{label} stream ended {d['ended']} after {', '.join(sent) or 'nothing'}")
            continue
        failed = [p.split(" id=")[0] for p in d["payload"] if p.startswith(("error ", "isError "))]
        if d["status"] is not None and d["status"] >= 400:
            retry = f" (Retry-After: {d['retry_after']})" if d["retry_after"] else ""
            notes.append(f"{label} → {d['status']}{retry} {', '.join(d['payload'])}".rstrip())
        elif d["error"] and not d["ended"]:
            lost = "no response, " if d["status"] is None else ""
            notes.append(f"{label}: {lost}flow error {_short(d['error'], 40)}")
        elif d["id"] is not None and d["answer_ids"] and d["id"] not in d["answer_ids"]:
            notes.append(f"{label} id={d['id']} answered with id {', '.join(map(str, d['answer_ids']))}")
        elif odd:
            notes.append(f"{label}: {', '.join(odd)}")
        elif any(p.startswith("endpoint ") for p in d["payload"]):
            notes.append(f"{label} {d['path']} carries every answer: {', '.join(d['payload'])}")
        elif failed:
            notes.append(f"{label}: {', '.join(failed)}")
        elif d["failure"] and not d["failure"].startswith("stream "):
            notes.append(f"{label}: {d['failure']}")
        elif d["rpc"] == "(response)":
            notes.append(f"client's answer POST → {d['status']}")
        elif d["method"] == "DELETE":
            notes.append(f"DELETE → {d['status']}")
    if closed_after_answer:
        notes.append(
            f"{closed_after_answer} POST stream(s) closed by the client right after the final response "
            "(ended client-abort)"
        )
    if not any(d["meta"] for d in descriptions):
        notes.append("no mcp_blackbox metadata")
    return "; ".join(_dedupe(notes))


def _dedupe(items: list[str]) -> list[str]:
    counts = Counter(items)
    out: list[str] = []
    for item in items:
        tagged = item if counts[item] == 1 else f"{item} (×{counts[item]})"
        if tagged not in out:
            out.append(tagged)
    return out


def client_label(scenario: Scenario, runs: list[dict[str, Any]]) -> str:
    version = runs[0].get("sdk_version") if runs else None
    sdk = "Python SDK `mcp`" if scenario.client == "python" else "TypeScript SDK"
    return f"{sdk} {version or '?'}"


def protocol_label(descriptions: list[dict[str, Any]], scenario: Scenario) -> str:
    negotiated = sorted({v for d in descriptions for v in d["negotiated"]})
    headers = sorted({d["protocol_header"] for d in descriptions if d["protocol_header"]})
    if negotiated:
        label = f"{', '.join(negotiated)} (initialize)"
    elif headers:
        label = f"{', '.join(headers)} (no initialize)"
    else:
        label = "?"
    if scenario.server_mode == "legacy-sse":
        label += ", over the 2024-11-05 HTTP+SSE transport"
    return label


def _outcome_line(run: dict[str, Any]) -> str:
    line = f"{run['label']}: " + ", ".join(outcomes(run))
    return line + (f" (fatal: {run['fatal']['message']})" if run.get("fatal") else "")


def table_and_listing() -> tuple[str, str, list[str]]:
    rows = [
        "| file | client | protocol | server | what happens | flows | notable exchanges (generated from the file) |",
        "|---|---|---|---|---|---|---|",
    ]
    listing: list[str] = []
    missing = []
    for scenario in SCENARIOS:
        path = HERE / f"{scenario.name}.flows"
        if not path.exists():
            missing.append(scenario.name)
            continue
        descriptions = [describe_flow(f) for f in read_flows(path)]
        client_path = HERE / f"{scenario.name}.client.json"
        runs = json.loads(client_path.read_text())["runs"] if client_path.exists() else []
        methods = Counter(d["method"] for d in descriptions).most_common()
        count = f"{len(descriptions)} ({', '.join(f'{n} {m}' for m, n in methods)})"
        notes = notable(descriptions)
        if scenario.client_note and runs:
            notes += f"; {scenario.client_note(runs)}"
        rows.append(
            f"| `{path.name}` ({path.stat().st_size / 1000:.0f} KB) | {client_label(scenario, runs)} | "
            f"{protocol_label(descriptions, scenario)} | {scenario.server_mode} | {scenario.what} | {count} | "
            f"{notes} |"
        )
        sessions: dict[str, str] = {}
        listing += [f"### `{path.name}`", "", "```"]
        listing += [flow_line(i, d, sessions) for i, d in enumerate(descriptions)]
        listing += ["```", ""]
        listing += [f"Client saw: {'; '.join(_outcome_line(run) for run in runs)}", ""] if runs else []
    return "\n".join(rows), "\n".join(listing).rstrip(), missing


def replace_between(text: str, marker: str, content: str) -> str:
    begin, end = f"<!-- samples:{marker}:begin -->", f"<!-- samples:{marker}:end -->"
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise SystemExit(f"{README}: markers {begin} ... {end} not found")
    return f"{head}{begin}\n{content}\n{end}{rest.partition(end)[2]}"


def update_readme() -> str:
    table, listing, missing = table_and_listing()
    text = README.read_text()
    text = replace_between(text, "table", table)
    text = replace_between(text, "listing", listing)
    README.write_text(text)
    if missing:
        print(f"no capture yet for: {', '.join(missing)}", file=sys.stderr)
    return table


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the sample MCP captures in sample_captures/.")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=list(BY_NAME), help="record only these")
    parser.add_argument("--readme-only", action="store_true", help="only regenerate the README table and listing")
    parser.add_argument("--list", action="store_true", help="list the scenario names")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(BY_NAME))
        return 0
    failed = []
    if not args.readme_only:
        total = time.monotonic()
        for name in args.only or list(BY_NAME):
            print(f"recording {name} ...", flush=True)
            try:
                took = record(BY_NAME[name])
            except Exception as exc:
                failed.append(name)
                print(f"FAILED {name}: {exc}", file=sys.stderr, flush=True)
                continue
            print(f"  {name}.flows ({(HERE / f'{name}.flows').stat().st_size} bytes) in {took:.1f}s", flush=True)
        print(f"recorded in {time.monotonic() - total:.1f}s", flush=True)
    print(update_readme())
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
