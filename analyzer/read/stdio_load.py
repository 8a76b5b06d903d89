"""A stdio capture (``mcp-blackbox record --stdio``) as the analysis's records: exchanges and their messages.

The capture is one run of one server, so one scope, ``stdio:<capture file name>:<server pid>``, like an MCP
session. Each line the client wrote on the server's stdin is an exchange of its own (method ``STDIN``), and
so is each line the server wrote on its stdout (``STDOUT``); both have the endpoint ``stdio://<command>``
(``records.STDIO_SCHEME``) and refer to the session (``Exchange.stdio``, analyzer/calls/stdio_calls.py), which
keeps the server's stderr lines and how the run ended. Their messages are paired by id in the scope, as an
HTTP session's are; the answer arrives on another exchange, as on an HTTP+SSE session's stream.

A stdin line's exchange ends when its request was answered (the first stdout line with its id), else when
the session ended for it (the server's exit, its stdout closing, the client closing its stdin: what
``StdioSession.end_after`` says), else with the capture. The exchanges are yielded in the order they end,
as a flow file holds flows, so a windowed analysis (analyzer/across/call_stream.py) reads them as it reads flows.

A stdout line that is not JSON (a ``print`` or ``console.log`` on the protocol's channel) breaks the call
that was waiting for an answer when it was written: its message is put on that call's stdin exchange, where
the pairing gives it to that call (an unreadable answer on a request's own exchange answers that request).
A server's notification (a log message) sent while exactly one request waited goes to that request the same
way, as one on an HTTP request's stream belongs to it.
With several calls waiting, the oldest gets it (the one the server has had longest; a line written for a
later one cannot be told from it) and the evidence says which others were waiting. With none waiting it
breaks no call: it is a stream event of the session. A line the capture kept only the head of
(``truncated``, past 1 MiB: the client got it whole) is read from its head: its id where the head has it
(else, like a line that is not JSON, the oldest waiting call's), a result whose content is taken to be
there; the call is flagged TRUNCATED_IN_CAPTURE.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer.model.records import C2S, S2C, STDIO_SCHEME, Exchange, Message
from mcp_blackbox.analyzer.model.slim import MISSING, OMITTED, ResultShape
from mcp_blackbox.analyzer.model.stdio_session import KEPT_CHARS, StderrLine, StdioSession
from mcp_blackbox.analyzer.read.decode import Decoded
from mcp_blackbox.analyzer.read.extract import STRICT_JSON, Extracted, message_from
from mcp_blackbox.analyzer.read.load import LoadReport, process_of
from mcp_blackbox.analyzer.wire import stdio_capture as fmt
from mcp_blackbox.analyzer.wire.jsonrpc import PROGRESS

TIE_STEP = 1e-6  # seconds between lines of one pipe that one read brought (see _Reader.read)
STDIN_METHOD = "STDIN"
STDOUT_METHOD = "STDOUT"
# What a cut answer's head tells: its id when written before the result (the Python SDK writes
# {"jsonrpc":"2.0","id":N,"result":...}; the TypeScript SDK writes the id last, past the head).
HEAD_ID = re.compile(r'^\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,\s*"result"\s*:')
HEAD_RESULT = re.compile(r'"result"\s*:\s*\{')
HEAD_IS_ERROR = re.compile(r'"isError"\s*:\s*true')


def is_stdio_capture(path: str) -> bool:
    return os.path.isfile(path) and fmt.is_stdio_capture(path)


@dataclass(slots=True)
class _Line:
    record: dict[str, Any]
    order: int  # the record's place in the file
    t: float = 0.0  # its time: the record's, or a microsecond after the line read with it


def stdio_decoded(path: str, report: LoadReport, *, keep_details: bool = False) -> Iterator[Decoded]:
    """The capture's exchanges, decoded, in the order they ended; what was read goes into ``report``.

    The file is read once, record by record: each line's messages are extracted as it is read and its bytes
    dropped (unless ``keep_details``), so what is held is the slimmed messages, as for a flow file."""
    source = str(path)
    report.sources.append(source)
    reading = fmt.CaptureReading(source)
    reader: _Reader | None = None
    try:
        for order, record in enumerate(fmt.read_capture(source, reading)):
            if reader is None:
                assert reading.header is not None  # read_capture yields nothing before its header
                reader = _Reader(source, reading.header, keep_details)
            reader.take(record, order)
    except OSError as e:
        report.problem(source, f"cannot open: {e.strerror or e}")
        return
    size = os.path.getsize(source)
    for problem in reading.problems:
        report.problem(source, f"line {problem.line}: {problem.reason}", offset=problem.offset)
    if reader is None and reading.header is not None:  # a header and nothing else
        reader = _Reader(source, reading.header, keep_details)
    for item in reader.finish() if reader is not None else []:
        report.flows_read += 1
        yield item
    report.bytes_read += size


def stdio_exchanges(path: str, *, keep_details: bool = True) -> Iterator[Exchange]:
    """The capture's exchanges alone (a report's details read the capture again for the lines' bytes)."""
    for decoded in stdio_decoded(path, LoadReport(), keep_details=keep_details):
        yield decoded.exchange


def _session(source: str, header: dict[str, Any], spawn: dict[str, Any] | None) -> StdioSession:
    command = header.get("command")
    argv = [str(a) for a in command] if isinstance(command, list) else [str(command)]
    pid = spawn.get("pid") if spawn is not None and isinstance(spawn.get("pid"), int) else header.get("pid")
    scope = sys.intern(f"stdio:{Path(source).name}:{pid}")
    client = process_of(header.get("client_process"))
    session = StdioSession(source, scope, argv, shlex.join(argv), pid if isinstance(pid, int) else None, client)
    if spawn is not None and spawn.get("pid") is None:
        session.spawn_error = str(spawn.get("error") or "not started")
    return session


class _Reader:
    """The capture's records as they are read (``take``), then the lines of stdin and stdout in time order, as
    exchanges, with the waiting calls tracked by id (``finish``)."""

    def __init__(self, source: str, header: dict[str, Any], keep_details: bool) -> None:
        self.source = source
        self.header = header
        self.keep_details = keep_details
        self.session: StdioSession | None = None  # made at the spawn record (or the first line without one)
        self.early: list[tuple[dict[str, Any], int]] = []  # records before the spawn (a signal)
        self.last: dict[str, float] = {}  # per pipe, the time of its last line
        self.lines: list[tuple[float, int, Decoded]] = []
        # (direction of the request, id key) -> the exchange that carried the request, oldest first
        self.waiting: dict[tuple[str, str], Exchange] = {}
        self.endpoint = self.seed = ""  # the session's (``_start``)

    def _start(self, spawn: dict[str, Any] | None) -> StdioSession:
        session = self.session = _session(self.source, self.header, spawn)
        self.endpoint = STDIO_SCHEME + session.command_text
        self.seed = f"stdio:{self.header.get('t')}:{self.header.get('pid')}:{session.pid}"
        early, self.early = self.early, []
        for record, order in early:
            self.take(record, order)
        return session

    def take(self, record: dict[str, Any], order: int) -> None:
        """One record as it is read: a line on stdin or stdout, a stderr line, or a pipe's end or the exit."""
        session = self.session if self.session is not None else self._begin(record, order)
        if session is None:
            return
        t = record.get("t")
        if not isinstance(t, int | float):
            return
        kind, stream = record.get("type"), record.get("stream")
        if kind == fmt.LINE and stream in (fmt.STDIN, fmt.STDOUT):
            self._take_protocol_line(record, order, stream, t)
        elif kind == fmt.LINE and stream == fmt.STDERR:
            session.add_stderr(_stderr_line(record, t))
        else:
            _note_run_end(session, record, t)

    def _begin(self, record: dict[str, Any], order: int) -> StdioSession | None:
        """The session for a record read before there was one, or None when nothing more is to be taken from the
        record: the spawn record makes the session; a record other than a line (a signal) waits in ``early``
        until it is made; a line makes it without the spawn record's facts (a capture that has none)."""
        kind = record.get("type")
        if kind == fmt.SPAWN:
            self._start(record)
            return None
        if kind != fmt.LINE:
            self.early.append((record, order))
            return None
        return self._start(None)

    def _take_protocol_line(self, record: dict[str, Any], order: int, stream: str, t: float) -> None:
        # A pipe's lines keep the file's order; lines that came in one read share its time: they are
        # spaced a microsecond apart, so that the analysis keeps their order.
        at = float(t)
        if stream in self.last and at <= self.last[stream]:
            at = self.last[stream] + TIE_STEP
        self.last[stream] = at
        self.lines.append((at, order, self._line(_Line(record, order, at))))

    def finish(self) -> list[Decoded]:
        """The exchanges in the order they ended, once every record is in."""
        session = self.session if self.session is not None else self._start(None)
        # In time order across the two pipes: which requests wait, what answers them, what a bad line breaks.
        self.lines.sort(key=lambda line: (line[0], line[1]))
        for _, _, line in self.lines:
            for message in line.extracted.messages:
                self._track(message, line.exchange)
        for exchange in self.waiting.values():
            ended = session.end_after(exchange.t_request)
            if ended is None:
                exchange.t_end = None  # still waiting when the capture ended
            else:
                _, at, words = ended
                exchange.t_end, exchange.error, exchange.t_error = at, words, at
        out = [line[2] for line in self.lines]
        out.sort(key=lambda d: (_end(d.exchange), d.exchange.t_request, d.exchange.index))
        return out

    def _exchange(self, line: _Line, method: str, payload: bytes) -> Exchange:
        session = self.session
        assert session is not None  # take() makes it before any line
        t = line.t
        digest = hashlib.blake2b(f"{self.seed}:{line.order}".encode(), digest_size=16).hexdigest()
        flow_id = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:]}"
        keep = payload if self.keep_details else None
        exchange = Exchange(
            flow_id=flow_id,
            source=self.source,
            index=line.order,
            method=method,
            endpoint=self.endpoint,
            path=session.command_text,
            query_string="",
            request_headers={},
            request_body=keep if method == STDIN_METHOD else None,
            client_conn=None,
            t_request=t,
            response_body=keep if method == STDOUT_METHOD else None,
            t_end=t,
            stdio=session,
            client_process=session.client,
        )
        exchange.scope = session.scope
        if self.keep_details:
            # What the report's details show of the line (analyzer/review/report.py).
            exchange.stream = {"stdio_line": _line_facts(line.record)}
        return exchange

    def _line(self, line: _Line) -> Decoded:
        record = line.record
        payload = fmt.line_payload(record)
        stdin = record["stream"] == fmt.STDIN
        exchange = self._exchange(line, STDIN_METHOD if stdin else STDOUT_METHOD, payload)
        direction = C2S if stdin else S2C
        out = Extracted()
        text = payload.decode("utf-8", "replace")
        if record.get("truncated"):
            message = self._cut_answer(exchange, text, record) if not stdin else None
            if message is None:
                problem = f"cut in the capture after {len(payload)} of {record.get('bytes')} bytes: {text[:120]!r}"
                message = Message(exchange, direction, "invalid", None, None, None, exchange.t_request, problem)
            out.messages.append(message)
        elif text.strip():
            self._read_text(out, text, exchange, direction, "b64" in record)
        return Decoded(exchange, out, None, None, False)

    def _read_text(self, out: Extracted, text: str, exchange: Exchange, direction: str, not_utf8: bool) -> None:
        t = exchange.t_request
        try:
            value = STRICT_JSON.decode(text)
        except (ValueError, RecursionError) as e:
            why = "bytes that are not UTF-8" if not_utf8 else str(e)
            out.messages.append(
                Message(exchange, direction, "invalid", None, None, None, t, f"not JSON: {why}: {text[:120]!r}")
            )
            return
        items = value if isinstance(value, list) else [value]
        if not items:
            out.messages.append(Message(exchange, direction, "invalid", None, None, None, t, "empty batch"))
        for item in items:
            out.claims_jsonrpc = out.claims_jsonrpc or (isinstance(item, dict) and "jsonrpc" in item)
            out.messages.append(message_from(item, exchange, direction, t, whole=self.keep_details))

    def _cut_answer(self, exchange: Exchange, head: str, record: dict[str, Any]) -> Message | None:
        """A stdout line cut in the capture: a result, read from its head (see the module's doc)."""
        if not HEAD_RESULT.search(head):
            return None
        found = HEAD_ID.match(head)
        rpc_id: Any = None
        if found is not None:
            rpc_id = STRICT_JSON.decode(found.group(1))
        shape = ResultShape(
            kind="object",
            result_type=MISSING,
            content="array",
            content_count=1,
            first_text=None,
            is_error=True if HEAD_IS_ERROR.search(head[:4096]) else MISSING,
            structured=OMITTED if '"structuredContent"' in head else MISSING,
        )
        problem = f"cut in the capture after {len(head.encode())} of {record.get('bytes')} bytes"
        return Message(exchange, S2C, "result", rpc_id, None, None, exchange.t_request, problem, None, shape)

    def _track(self, message: Message, exchange: Exchange) -> None:
        """Which requests wait for an answer; an answer ends its request's exchange; a line that answers
        nothing readable goes to the oldest waiting call."""
        if message.kind == "request":
            self._wait_for_answer(message, exchange)
        elif message.kind == "notification":
            self._place_notification(message)
        elif message.id is not None:
            self._answer(message, exchange)
        elif message.direction == S2C:
            self._give_to_oldest_waiting(message)

    def _wait_for_answer(self, request: Message, exchange: Exchange) -> None:
        self.waiting[(request.direction, request.key_id)] = exchange
        if request.direction == C2S:
            assert self.session is not None
            self.session.request_times.append(request.t)

    def _place_notification(self, message: Message) -> None:
        # A server's log or other notification (progress goes by its token) belongs to the request it was
        # sent during, when only one waited: on HTTP, to the request whose stream carried it.
        requests = [e for key, e in self.waiting.items() if key[0] == C2S]
        if message.direction == S2C and len(requests) == 1 and message.method != PROGRESS:
            message.exchange = requests[0]

    def _answer(self, answer: Message, exchange: Exchange) -> None:
        """An answer with an id ends the exchange of the request it answers (the opposite way's)."""
        opposite = S2C if answer.direction == C2S else C2S
        request = self.waiting.pop((opposite, answer.key_id), None)
        if request is not None and request is not exchange:
            request.t_end = answer.t

    def _give_to_oldest_waiting(self, message: Message) -> None:
        """A server's message with no id to pair it by (a line that is not JSON, a cut answer whose head lacks
        the id): the oldest waiting client request's; with none waiting it breaks no call."""
        pending = [(key, e) for key, e in self.waiting.items() if key[0] == C2S]
        if not pending:
            return  # breaks no call: a stream event of the session (analyzer/across/call_stream.py)
        (key, oldest), others = pending[0], pending[1:]
        if message.kind == "result":  # a cut answer without its id: the oldest waiting call's
            del self.waiting[key]
            oldest.t_end = message.t
            message.problem = f"{message.problem}; its id is not in the head: taken for the oldest waiting request's"
        elif others:
            ids = ", ".join(_shown_id(k) for k, _ in others)
            message.problem = (
                f"{message.problem}; {len(pending)} requests were waiting: the oldest is taken (the others: {ids})"
            )
        message.exchange = oldest


def _stderr_line(record: dict[str, Any], t: float) -> StderrLine:
    """What is kept of a stderr line: its head, and whether it was longer (or the capture cut it)."""
    text = fmt.line_payload(record).decode("utf-8", "replace")
    t_first = record.get("t_first")
    first = t_first if isinstance(t_first, int | float) else t
    cut = len(text) > KEPT_CHARS or bool(record.get("truncated"))
    return StderrLine(t, first, text[:KEPT_CHARS], cut)


def _note_run_end(session: StdioSession, record: dict[str, Any], t: float) -> None:
    """A pipe's end or the server's exit (the first of each counts); any other record is not kept."""
    kind, stream = record.get("type"), record.get("stream")
    if kind == fmt.EOF and stream == fmt.STDIN and session.stdin_eof is None:
        session.stdin_eof = t
    elif kind == fmt.EOF and stream == fmt.STDOUT and session.stdout_eof is None:
        session.stdout_eof = t
    elif kind == fmt.SIGNAL and session.signaled_t is None:
        session.signaled_t = t
    elif kind == fmt.EXIT and session.exit_t is None:
        session.exit_t = t
        session.exit_code = record.get("code")
        session.exit_signal = record.get("signal")


def _shown_id(key: tuple[str, str]) -> str:
    return key[1].partition(":")[2] or key[1]


def _end(exchange: Exchange) -> float:
    return exchange.t_end or exchange.t_error or exchange.t_request


def _line_facts(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "stream": record.get("stream"),
        "t_first": record.get("t_first"),
        "bytes": record.get("bytes"),
        "truncated": bool(record.get("truncated")),
        "not_utf8": "b64" in record,
    }
