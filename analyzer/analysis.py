"""The pipeline end to end: files -> exchanges -> messages -> calls with verdicts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_blackbox.addon.jsonrpc import MCP_REQUEST_HEADERS, is_mcp_method
from mcp_blackbox.analyzer.call_ids import assign_call_ids
from mcp_blackbox.analyzer.call_record import call_record
from mcp_blackbox.analyzer.classify import CaptureFacts, apply_verdict, protocol_version
from mcp_blackbox.analyzer.clients import identify_clients
from mcp_blackbox.analyzer.executions import DuplicateExecution, find_duplicate_executions
from mcp_blackbox.analyzer.extract import Extracted
from mcp_blackbox.analyzer.inputs import expand_captures
from mcp_blackbox.analyzer.load import LoadReport
from mcp_blackbox.analyzer.pair import legacy_session_of_endpoint, pair_messages, scope_of
from mcp_blackbox.analyzer.parallel import decoded_exchanges
from mcp_blackbox.analyzer.records import Call, Exchange, Message
from mcp_blackbox.analyzer.retries import RetryGroup, find_retries, gateway_services
from mcp_blackbox.analyzer.vocabulary import Flag, Outcome

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Analysis:
    call_objects: list[Call]
    exchanges: list[Exchange]
    report: LoadReport
    facts: CaptureFacts
    retry_groups: list[RetryGroup] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the capture could not show
    duplicate_executions: list[DuplicateExecution] = field(default_factory=list)  # writes that ran again
    stream_events: list[dict[str, Any]] = field(default_factory=list)  # a GET or DELETE refused: no call
    auth_steps: list[dict[str, Any]] = field(default_factory=list)  # the OAuth flow around the calls

    @cached_property
    def calls(self) -> list[dict[str, Any]]:
        """The calls as the export contract has them, in the order they started."""
        return [call_record(c, protocol_version(c, self.facts)) for c in self.call_objects]

    def to_pandas(self, *, redact: bool = True) -> pd.DataFrame:
        """The calls as a frame with explicit dtypes (analyzer/frames.py); evidence and error
        messages redacted like the export's unless ``redact=False``."""
        from mcp_blackbox.analyzer.export import iter_records
        from mcp_blackbox.analyzer.frames import calls_frame

        return calls_frame(iter_records(self, redact=redact))

    def retry_groups_to_pandas(self) -> pd.DataFrame:
        """The retry groups as a frame with explicit dtypes, one row per group."""
        from mcp_blackbox.analyzer.frames import retry_groups_frame

        return retry_groups_frame(group.record() for group in self.retry_groups)

    @cached_property
    def calls_frame(self) -> pd.DataFrame:
        """``to_pandas()``, built once."""
        return self.to_pandas()

    @property
    def flows_read(self) -> int:
        return self.report.flows_read

    @property
    def analyzed(self) -> int:
        return len(self.exchanges)

    @property
    def skipped(self) -> list[dict[str, Any]]:
        return self.report.skipped

    @property
    def read_problems(self) -> list[dict[str, Any]]:
        return self.report.problems


def _mcp_reason(exchange: Exchange, extracted: Extracted, known: set[str]) -> str | None:
    methods = {m.method for m in extracted.messages if m.method is not None}
    # Answers alone (a client's reply to a server request) carry no method: JSON-RPC enough.
    if extracted.claims_jsonrpc and (not methods or any(is_mcp_method(m) for m in methods)):
        return "JSON-RPC messages"
    if extracted.endpoint is not None:
        return "HTTP+SSE endpoint event"
    if any(name in exchange.request_headers for name in MCP_REQUEST_HEADERS) or exchange.session_id:
        return "MCP headers"
    if exchange.endpoint in known:
        return "an endpoint seen speaking MCP"
    return None


def analyze(paths: Iterable[str | Path], *, keep_details: bool = False, report: LoadReport | None = None) -> Analysis:
    """Analyze flow files (from the addon, plain mitmdump or HAR) into calls with verdicts.

    A directory stands for its ``*.flows`` files and a glob for its matches, by name (rotated files are
    named by their start time), read as one capture (``analyzer/inputs.py``).

    ``keep_details`` keeps bodies, every header and the addon's per-chunk record (for a report);
    without it only what the verdicts need is held, so large captures fit in memory.
    ``report``: pass one to watch ``flows_read`` and ``bytes_read`` grow from another thread.
    """
    report = LoadReport() if report is None else report
    exchanges: list[Exchange] = []
    timeline: list[Message] = []
    legacy_streams: dict[str, str] = {}
    known: set[str] = set()
    sse_without_times = 0
    auth_steps: list[dict[str, Any]] = []
    # Reading, decoding and extracting each exchange is its own business (in worker processes when that
    # pays, analyzer/parallel.py); what follows spans exchanges and runs here, in the capture's order.
    for decoded in decoded_exchanges(expand_captures(paths), report, keep_details=keep_details):
        exchange, extracted = decoded.exchange, decoded.extracted
        if decoded.auth is not None:
            # Analyzed, not skipped: part of the story (a 401, then credentials), though no call.
            auth_steps.append(decoded.auth)
            exchanges.append(exchange)
            continue
        reason = _mcp_reason(exchange, extracted, known)
        if reason is None:
            report.skip(exchange.source, exchange.index, exchange.flow_id, _not_mcp(exchange, extracted))
            continue
        known.add(exchange.endpoint)
        exchanges.append(exchange)
        if extracted.endpoint is not None and (session := legacy_session_of_endpoint(extracted.endpoint)):
            legacy_streams[exchange.flow_id] = session
        if decoded.without_times:
            sse_without_times += 1
        exchange.scope = scope_of(exchange, legacy_streams)
        exchange.error_text = decoded.error_text
        timeline.extend(extracted.messages)
    # Requests sort before answers stamped with the same instant: by direction first
    # ("client->server" < "server->client"), then stably by time. Two cheap key lists
    # instead of one tuple per message.
    timeline.sort(key=attrgetter("direction"))
    timeline.sort(key=attrgetter("t"))
    pairing = pair_messages(timeline)
    del timeline
    stream_events = [_stream_event(m) for m in pairing.orphans if _is_stream_event(m)]
    calls = pairing.calls + [_orphan_call(m) for m in pairing.orphans if not _is_stream_event(m)]
    facts = gather_facts(calls)
    for call in calls:
        if not call.outcome:
            apply_verdict(call, facts)

    calls.sort(key=lambda c: c.request.t)
    for number, call in enumerate(calls, 1):
        call.number = number
    assign_call_ids(calls)
    identify_clients(calls, facts.versions)
    retry_groups = find_retries(calls, facts)
    duplicates = find_duplicate_executions(calls, facts, gateway_services(retry_groups))
    notes = []
    if sse_without_times:
        notes.append(
            f"{sse_without_times} event stream(s) without per-event times (recorded without the addon, or "
            "content-encoded): their events are dated at the end of the response, and a cut stream may have "
            "lost its body"
        )
    return Analysis(calls, exchanges, report, facts, retry_groups, notes, duplicates, stream_events, auth_steps)


def _not_mcp(exchange: Exchange, extracted: Extracted) -> str:
    what = exchange.content_type or "no response" if exchange.status is None else exchange.content_type or "no body"
    methods = sorted({m.method for m in extracted.messages if m.method is not None})
    if methods:
        named = ", ".join(methods[:3]) + (", ..." if len(methods) > 3 else "")
        return (
            f"not MCP: {exchange.method} {exchange.path} ({what}) is JSON-RPC with methods MCP does not define "
            f"({named}), and has no MCP header or MCP endpoint"
        )
    return f"not MCP: {exchange.method} {exchange.path} ({what}) has no JSON-RPC message, MCP header or MCP endpoint"


def _is_stream_event(message: Message) -> bool:
    """The refusal of a GET stream or a DELETE of the session (a 405 with id null, say): an event of that
    stream or session, not a call. A message on an open event stream is an answer like any other."""
    exchange = message.exchange
    refused = not exchange.ok or not exchange.is_event_stream
    return exchange.method in ("GET", "DELETE") and refused and message.kind in ("error", "invalid")


def _stream_event(message: Message) -> dict[str, Any]:
    exchange = message.exchange
    what = f"JSON-RPC error {message.error[0]}: {message.error[1]}" if message.error else f"{message.problem}"
    return {
        "flow": exchange.flow_id,
        "source": exchange.source,
        "scope": exchange.scope,
        "method": exchange.method,
        "path": exchange.path,
        "status": exchange.status,
        "t": message.t,
        "what": what,
    }


def _orphan_call(message: Message) -> Call:
    scope = message.exchange.scope
    call = Call(request=message, scope=scope)
    call.add_exchange(message.exchange)
    call.outcome, call.layer = Outcome.INVALID_ENVELOPE, Outcome.INVALID_ENVELOPE.layer
    call.flags = (Flag.ORPHAN_RESPONSE,)
    call.evidence = (f"a response with id {message.id!r} answers no request in {scope}",)
    return call


def gather_facts(calls: list[Call]) -> CaptureFacts:
    """Tools (from tools/list) and negotiated versions (from initialize), for every call's verdict."""
    facts = CaptureFacts()
    for call in calls:
        if call.request.kind != "request":
            continue
        result = next((r.body["result"] for r in call.responses if r.kind == "result" and r.body), None)
        if not isinstance(result, dict):
            continue
        if call.method == "tools/list" and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    facts.tools[tool["name"]] = tool
        elif call.method == "initialize" and isinstance(result.get("protocolVersion"), str):
            facts.versions[call.scope] = result["protocolVersion"]
        info = result.get("serverInfo")
        if call.method in ("initialize", "server/discover") and isinstance(info, dict) and info.get("name"):
            facts.servers.add(f"{info['name']}/{info.get('version', '?')}")
    return facts


__all__ = ["Analysis", "analyze", "protocol_version"]
