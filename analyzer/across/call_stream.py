"""The analysis as a stream of final calls: files -> exchanges -> messages -> calls with verdicts.

``CallStream`` runs every stage that spans exchanges (which endpoints speak MCP, scopes, pairing,
verdicts, ids, clients, retries, duplicate executions) over the decoded exchanges
(analyzer/read/parallel.py) in the capture's order, over the whole capture (``analyze()``) or a window of it
(``export``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer.across.affinity import Affinity
from mcp_blackbox.analyzer.across.call_ids import CallIds
from mcp_blackbox.analyzer.across.clients import Clients
from mcp_blackbox.analyzer.across.executions import Duplicates
from mcp_blackbox.analyzer.across.patterns import Context, Patterns, endpoint_event
from mcp_blackbox.analyzer.across.repeated_runs import RanMoreThanOnce, RepeatedRuns
from mcp_blackbox.analyzer.across.retries import RETRY_WINDOW, Retries, add_gateway_services
from mcp_blackbox.analyzer.across.spool import Spool
from mcp_blackbox.analyzer.calls.classify import CAPTURE_WIDE, CaptureFacts, judge
from mcp_blackbox.analyzer.calls.gateway import gateway_sign
from mcp_blackbox.analyzer.calls.pair import Pairer, legacy_session_of_endpoint, scope_of
from mcp_blackbox.analyzer.calls.resumes import refused_resume
from mcp_blackbox.analyzer.calls.stdio_calls import stderr_of
from mcp_blackbox.analyzer.model.contract import DuplicateRecord, FindingRecord, RetryGroupRecord
from mcp_blackbox.analyzer.model.records import C2S, S2C, Call, Exchange, Finding, Message, Stage, Verdict
from mcp_blackbox.analyzer.model.vocabulary import Flag, Outcome, RetryOrigin
from mcp_blackbox.analyzer.read.decode import Decoded
from mcp_blackbox.analyzer.read.extract import Extracted
from mcp_blackbox.analyzer.read.load import LoadReport, ReadFigures
from mcp_blackbox.analyzer.read.parallel import decoded_exchanges
from mcp_blackbox.analyzer.read.time_range import TimeRange, files_to_read
from mcp_blackbox.analyzer.wire.inputs import expand_captures, passed_over
from mcp_blackbox.analyzer.wire.jsonrpc import MCP_REQUEST_HEADERS, is_mcp_method

DEFAULT_WINDOW = 600.0  # seconds of capture time `export` holds: longer than MCP calls and sessions' streams last
AWAIT_WINDOWS = 6  # how many windows the stream waits for a flow still open to bring what it announced
NEAR = 1.0  # seconds past a call in which look-alikes are read before it is linked (> retries.LOOKALIKE_NEAR)


class CallStream(ReadFigures):
    """The analysis as a stream of final calls, in the order they started.

    Everything that spans calls runs in the same stages as over a whole capture: messages paired in the
    order they happened, then verdicts (with what tools/list and initialize said), ids and clients, then
    retry links, then each group's safety and the writes run twice. With ``window=None`` each stage sees
    the whole capture before the next begins. With ``window=W`` (seconds of capture time) the stages run
    as the input advances, and a call is final, yielded and forgotten once nothing to come can change it:

    - flows are written when they end, so once a flow ending at ``t`` is read, every flow that began
      before ``t - W`` is in, if none stays open longer than W: messages older than that are paired;
    - a call is complete (its answers, its cancel, a resumed stream) W after it began;
    - its client is identified W later: whether the clients before it were idle when it began depends on
      what they sent after;
    - it is linked to its earlier attempts NEAR later, once the look-alikes around it are known;
    - it can no longer be joined by a later attempt RETRY_WINDOW after its end (at most W after its
      start): then its group's safety is judged and its duplicate executions checked, and it is final.

    A flow known to be still open holds everything back until it arrives (for AWAIT_WINDOWS windows at
    most): an HTTP+SSE session's event stream, which answers its POSTs, and the stream that carried a
    server's request, once the client's answer to it is read.

    Memory then depends on W and the rate of calls, not on the capture. What a window gives up: any other
    flow open longer than W (a resumed stream, a long tool call) is paired when it arrives, after calls
    that began later; client lineages and duplicate executions look back over the window, not the whole
    capture. ``tests/analyzer/test_windowed.py`` requires the same calls, groups and duplicates as the
    whole-capture analysis where nothing spans more (docs/ARCHITECTURE.md, "The analysis as a stream").

    With ``time_range`` (--since/--until) only the files that reach the range and its margins are decoded
    (``read.time_range.files_to_read``), every stage runs over all that is read, and the calls that
    started in the range are yielded, with the retry groups, duplicate executions, stream events and auth
    steps that touch it; calls that straddle an edge are listed in ``straddling``.

    Counts, skips and read problems are in ``report``; the rest of what ``Analysis`` holds is filled as
    the stream is read, and whole once it is exhausted.
    """

    def __init__(
        self,
        paths: Iterable[str | Path],
        *,
        window: float | None = None,
        keep_details: bool = False,
        report: LoadReport | None = None,
        time_range: TimeRange | None = None,
    ) -> None:
        self.paths = paths
        self.time_range = time_range
        self.straddling: list[tuple[str, str]] = []  # (call id, the edge it crosses: since or until)
        self.files_not_read: list[str] = []  # wholly outside the range and its margins: not decoded
        self.window = window
        self.keep_details = keep_details
        self.report = LoadReport() if report is None else report
        self.facts = CaptureFacts()
        self.exchanges: list[Exchange] = []  # whole analysis only: a windowed one counts them
        self.exchange_count = 0
        # RetryGroup and DuplicateExecution; a windowed stream writes their records (Settled) to disk as they
        # settle: the outputs list them after the calls, and held they would grow with the recording.
        self.retry_groups: list[Any] | Spool[Any] = [] if window is None else Spool()
        self.duplicate_executions: list[Any] | Spool[Any] = [] if window is None else Spool()
        self.stream_events: list[dict[str, Any]] = []
        self.auth_steps: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.findings: list[FindingRecord] = []  # named patterns across calls, once the stream is read
        self._endpoint_events: list[dict[str, Any]] = []  # HTTP+SSE streams' endpoint events, for the findings
        self.ran_more_than_once: list[RanMoreThanOnce] = []  # the writes run twice, once the stream is read
        self._judged_in_window = 0  # calls without an answer judged before the capture was read to its end
        self._gateways: dict[str, tuple[str, int]] = {}  # name -> (how the first response showed it, responses)
        self._legacy_streams: dict[str, str] = {}
        # What a flow still open will bring, and since when: an HTTP+SSE session's event stream (its POSTs
        # are answered there), the server's request that a client's answer names (sent on a stream not yet
        # ended). A windowed stream pairs nothing past the oldest of these, for AWAIT_WINDOWS at most.
        self._awaited: dict[tuple[str, ...], float] = {}
        self._legacy_sessions_read: set[str] = set()
        self._server_requests: set[tuple[str, str]] = set()  # (scope, id) of every request a server sent
        self._known: set[str] = set()
        self._without_times = 0
        self._messages: list[tuple[float, str, int, Message]] = []  # heap: time, direction, arrival
        self._timeline: list[Message] = []  # the whole analysis's messages, sorted once
        self._ready: list[Call] = []  # the whole analysis's calls, sorted once
        self._arrived = 0
        self._watermark = float("-inf")
        self._pairer = Pairer()
        self._paired = 0  # calls and orphans taken from the pairing so far
        self._waiting: list[tuple[float, int, int, Call]] = []  # heap: start, orphan, order; not complete
        self._complete: deque[Call] = deque()  # judged and identified, not linked
        self._linked: deque[Call] = deque()  # linked, not final
        self._ids = CallIds()
        self._clients = Clients(self.facts.versions)
        self._retries = Retries(self.facts)
        self._affinity = Affinity()
        self._duplicates = Duplicates(self.facts)
        self._patterns = Patterns(self.facts)
        self._repeated = RepeatedRuns(self.facts)
        self._services: dict[str, str] = {}
        self._number = 0

    def final_calls(self) -> Iterator[Call]:
        """The calls as they become final (what an export reads: see ``outputs.export.Analyzed``)."""
        return iter(self)

    def __iter__(self) -> Iterator[Call]:
        window = self.window
        step = window / 8 if window is not None else None  # a round per eighth of a window: few, and small
        last_round = float("-inf")
        files = expand_captures(self.paths)
        if self.time_range is not None:
            files, self.files_not_read = files_to_read(files, self.time_range)
        for decoded in decoded_exchanges(files, self.report, keep_details=self.keep_details):
            self._add(decoded)
            if window is not None and step is not None and self._watermark - last_round >= step:
                last_round = self._watermark
                yield from self._in_range(self._round(self._frontier()))
        yield from self._in_range(self._round(float("inf")))
        self.notes += passed_over(self.paths)
        self.notes += [_gateway_note(name, how, count) for name, (how, count) in self._gateways.items()]
        self.notes += self._affinity.notes()
        if self._judged_in_window:
            self.notes.append(_window_note(self._judged_in_window, self.window))
        if self._without_times:
            self.notes.append(
                f"{self._without_times} event stream(s) without per-event times (recorded without the addon, or "
                "content-encoded): their events are dated at the end of the response, and a cut stream may have "
                "lost its body"
            )
        context = Context(self.facts, self.auth_steps, self.stream_events, tuple(self.notes), self._endpoint_events)
        self.findings = self._patterns.finish(context)
        self.ran_more_than_once = self._repeated.entries()

    @property
    def analyzed(self) -> int:
        return self.exchange_count

    def _in_range(self, calls: Iterator[Call]) -> Iterator[Call]:
        """The final calls that started in the range (all of them without one); those that straddle an
        edge are noted, in range or not: they are where an incident's cut may hide something."""
        time_range, patterns = self.time_range, self._patterns
        for call in calls:
            if time_range is not None and (edge := time_range.edge_crossed(call.request.t, call.t_end)) is not None:
                self.straddling.append((call.call_id, edge))
            if time_range is None or time_range.contains(call.request.t):
                patterns.add(call)
                yield call

    def _touches_range(self, calls: Iterable[Call]) -> bool:
        """Whether a group of calls (a retry chain, a write run twice) has a call in the range."""
        return self.time_range is None or any(self.time_range.contains(c.request.t) for c in calls)

    def _time_in_range(self, t: float) -> bool:
        return self.time_range is None or self.time_range.contains(t)

    def range_record(self) -> dict[str, Any] | None:
        """What the output says of the range: since, until, the calls straddling an edge, the files not
        decoded; None without --since/--until."""
        if self.time_range is None:
            return None
        return {
            **self.time_range.record(),
            "straddling": [{"call_id": call_id, "edge": edge} for call_id, edge in self.straddling],
            "captures_not_read": self.files_not_read,
        }

    @property
    def call_count(self) -> int:
        """Calls judged so far (every call, once the stream is exhausted)."""
        return self._number

    def _add(self, decoded: Decoded) -> None:
        exchange, extracted = decoded.exchange, decoded.extracted
        end = exchange.t_end or exchange.t_error or exchange.t_response or exchange.t_request
        self._watermark = max(self._watermark, end)
        if decoded.auth is not None:
            # Analyzed, not skipped: part of the story (a 401, then credentials), though no call.
            if self._time_in_range(exchange.t_request):
                self.auth_steps.append(decoded.auth)
            self._count(exchange)
            return
        reason = _mcp_reason(exchange, extracted, self._known)
        if reason is None:
            self.report.skip(exchange.source, exchange.index, exchange.flow_id, _not_mcp(exchange, extracted))
            return
        self._known.add(exchange.endpoint)
        self._count(exchange)
        if extracted.endpoint is not None and (session := legacy_session_of_endpoint(extracted.endpoint)):
            self._legacy_streams[exchange.flow_id] = session
        if extracted.endpoint is not None and self._time_in_range(exchange.t_request):
            self._endpoint_events.append(endpoint_event(exchange, extracted.endpoint))
        if decoded.without_times:
            self._without_times += 1
        exchange.scope = scope_of(exchange, self._legacy_streams)
        exchange.error_text = decoded.error_text
        if (refused := refused_resume(exchange, len(extracted.messages))) is not None:
            # It carries no message for pairing to see: the verdict of the stream it tried to resume names it.
            self.facts.refused_resumes.setdefault(exchange.scope, []).append(refused)
        if exchange.session_id and exchange.method in ("GET", "DELETE"):
            # The client still acts in the session when it opens a stream or ends the session: it lasts until
            # then (a stream left open after the server forgot the session does not keep it alive).
            self._clients.touch(exchange.scope, exchange.t_request, exchange.client_process)
        if (sign := gateway_sign(exchange)) is not None:
            how, count = self._gateways.get(sign[0], (sign[1], 0))
            self._gateways[sign[0]] = (how, count + 1)
        if self.window is not None:
            self._await(exchange, extracted)
        if self.window is None:
            self._timeline.extend(extracted.messages)
            return
        for message in extracted.messages:
            # Requests sort before answers stamped with the same instant ("client->server" < "server->client"),
            # then by arrival.
            self._arrived += 1
            heapq.heappush(self._messages, (message.t, message.direction, self._arrived, message))

    def _await(self, exchange: Exchange, extracted: Extracted) -> None:
        """Note what this exchange says a flow still open will bring, and what it brings itself."""
        awaited = self._awaited
        if extracted.endpoint is not None and (session := legacy_session_of_endpoint(extracted.endpoint)):
            self._legacy_sessions_read.add(session)
            awaited.pop(("sse", session), None)
        elif (session := exchange.legacy_session) and session not in self._legacy_sessions_read:
            awaited.setdefault(("sse", session), exchange.t_request)
        for message in extracted.messages:
            key = (exchange.scope, message.key_id)
            if message.direction == S2C and message.kind == "request":
                self._server_requests.add(key)
                awaited.pop(("answer", *key), None)
            elif (
                message.direction == C2S
                and message.kind in ("result", "error")
                and message.id is not None
                and key not in self._server_requests
            ):
                awaited.setdefault(("answer", *key), message.t)

    def _frontier(self) -> float:
        """Messages older than this are all in: a window before the latest end read, or what is awaited."""
        assert self.window is not None
        frontier = self._watermark - self.window
        oldest = self._watermark - AWAIT_WINDOWS * self.window
        for key in [k for k, since in self._awaited.items() if since < oldest]:
            del self._awaited[key]  # longer than a stream is waited for: paired without it
        return min(frontier, *self._awaited.values()) if self._awaited else frontier

    def _count(self, exchange: Exchange) -> None:
        self.exchange_count += 1
        if self.window is None:
            self.exchanges.append(exchange)

    def _round(self, frontier: float) -> Iterator[Call]:
        """Every stage as far as ``frontier`` (messages older than it are all in) allows."""
        window = self.window or 0.0
        complete_before = frontier - window
        identify_before = complete_before - window
        link_before = identify_before - NEAR
        final_before = link_before - RETRY_WINDOW - window
        self._pair(frontier)
        self._judge(complete_before)
        self._clients.link(identify_before)
        self._link(link_before)
        yield from self._settle(final_before)

    def _pair(self, before: float) -> None:
        pairer = self._pairer
        if self.window is None:
            # The whole capture at once: one list sorted twice (stably: by direction, then by time) holds
            # less than a heap of a tuple per message.
            timeline, self._timeline = self._timeline, []
            timeline.sort(key=attrgetter("direction"))
            timeline.sort(key=attrgetter("t"))
            for message in timeline:
                pairer.feed(message)
            del timeline
        else:
            messages = self._messages
            while messages and messages[0][0] < before:
                pairer.feed(heapq.heappop(messages)[3])
        # In the order the whole analysis sorts them: by start, a call before an orphan answer of the same
        # instant, then as paired.
        paired = pairer.out.calls
        orphans = [_orphan_call(m) for m in pairer.out.orphans if not _is_stream_event(m)]
        self.stream_events += [
            _stream_event(m) for m in pairer.out.orphans if _is_stream_event(m) and self._time_in_range(m.t)
        ]
        pairer.out.calls, pairer.out.orphans = [], []
        if self.window is None:
            self._pairer = Pairer()  # everything is paired: its indexes are not needed again
            self._ready = sorted(paired + orphans, key=lambda c: c.request.t)
            return
        for orphan, calls in ((0, paired), (1, orphans)):
            for call in calls:
                self._paired += 1
                heapq.heappush(self._waiting, (call.request.t, orphan, self._paired, call))

    def _judge(self, before: float) -> None:
        """Verdicts (after the facts every call of this round brings), numbers, ids; each call to its client."""
        waiting, ready = self._waiting, self._ready
        self._ready = []
        while waiting and waiting[0][0] < before:
            ready.append(heapq.heappop(waiting)[3])
        if not ready:
            return
        for call in ready:
            gather_facts_of(call, self.facts)
        for call in ready:
            if call.verdict is None:
                if call.exchange.stdio is not None:
                    call.stderr = stderr_of(call)  # before the verdict, which reads them (STDERR_DURING_CALL)
                call.verdict = judge(call, self.facts)
        if self.window is not None and before != float("inf"):
            self._say_the_window_judged(ready, self.window)
        for call in ready:
            self._number += 1
            call.number = self._number
            self._ids.assign(call)
            self._clients.feed(call)
            self._affinity.feed(call)
            self._pairer.forget_flow(call.exchange.flow_id)
        if self.window is None:  # every call has its id: what gave them is not needed again
            self._ids = CallIds()
        self._complete.extend(ready)

    def _say_the_window_judged(self, calls: list[Call], window: float) -> None:
        """A call judged before the capture was read to its end, whose verdict says what the whole capture
        lacks (an answer that never came, a stream not resumed): the window, not the capture, said so."""
        for call in calls:
            if call.verdict is not None and any(line.endswith(CAPTURE_WIDE) for line in call.verdict.evidence):
                self._judged_in_window += 1
                call.found(Finding(Stage.PAIRING, _window_line(window)))

    def _link(self, before: float) -> None:
        complete, ready = self._complete, []
        while complete and complete[0].request.t < before:
            ready.append(complete.popleft())
        if ready:
            for call, finding in self._retries.take(ready):
                call.found(finding)
            self._linked.extend(ready)

    def _settle(self, before: float) -> Iterator[Call]:
        for group in self._retries.settle(before):
            for call, link in group.links_of_members():
                call.link = link
            for call, finding in group.findings:
                call.found(finding)
            add_gateway_services(self._services, [group])
            if not self._touches_range(group.members):
                continue  # linked all the same: its attempts in the margin are what links those in range
            self._repeated.chain_settled(group)
            if self.window is None:
                self.retry_groups.append(group)
            else:
                self.retry_groups.append(Settled(group.origin, group.record()))
        linked, duplicates = self._linked, self._duplicates
        while linked and linked[0].request.t < before and not self._retries.is_open(linked[0]):
            call = linked.popleft()
            if (ran_again := duplicates.check(call, self._services)) is not None:
                call.found(ran_again)
            self._pairer.forget_call(call)
            self._ids.forget_flow(call.exchange.flow_id)
            yield call
        window = self.window if self.window is not None else 0.0
        for found in duplicates.settle(before - RETRY_WINDOW - window):
            if self._touches_range(found.calls):
                self._repeated.executions_settled(found)
                self.duplicate_executions.append(found if self.window is None else Settled(None, found.record()))
        if self.window is not None:  # a whole analysis keeps every chain until its entries are read
            self._repeated.forget(before - 2 * RETRY_WINDOW - window, duplicates.open_calls())
            self._clients.forget(before)


@dataclass(frozen=True, slots=True)
class Settled:
    """A retry group or a duplicate execution of a windowed analysis, as its export record: its calls
    are gone."""

    origin: RetryOrigin | None
    recorded: RetryGroupRecord | DuplicateRecord

    def record(self) -> RetryGroupRecord | DuplicateRecord:
        return self.recorded


def _window_line(window: float) -> str:
    return (
        f"judged with {window:g} s of the capture read past it (--window): an answer on a flow that stayed "
        "open longer comes later in the recording and is not joined to this call"
    )


def _window_note(count: int, window: float | None) -> str:
    return (
        f"{count} call(s) without an answer were judged before the capture was read to its end (--window "
        f"{window or 0:g} s): an answer on a flow open longer than that is not joined to them; --window 0 "
        "reads the whole capture first"
    )


def _gateway_note(name: str, how: str, count: int) -> str:
    return (
        f"a gateway is in the path: {name} ({how}; {count} response(s) show it). What it did behind this "
        "recorder (its own retries, the attempts it sent upstream, its timeouts) is not in the capture: a "
        "write it answered 502 or 504 may have run, more than once"
    )


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
    if (
        exchange.stdio is not None
    ):  # a line on stdout that is not JSON while no call waited (analyzer/read/stdio_load.py)
        return message.kind == "invalid" and message.id is None
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
    why = f"a response with id {message.id!r} answers no request in {scope}"
    verdict = Verdict(Outcome.INVALID_ENVELOPE, (why,), (Flag.ORPHAN_RESPONSE,))
    call = Call(request=message, scope=scope, verdict=verdict)
    call.add_exchange(message.exchange)
    return call


def _from_stdio(exchange: Exchange, extracted: Extracted, known: set[str]) -> bool:
    """A line between a client and the MCP server record --stdio ran."""
    return exchange.stdio is not None


def _speaks_jsonrpc(exchange: Exchange, extracted: Extracted, known: set[str]) -> bool:
    """JSON-RPC messages with an MCP method, or answers alone (a client's reply to a server request carries
    no method: JSON-RPC is enough)."""
    methods = {m.method for m in extracted.messages if m.method is not None}
    return extracted.claims_jsonrpc and (not methods or any(is_mcp_method(m) for m in methods))


def _announces_endpoint(exchange: Exchange, extracted: Extracted, known: set[str]) -> bool:
    """An HTTP+SSE stream's endpoint event."""
    return extracted.endpoint is not None


def _has_mcp_headers(exchange: Exchange, extracted: Extracted, known: set[str]) -> bool:
    return any(name in exchange.request_headers for name in MCP_REQUEST_HEADERS) or bool(exchange.session_id)


def _endpoint_known(exchange: Exchange, extracted: Extracted, known: set[str]) -> bool:
    """An endpoint already seen speaking MCP."""
    return exchange.endpoint in known


# Why an exchange counts as MCP: the first sign it shows, in this order.
_MCP_SIGNS: tuple[tuple[Callable[[Exchange, Extracted, set[str]], bool], str], ...] = (
    (_from_stdio, "a stdio capture"),
    (_speaks_jsonrpc, "JSON-RPC messages"),
    (_announces_endpoint, "HTTP+SSE endpoint event"),
    (_has_mcp_headers, "MCP headers"),
    (_endpoint_known, "an endpoint seen speaking MCP"),
)


def _mcp_reason(exchange: Exchange, extracted: Extracted, known: set[str]) -> str | None:
    """Why ``exchange`` is MCP traffic (_MCP_SIGNS); None: it is not."""
    return next((reason for shows, reason in _MCP_SIGNS if shows(exchange, extracted, known)), None)


def gather_facts_of(call: Call, facts: CaptureFacts) -> None:
    """What one call's answer tells every verdict: the tools it lists, the version it negotiated, the server."""
    if call.request.kind != "request":
        return
    result = next((r.body["result"] for r in call.responses if r.kind == "result" and r.body), None)
    if not isinstance(result, dict):
        return
    if call.method == "tools/list":
        _gather_tools(result, facts)
    elif call.method == "initialize":
        _gather_version(call, result, facts)
    if call.method in ("initialize", "server/discover"):
        _gather_server(result, facts)


def _gather_tools(result: dict[str, Any], facts: CaptureFacts) -> None:
    """Each named tool of a tools/list result, by name (a later listing of a name replaces it)."""
    if not isinstance(result.get("tools"), list):
        return
    for tool in result["tools"]:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            facts.tools[tool["name"]] = tool


def _gather_version(call: Call, result: dict[str, Any], facts: CaptureFacts) -> None:
    """The protocol version an initialize result negotiated, for the call's scope."""
    if isinstance(result.get("protocolVersion"), str):
        facts.versions[call.scope] = result["protocolVersion"]


def _gather_server(result: dict[str, Any], facts: CaptureFacts) -> None:
    """The server's name/version, from the serverInfo of an initialize or server/discover result."""
    info = result.get("serverInfo")
    if isinstance(info, dict) and info.get("name"):
        facts.servers.add(f"{info['name']}/{info.get('version', '?')}")
