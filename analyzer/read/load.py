"""Reading flow files into Exchange records, one flow at a time.

The tnetstring records are decoded directly and only in the parts the analyzer
reads, without building mitmproxy Flow objects. Nothing read is lost
silently: a flow that is not analyzed is listed in ``skipped`` with its reason
(so is a record damaged inside, whose length still leads to the next record),
and a file that stops being readable is listed in ``problems`` with the offset
and the reason, after every flow before that point has been read.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
import sys
import uuid
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mitmproxy.version import FLOW_FORMAT_VERSION

from mcp_blackbox.analyzer.model.identity import ClientProcess
from mcp_blackbox.analyzer.model.records import Exchange
from mcp_blackbox.analyzer.read.stream_times import encoded_event_times
from mcp_blackbox.analyzer.wire.metadata import METADATA_KEY
from mcp_blackbox.analyzer.wire.tnetstring_reader import (
    ENCODED,
    FLOW_FIELDS,
    FLOW_ID,
    Encoded,
    RecordCutShort,
    RecordError,
    Want,
    decode,
    read_record,
    record_framed,
)

# A HAR entry's custom field (HAR 1.2 allows names starting with "_") in which `export --format har` keeps what
# HAR has no place for (analyzer/outputs/har_export.py); read back by har_entry_state.
RECORDED_FIELD = "_mcp_blackbox"
# A request's or a response's exact times, which export --format har keeps in RECORDED_FIELD (_put_back).
RECORDED_TIMES = ("timestamp_start", "timestamp_end")
# What the analysis reads of the addon's stream record (the per-chunk list is for the report).
STREAM_FIELDS = ("ended", "error", "end_time", "event_times", "bytes", "dropped_bytes")
# Without keep_all, what _exchange reads and no more (most of a record is connection details and headers'
# bytes); the chunk times only an encoded stream needs are kept encoded until then.
ANALYSIS_FIELDS: Want = {
    **FLOW_FIELDS,
    "request": dict.fromkeys(
        ("method", "scheme", "host", "port", "path", "headers", "content", "timestamp_start"), True
    ),
    "response": dict.fromkeys(("status_code", "headers", "content", "timestamp_start", "timestamp_end"), True),
    "metadata": {
        METADATA_KEY: {
            "stream": {**dict.fromkeys(STREAM_FIELDS, True), "chunks": ENCODED},
            "client_process": True,
            "earlier_connections": True,
        }
    },
}


@dataclass
class LoadReport:
    """What was read, what was passed over and why."""

    flows_read: int = 0
    bytes_read: int = 0  # over all files, up to the last record read: for a progress line
    skipped: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def skip(self, source: str, index: int, flow_id: str | None, reason: str) -> None:
        self.skipped.append({"source": source, "index": index, "flow_id": flow_id, "reason": reason})

    def problem(self, source: str, reason: str, *, offset: int | None = None, flows_read: int = 0) -> None:
        self.problems.append({"source": source, "reason": reason, "offset": offset, "flows_read": flows_read})


class ReadFigures:
    """What was read, for anything that holds its LoadReport as ``report`` (an analysis, a call stream)."""

    report: LoadReport

    @property
    def flows_read(self) -> int:
        return self.report.flows_read

    @property
    def skipped(self) -> list[dict[str, Any]]:
        return self.report.skipped

    @property
    def read_problems(self) -> list[dict[str, Any]]:
        return self.report.problems


def read_exchanges(
    paths: Sequence[str | Path], report: LoadReport, *, keep_all: bool = False, only: Container[str] | None = None
) -> Iterator[Exchange]:
    """``keep_all``: every header and the whole stream record, for a report's details. ``only``: the flows with
    these ids alone; every other record is stepped over once its id is read."""
    for path in paths:
        source = str(path)
        report.sources.append(source)
        if os.path.isdir(path):  # analyzer/wire/inputs.py expands a directory to its capture files: it had none
            report.problem(source, "a directory without a flow file or a stdio capture in it")
            continue
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below, after a generator that may stop early
        except OSError as e:
            report.problem(source, f"cannot open: {e.strerror or e}")
            continue
        with handle:
            before = report.bytes_read
            yield from _read_file(handle, source, report, keep_all, before, only=only)
            report.bytes_read = before + os.fstat(handle.fileno()).st_size


def _read_file(
    handle: io.BufferedReader,
    source: str,
    report: LoadReport,
    keep_all: bool,
    before: int = 0,
    *,
    end: int | None = None,
    index: int = 0,
    only: Container[str] | None = None,
) -> Iterator[Exchange]:
    """The flows from the handle's position on. ``end`` and ``index``: a segment of a flow file
    (analyzer/read/parallel.py), from a record that starts at the handle's position and is the file's
    ``index``th, up to the record that starts at ``end``, as the whole file's reading reads them."""
    if handle.tell() == 0 and (other := _not_flow_records(handle, source, report, keep_all)) is not None:
        yield from other
        return
    while True:
        offset = handle.tell()
        if end is not None and offset >= end:
            return
        record = None
        report.bytes_read = before + offset
        try:
            record = read_record(handle)
            if record is None:
                return
            if only is not None and _flow_id_of(record) not in only:
                index += 1
                continue
            state = _decode_flow(record, keep_all)
        except (ValueError, TypeError, IndexError, UnicodeDecodeError, RecursionError) as e:
            # RecursionError: values nested deeper than the decoder goes (a framed record, skipped).
            if not _read_past(e, record, source, index, offset, report):
                return
            index += 1
            continue
        report.flows_read += 1
        exchange = exchange_from_state(state, source, index, report, keep_all)
        index += 1
        if exchange is not None:
            yield exchange


def _not_flow_records(
    handle: io.BufferedReader, source: str, report: LoadReport, keep_all: bool
) -> Iterator[Exchange] | None:
    """By a file's first bytes: nothing to read in an empty one (the problem is reported), the entries of a HAR
    file (JSON, perhaps after a BOM); None for a flow file."""
    head = handle.peek(4)[:4]
    if not head:
        report.problem(source, "empty file: no flows in it")
        return iter(())
    if head.startswith((b"{", b"\xef\xbb\xbf{")):
        return _read_har(handle, source, report, keep_all)
    return None


def _read_past(e: Exception, record: bytes | None, source: str, index: int, offset: int, report: LoadReport) -> bool:
    """Reports the record at ``offset`` that could not be read; whether the rest of the file can still be."""
    if isinstance(e, RecordError) and not record_framed(record):
        # The file's framing is broken here: nothing after this point can be trusted.
        # A first record cut short is a truncated capture too, not some other kind of file.
        cut = index or isinstance(e, RecordCutShort)
        where = "truncated or corrupt" if cut else "not a mitmproxy flow file"
        report.problem(source, f"{where}: {e}", offset=offset, flows_read=index)
        return False
    # The record was framed (a whole dict), so the rest of the file can still be read.
    report.flows_read += 1
    report.skip(source, index, None, f"unreadable flow record at byte {offset}: {e}")
    return True


def _flow_id_of(record: bytes) -> str | None:
    """A flow record's id, its other fields stepped over undecoded (None if it has no string id: no flow the
    analysis kept)."""
    state = decode(record, FLOW_ID)
    flow_id = state.get("id") if isinstance(state, dict) else None
    return flow_id if isinstance(flow_id, str) else None


def _decode_flow(record: bytes, keep_all: bool) -> Any:
    """Only the fields the analyzer reads; an older format is decoded whole for mitmproxy to migrate."""
    state = decode(record, FLOW_FIELDS if keep_all else ANALYSIS_FIELDS)
    if isinstance(state, dict) and state.get("version") != FLOW_FORMAT_VERSION:
        state = decode(record)
    return state


def _read_har(handle: io.BufferedReader, source: str, report: LoadReport, keep_all: bool) -> Iterator[Exchange]:
    """HAR files, entry by entry through mitmproxy's converter (a HAR has no timing per SSE event).

    mitmproxy's own HAR reader stops at the first bad entry and loses the rest; here each entry is
    one flow read, converted or skipped with its index (counted from 0, as ``index`` in ``skipped``).
    """
    bom = 3 if handle.peek(3).startswith(b"\xef\xbb\xbf") else 0
    try:
        document = json.load(handle)
    except json.JSONDecodeError as e:
        _report_json_error(e, bom, source, report)
        return
    except UnicodeDecodeError as e:
        report.problem(source, f"HAR file is not UTF-8 text ({e.reason})", offset=bom + e.start)
        return
    except RecursionError:
        report.problem(source, "HAR file is not readable: JSON nested deeper than Python's parser goes")
        return
    problem = _no_entries(document)
    if problem:
        report.problem(source, problem)
        return
    for index, entry in enumerate(document["log"]["entries"]):
        report.flows_read += 1
        if not isinstance(entry, dict):
            report.skip(source, index, None, f"HAR entry {index} is a JSON {_json_type(entry)}, not an object")
            continue
        # The converter fails in many ways on bad input (KeyError, ValueError, TypeError, OptionsError,
        # binascii.Error...): whatever it raises, one entry must not cost the entries after it.
        try:
            state = har_entry_state(index, entry)
        except Exception as e:
            report.skip(source, index, None, f"HAR entry {index} not readable: {_har_error(e)}")
            continue
        exchange = exchange_from_state(state, source, index, report, keep_all)
        if exchange is not None:
            yield exchange


def _report_json_error(e: json.JSONDecodeError, bom: int, source: str, report: LoadReport) -> None:
    """Where a HAR file's JSON breaks, and whether it was cut short or is wrong."""
    # A byte offset, as for flow files (the CLI adds "at byte N"): json counts characters after the BOM.
    offset = bom + len(e.doc[: e.pos].encode("utf-8", "surrogatepass"))
    detail = f"{e.msg.removesuffix(' at').removesuffix(' starting')}, line {e.lineno} column {e.colno}"
    # At the end of the text, or in a string never closed (a raw line break in one is a different error).
    if not e.doc[e.pos :].strip() or e.msg.startswith("Unterminated string"):
        report.problem(source, f"HAR file truncated: the JSON ends early ({detail})", offset=offset)
    else:
        report.problem(source, f"HAR file is invalid JSON ({detail})", offset=offset)


def _no_entries(document: Any) -> str | None:
    """Why a JSON document gives no HAR entries to read (it is no HAR, or it has none), or None."""
    missing = _not_har(document)
    if missing:
        return f"JSON but not a HAR file: {missing}"
    if not document["log"]["entries"]:
        # As for an empty flow file: a capture with nothing in it is worth saying, not a silent 0.
        return "empty HAR file: no entries in it"
    return None


def har_entry_state(index: int, entry: dict[str, Any]) -> dict[str, Any]:
    """A HAR entry as a flow's state, through mitmproxy's converter; with what ``export --format har`` kept of
    the flow beyond HAR (RECORDED_FIELD) put back, so that its analysis is the capture's."""
    from mitmproxy.io.har import request_to_flow

    state: dict[str, Any] = request_to_flow(entry).get_state()
    state["id"] = _har_flow_id(index, entry)
    recorded = entry.get(RECORDED_FIELD)
    if isinstance(recorded, dict):
        _put_back(state, recorded)
    return state


def _put_back(state: dict[str, Any], recorded: dict[str, Any]) -> None:
    """The flow's id (its calls keep their ids), client connection, exact times, error and the recorder's
    metadata (per-event times of a stream): a HAR has the times of none of them, and answers every request.
    Only these fields are taken; exchange_from_state checks their types as for any flow."""
    if isinstance(recorded.get("flow_id"), str):
        state["id"] = recorded["flow_id"]
    if isinstance(connection := recorded.get("client_conn"), dict):
        state["client_conn"].update(_picked(connection, ("id", "peername")))
    if isinstance(request := recorded.get("request"), dict):
        state["request"].update(_picked(request, RECORDED_TIMES))
    _put_back_response(state, recorded)
    if isinstance(error := recorded.get("error"), dict):
        state["error"] = {"msg": error.get("msg"), "timestamp": error.get("timestamp")}
    if isinstance(recorded.get("metadata"), dict):
        state["metadata"] = {METADATA_KEY: recorded["metadata"]}


def _put_back_response(state: dict[str, Any], recorded: dict[str, Any]) -> None:
    """No response where HAR says status 0; else the response's exact times, if the HAR had a response."""
    if "response" in recorded and recorded["response"] is None:
        state["response"] = None  # HAR's status 0: there was no response
    elif isinstance(response := recorded.get("response"), dict) and state.get("response"):
        state["response"].update(_picked(response, RECORDED_TIMES))


def _picked(fields: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """Those of ``keys`` that ``fields`` has, with their values."""
    return {k: fields[k] for k in keys if k in fields}


def _har_flow_id(index: int, entry: dict[str, Any]) -> str:
    """The converter makes a new random flow id on every load; call ids are named after flow ids
    (analyzer/across/call_ids.py) and must not change between loads: a UUID from the entry's place and start."""
    request = entry.get("request")
    request = request if isinstance(request, dict) else {}
    key = f"{index}\0{entry.get('startedDateTime')}\0{request.get('method')}\0{request.get('url')}"
    return str(uuid.UUID(bytes=hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:16], version=4))


def _not_har(document: Any) -> str | None:
    """What a HAR needs and this JSON lacks, or None."""
    if not isinstance(document, dict):
        return f"the top level is a JSON {_json_type(document)}, not an object"
    if "log" not in document:
        return 'no "log" object at the top level'
    log = document["log"]
    if not isinstance(log, dict):
        return f'"log" is a JSON {_json_type(log)}, not an object'
    if "entries" not in log:
        return 'no "entries" list in "log"'
    entries = log["entries"]
    if not isinstance(entries, list):
        return f'"log.entries" is a JSON {_json_type(entries)}, not a list'
    return None


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _har_error(e: Exception) -> str:
    if isinstance(e, KeyError):  # its message is only the key's repr
        return f"missing field {e}"
    kind = type(e)
    # "Error" alone (binascii's) says nothing: name the module of any exception that is not a builtin.
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name}: {e}"


def exchange_from_state(state: Any, source: str, index: int, report: LoadReport, keep_all: bool) -> Exchange | None:
    """One flow's state (as a flow file or `flow.get_state()` holds it) as an Exchange; None, with the
    reason in ``report.skipped``, when it is not an HTTP flow this analyzer reads."""
    if not isinstance(state, dict):
        report.skip(source, index, None, "record is not a flow")
        return None
    flow_id = state.get("id") if isinstance(state.get("id"), str) else None
    try:
        if state.get("version") != FLOW_FORMAT_VERSION:
            from mitmproxy.io import compat  # heavy to import, and only older files need it

            state = compat.migrate_flow(state)
    except (ValueError, KeyError, TypeError) as e:
        report.skip(source, index, flow_id, f"flow format not readable by this mitmproxy: {e}")
        return None
    kind = state.get("type")
    if kind != "http":
        report.skip(source, index, flow_id, f"not an HTTP flow ({kind})")
        return None
    if state.get("websocket"):
        report.skip(source, index, flow_id, "WebSocket flow: MCP does not use WebSocket")
        return None
    try:
        return _exchange(state, source, index, keep_all)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        report.skip(source, index, flow_id, f"malformed HTTP flow record: {type(e).__name__}: {e}")
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


# The headers a verdict or a retry can depend on. The rest stay in the file: a capture of
# 100,000 calls holds millions of header values, and the analysis must fit in memory.
ANALYZED_HEADERS = frozenset(
    {
        "content-type",
        "content-encoding",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "last-event-id",
        "retry-after",
        "server",  # a gateway in the path (analyzer/calls/gateway.py)
        "user-agent",
        "via",
        "www-authenticate",
        "x-envoy-attempt-count",
        "x-request-id",
        "authorization",
        "traceparent",  # W3C Trace Context: the OpenTelemetry export's parent (analyzer/outputs/otlp.py)
        "tracestate",
    }
)


def _headers(fields: Any, keep_all: bool) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in fields or ():
        key = _text(name).lower()
        if keep_all or key in ANALYZED_HEADERS:
            # Interned: the same names and values (session ids, content types) recur in every exchange.
            key = sys.intern(key)
            headers[key] = f"{headers[key]}, {_text(value)}" if key in headers else sys.intern(_text(value))
    return headers


def _body(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    raise TypeError(f"a body is {type(value).__name__}, not bytes")


def _time(value: Any) -> float | None:
    """A timestamp, checked: every duration and every order of events is computed from them."""
    if value is None:
        return None
    # Finite, and within 30 million years of 1970: no NaN or infinity reaches a duration or the JSON export.
    if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) < 1e15:
        raise ValueError(f"a timestamp is {value!r:.40}, not a number of seconds")
    return float(value)


def _flow_id(value: Any) -> str:
    if not isinstance(value, str):  # it keys the exchange in the analysis and the report
        raise TypeError(f"the flow id is {type(value).__name__}, not a string")
    return value


def _scalar(value: Any) -> str | int | float | None:
    """A field of the addon's stream record as reports quote it: a string, a finite number or null
    (an infinity would make the report's data no JSON)."""
    if value is None or isinstance(value, str | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return None


def _address(peer: Any) -> str | None:
    """The client's "address:port" (peername); None where the flow does not say."""
    if isinstance(peer, list | tuple) and len(peer) >= 2 and isinstance(peer[1], int):
        return f"{_text(peer[0])}:{peer[1]}"  # not interned: most are unique, and interning keeps them
    return None


def _event_times(value: Any) -> list[float | None] | None:
    """The addon's arrival time of each event; None (events dated at the response's end) if not a list of times."""
    try:
        return [None if t is None else _time(t) for t in value] if isinstance(value, list) else None
    except ValueError:
        return None


def process_of(recorded: Any) -> ClientProcess | None:
    """The recorder's ``client_process`` (wire/metadata.py ProcessRecord), if it names a client: not a
    gateway's, and well formed (a capture is untrusted input)."""
    if not isinstance(recorded, dict) or recorded.get("gateway"):
        return None
    pid, name, started = recorded.get("pid"), recorded.get("name"), recorded.get("started_at")
    if not isinstance(pid, int) or not isinstance(name, str) or not isinstance(started, int | float):
        return None
    return _process(pid, name, float(started))


# One record per process: a capture's many flows name few processes.
_process = functools.lru_cache(maxsize=1024)(ClientProcess)


def _exchange(state: dict[str, Any], source: str, index: int, keep_all: bool) -> Exchange:
    request = state["request"]
    path_and_query = _text(request["path"])
    path, _, query = path_and_query.partition("?")
    scheme, host, port = _text(request.get("scheme") or "http"), _text(request["host"]), int(request["port"])
    metadata = state.get("metadata") or {}
    record = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    client_conn = state.get("client_conn") or {}
    connection = client_conn.get("id")
    peer = client_conn.get("peername")
    exchange = Exchange(
        flow_id=_flow_id(state["id"]),
        source=source,
        index=index,
        method=sys.intern(_text(request["method"])),
        endpoint=sys.intern(f"{scheme}://{host}:{port}{path}"),
        path=sys.intern(path),
        query_string=query,
        request_headers=_headers(request.get("headers"), keep_all),
        request_body=_body(request.get("content")),
        client_conn=sys.intern(connection) if isinstance(connection, str) else None,
        t_request=_time(request.get("timestamp_start") or state.get("timestamp_created")) or 0.0,
        recorded_by_addon=isinstance(record, dict),
        client_addr=_address(peer),
        client_process=process_of(record.get("client_process")) if isinstance(record, dict) else None,
    )
    if isinstance(record, dict) and isinstance(earlier := record.get("earlier_connections"), dict):
        exchange.earlier_processes = tuple(
            (connection, process)
            for connection, recorded in earlier.items()
            if isinstance(connection, str) and (process := process_of(recorded)) is not None
        )
    response = state.get("response")
    if response:
        exchange.status = int(response["status_code"])
        exchange.response_headers = _headers(response.get("headers"), keep_all)
        exchange.response_body = _body(response.get("content"))
        exchange.t_response = _time(response.get("timestamp_start"))
        exchange.t_end = _time(response.get("timestamp_end"))
    error = state.get("error")
    if error:
        exchange.error = sys.intern(_text(error.get("msg")))  # the same few messages recur
        exchange.t_error = _time(error.get("timestamp"))
    if isinstance(record, dict) and isinstance(record.get("stream"), dict):
        stream = record["stream"]
        exchange.stream = dict(stream) if keep_all else {k: stream.get(k) for k in STREAM_FIELDS}
        exchange.stream.update({k: _scalar(stream.get(k)) for k in STREAM_FIELDS})
        exchange.stream["event_times"] = _event_times(stream.get("event_times"))
        coding = exchange.response_headers.get("content-encoding")
        if exchange.stream["event_times"] is None and coding and exchange.response_body:
            # The recorder could not split an encoded stream; its chunk times date the decoded events.
            chunks = stream.get("chunks")
            chunks = decode(chunks) if isinstance(chunks, Encoded) else chunks
            exchange.stream["event_times"] = encoded_event_times(exchange.response_body, coding, chunks)
    return exchange
