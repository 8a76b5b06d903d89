"""Family oauth: the TypeScript SDK's own OAuth against an OAuth-protected MCP server, recorded in reverse mode.

    record_family("oauth", out, plan)  -> out/oauth.flows (+ out/oauth.relabel.json)

The server (tests/truth/peers/oauth_server.py: the Python SDK's mcp.server.auth, authorization server and
resource server in one process) is started after the recorder, with the recorder's URL as its issuer and
resource: the metadata's `resource` is then the URL the client connected to, which the SDK requires, and every
discovery, registration, authorize and token request goes through the recorder.

The client (tests/truth/peers/oauth_client.mjs) runs plan.runs fresh apps. Per run: connect (401, discovery,
registration, authorize, token, a new transport re-sends initialize), echo (first); the access token is revoked
and echo gets 401: the SDK refreshes and re-sends the same message itself (retry, auth-retry); every token is
revoked: the SDK needs a new authorization and throws, the app finishes it and calls again under a new id
(retry, auth-retry); a policy refuses balance with 403 and the app calls again with the same token (retry,
app-retry: no credentials changed).

The SDK's re-send after a refresh repeats the body, label included; its label as a retry is read from the
capture (the 401'd request, the same JSON-RPC id again with another Authorization header) and written to
out/<name>.relabel.json. The client's own log of every request it made is checked against the capture.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import child_env, stop_process, wait_listening
from tests.support.proxy import free_port
from tests.truth.harness import Plan, ScenarioFailed, read_flows, recording, tools_call, write_relabels
from tests.truth.labels import Label

PEERS = Path(__file__).resolve().parent / "peers"
SERVER = PEERS / "oauth_server.py"
CLIENT = PEERS / "oauth_client.mjs"
NODE = "node"
SERVER_START_S = 20.0
CLIENT_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_PER_RUN_S = 15.0


@dataclass(frozen=True)
class WireCall:
    """A tools/call as the capture holds it: what the scorer will pair with the analyzer's call."""

    flow_id: str
    label: Label
    jsonrpc_id: Any
    session: str | None
    authorization: str | None
    status: int | None


def record_family(name: str, out: Path, plan: Plan) -> list[dict[str, Any]]:
    """Record the OAuth scenario as out/<name>.flows; what each app saw, per tools/call."""
    upstream = free_port()
    with tempfile.TemporaryDirectory(prefix="mcp-truth-oauth-") as tmp:
        stderr_path = Path(tmp) / "server.stderr"
        with recording(f"http://127.0.0.1:{upstream}", name, out) as url, stderr_path.open("wb") as stderr:
            server = subprocess.Popen(
                [sys.executable, str(SERVER), "--port", str(upstream), "--public-url", url],
                stderr=stderr,
                env=child_env(),
            )
            try:
                wait_listening(server, upstream, stderr_path, SERVER_START_S, "the oauth server")
                report = _run_client(url, upstream, name, plan)
                if server.poll() is not None:
                    raise ScenarioFailed(f"oauth server exited: {stderr_path.read_text(errors='replace')[-2000:]}")
            finally:
                stop_process(server)
    wire = read_tools_calls(out / f"{name}.flows")
    relabels = sdk_resends(wire)
    verify(name, report, wire, relabels, plan)
    write_relabels(out, name, relabels)
    return describe(report, wire, relabels)


def _run_client(url: str, upstream: int, name: str, plan: Plan) -> dict[str, Any]:
    """The Node app; its JSON report (attempts, its log of every request the SDK made, fatal)."""
    command = [NODE, str(CLIENT), "--url", f"{url}/mcp", "--control", f"http://127.0.0.1:{upstream}"]
    command += ["--family", name, "--runs", str(plan.runs)]
    timeout = CLIENT_TIMEOUT_S + CLIENT_TIMEOUT_PER_RUN_S * plan.runs
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"oauth client exited with {done.returncode}; stderr:\n{done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    if report["fatal"]:
        raise ScenarioFailed(f"the oauth app failed: {report['fatal']}")
    return report


def read_tools_calls(capture: Path) -> list[WireCall]:
    """Every labelled tools/call POST in the capture, in the order it was sent."""
    calls: list[WireCall] = []
    for flow in read_flows(capture):
        if (found := tools_call(flow)) is None:
            continue
        message, label = found
        if label is None:
            raise ScenarioFailed(f"flow {flow.id}: a tools/call without a label")
        calls.append(
            WireCall(
                flow_id=flow.id,
                label=label,
                jsonrpc_id=message.get("id"),
                session=flow.request.headers.get("mcp-session-id"),
                authorization=flow.request.headers.get("authorization"),
                status=flow.response.status_code if flow.response else None,
            )
        )
    return calls


def sdk_resends(wire: list[WireCall]) -> dict[str, Label]:
    """The copies the SDK sent itself (same label, same JSON-RPC id, after a 401): their labels as retries.

    Only a copy whose Authorization header changed is an auth-retry; any other copy fails the scenario.
    """
    by_label: dict[str, list[WireCall]] = defaultdict(list)
    for call in wire:
        by_label[call.label.key].append(call)
    relabels: dict[str, Label] = {}
    for key, copies in by_label.items():
        label = copies[0].label
        for before, after in itertools.pairwise(copies):
            same_request = (after.jsonrpc_id, after.session) == (before.jsonrpc_id, before.session)
            if before.status != 401 or not same_request or after.authorization == before.authorization:
                raise ScenarioFailed(
                    f"{key}: sent again without a 401 and new credentials: {before.status} {before.jsonrpc_id} "
                    f"-> {after.jsonrpc_id}, Authorization changed: {after.authorization != before.authorization}"
                )
            attempt = relabels[before.flow_id].attempt + 1 if before.flow_id in relabels else label.attempt + 1
            relabels[after.flow_id] = Label(label.request, attempt, "retry", origin="auth-retry")
    return relabels


class _Check:
    """The scenario's expectations over the apps' report and the capture; ScenarioFailed on the first miss."""

    def __init__(self, report: dict[str, Any], wire: list[WireCall], relabels: dict[str, Label]) -> None:
        attempts = report["attempts"]
        self.seen = [(a["label"]["request"], a["label"]["attempt"], a["outcome"], a["error"]) for a in attempts]
        self.outcomes = {(a["label"]["request"], a["label"]["attempt"]): a for a in attempts}
        labels = [relabels.get(call.flow_id, call.label) for call in wire]
        self.expect(len({label.key for label in labels}) == len(labels), "a label on two tools/call")
        self.by_key = {label.key: call for call, label in zip(wire, labels, strict=True)}

    def expect(self, condition: bool, what: str) -> None:
        if not condition:
            raise ScenarioFailed(f"{what}; the apps saw: {self.seen}")

    def app(self, request: str, attempt: int) -> dict[str, Any]:
        """What the app saw for this attempt ({} if it made none)."""
        return self.outcomes.get((request, attempt), {})

    def sent(self, request: str, attempt: int) -> WireCall:
        """The attempt as the capture holds it."""
        key = f"{request}#{attempt}"
        self.expect(key in self.by_key, f"{key} is not in the capture")
        return self.by_key[key]

    def run(self, prefix: str) -> None:
        expect, app, sent = self.expect, self.app, self.sent
        expect(app(f"{prefix}/hello", 1).get("outcome") == "ok", f"{prefix}: hello succeeds")
        expect(app(f"{prefix}/refreshed", 1).get("outcome") == "ok", f"{prefix}: the refreshed call succeeds")
        lost, resent = sent(f"{prefix}/refreshed", 1), sent(f"{prefix}/refreshed", 2)
        expect(lost.status == 401 and resent.status == 200, f"{prefix}: refreshed is 401, then re-sent by the SDK")
        expect(app(f"{prefix}/reauth", 1).get("unauthorized") is True, f"{prefix}: the SDK throws UnauthorizedError")
        expect(app(f"{prefix}/reauth", 2).get("outcome") == "ok", f"{prefix}: the app's re-call succeeds")
        lost, again = sent(f"{prefix}/reauth", 1), sent(f"{prefix}/reauth", 2)
        expect(lost.status == 401 and again.status == 200, f"{prefix}: reauth is 401, then 200")
        expect(lost.authorization != again.authorization, f"{prefix}: the app's re-call carries new credentials")
        expect(lost.jsonrpc_id != again.jsonrpc_id, f"{prefix}: the app's re-call has a new JSON-RPC id")
        refused, retried = sent(f"{prefix}/balance", 1), sent(f"{prefix}/balance", 2)
        expect(refused.status == 403 and retried.status == 200, f"{prefix}: balance is refused with 403, then 200")
        expect(refused.authorization == retried.authorization, f"{prefix}: the 403 look-alike keeps its credentials")
        expect(refused.jsonrpc_id != retried.jsonrpc_id, f"{prefix}: the app's re-call has a new JSON-RPC id")


def verify(name: str, report: dict[str, Any], wire: list[WireCall], relabels: dict[str, Label], plan: Plan) -> None:
    """The apps and the wire saw what the labels say, or ScenarioFailed."""
    check = _Check(report, wire, relabels)
    posts = [entry for entry in report["wire"] if (entry.get("rpc") or {}).get("method") == "tools/call"]
    check.expect(len(posts) == len(wire), f"the client logged {len(posts)} tools/call POSTs, the capture {len(wire)}")
    for run in range(1, plan.runs + 1):
        check.run(f"{name}/r{run}")


def describe(report: dict[str, Any], wire: list[WireCall], relabels: dict[str, Label]) -> list[dict[str, Any]]:
    """What each app saw per tools/call (for corpus.json), with the flows that carried it and the SDK's copies."""
    flows: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for call in wire:
        label = relabels.get(call.flow_id)
        flows[(call.label.request, call.label.attempt)].append(
            {
                "flow": call.flow_id,
                "jsonrpc_id": call.jsonrpc_id,
                "status": call.status,
                "sdk_resend": label.meta()["truth"] if label else None,
            }
        )
    described: list[dict[str, Any]] = []
    for attempt in report["attempts"]:
        label = attempt["label"]
        record = {key: value for key, value in attempt.items() if key != "wire"}
        record["flows"] = flows[(label["request"], label["attempt"])]
        described.append(record)
    return described
