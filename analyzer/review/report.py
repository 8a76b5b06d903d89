"""The incident-review report: one self-contained HTML file.

The analysis is turned into compact data (a row per call, lanes, retry groups,
the details of the calls worth opening), redacted, embedded as JSON in the
page and drawn by the page's own script. Compact: every text that recurs
(methods, tools, outcomes, flags, verdicts, evidence lines, anatomy sentences,
client fields) is written once in a string table (``strings``) and referred to
by its index; times are integer microseconds; retry groups name their attempts
by row index; what the page can derive (a call's layer from its outcome, its
attempt number from its chain) is not carried. The page decodes it on load.
Nothing is loaded from anywhere: the page's Content-Security-Policy forbids
it. Captured content is only ever put into the page as data and shown with
``textContent``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jinja2

from mcp_blackbox.analyzer.across.retries import RetryGroup
from mcp_blackbox.analyzer.calls.anatomy import describe, ending
from mcp_blackbox.analyzer.model.contract import ClientRecord
from mcp_blackbox.analyzer.model.noteworthy import noteworthy
from mcp_blackbox.analyzer.model.records import Call, Exchange
from mcp_blackbox.analyzer.model.vocabulary import Certainty, Outcome, vocabulary_data
from mcp_blackbox.analyzer.outputs.analysis import Analysis, analyze
from mcp_blackbox.analyzer.outputs.call_record import reason
from mcp_blackbox.analyzer.outputs.export import ran_more_than_once_counts
from mcp_blackbox.analyzer.read.extract import decode_body
from mcp_blackbox.analyzer.read.load import LoadReport, read_exchanges
from mcp_blackbox.analyzer.read.stdio_load import is_stdio_capture, stdio_exchanges
from mcp_blackbox.analyzer.read.time_range import range_lines
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.review.captured import captured_facts
from mcp_blackbox.analyzer.review.top_errors import top_errors
from mcp_blackbox.analyzer.wire.inputs import capture_name, capture_names, expand_captures
from mcp_blackbox.analyzer.wire.sse_framing import split_sse

DETAIL_LIMIT = 3000  # calls whose bytes the report carries (failures and retries first)
RAN_TWICE_SHOWN = 20  # writes that ran more than once, listed whole in the header (all are counted)
# Above this many calls the uneventful ones are aggregated per lane and time bucket (see ``eventful``): one row
# per call would make a page of about 300 bytes a call, too big for a browser at a million calls.
AGGREGATE_ABOVE = 50_000
AGGREGATE_BUCKETS = 500  # at most this many buckets across the capture's span, per lane
BUCKET_STEPS_MS = [
    1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5, 108e5, 216e5, 432e5, 864e5,
]  # fmt: skip
AGGREGATE_COLUMNS = [
    "lane", "t0", "t1", "count", "outcomes", "methods", "tools", "dur_min", "dur_p50", "dur_p95", "dur_max",
]  # fmt: skip
BODY_LIMIT = 16_384  # characters of one body shown
TICK_LIMIT = 50  # SSE event ticks drawn per call
TOP_ERRORS = 10  # errors listed in the header, each a filter (review/top_errors.py groups them)
LANE_KINDS = {"connection": "conn", "sse-session": "sse", "stdio": "stdio"}  # short names in the timeline's lane labels
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A row per call. t0: microseconds after the previous row's t0 (the first row's: after the first call), dur:
# microseconds; group: index into ``groups``; client: index into ``clients``; source: into meta.captures; error:
# into meta.top_errors (null: not a failure, or one of the rarer errors); STRING_COLUMNS: index into
# ``strings`` (whose entry 0 is null). The page derives the layer (the outcome's) and the attempt (the call's
# place in its group's members).
COLUMNS = [
    "id", "lane", "method", "tool", "rpc_id", "outcome", "status", "flags", "t0", "dur",
    "group", "origin", "confidence", "source", "verdict", "error_code", "client", "carrier", "error",
]  # fmt: skip
STRING_COLUMNS = ["method", "tool", "outcome", "flags", "origin", "confidence", "verdict", "carrier"]
STDERR_SHOWN = 200  # stderr lines of one call carried in its details (the timeline ticks them all, up to TICK_LIMIT)
# A retry chain: members are row indices; origin, confidence, final_outcome, safety and each evidence line are
# indices into ``strings``; total_us in microseconds; failure_retry and may_have_run_twice 0 or 1.
GROUP_COLUMNS = [
    "retry_group", "origin", "confidence", "members", "failure_retry", "total_us", "final_outcome", "safety",
    "may_have_run_twice", "evidence",
]  # fmt: skip
# A timeout anatomy (analyzer/calls/anatomy.py ``ending``) of the call in row ``row``: times in microseconds after the
# call's start (null when unknown); ended_by, detail and sentence (``describe``'s) are indices into ``strings``.
ANATOMY_COLUMNS = [
    "row", "reached_server_us", "progress", "other_notifications", "last_us", "ended_by", "waited_us", "detail",
    "sentence",
]  # fmt: skip
LANE_COLUMNS = ["id", "label", "group"]  # id: index into ``strings``; group: index into ``lane_groups``
LANE_GROUP_COLUMNS = ["source", "lineage"]  # source: index into meta.captures; lineage: into ``strings``
CLIENT_COLUMNS = [
    "lineage", "unit", "address", "session", "user_agent", "client_info", "protocol_version", "joined", "process",
]  # fmt: skip  # each an index into ``strings``; process as "pid N (name)"


class StringTable:
    """The report's strings, each written once: ``index`` gives a text's place (None is entry 0)."""

    def __init__(self) -> None:
        self.strings: list[str | None] = [None]
        self._index: dict[str | None, int] = {None: 0}

    def index(self, text: Any) -> int:
        if text is not None and not isinstance(text, str):
            text = str(text)  # a table holds texts only
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.strings)
            self.strings.append(text)
        return found


def _us(ms: float | None) -> int | None:
    """Milliseconds (to the microsecond) as integer microseconds: no decimal point, no float's tail."""
    return None if ms is None else round(ms * 1000)


def build_report(
    paths: Iterable[str | Path],
    *,
    redact: bool = True,
    analysis: Analysis | None = None,
    aggregate_above: int = AGGREGATE_ABOVE,
) -> dict[str, Any]:
    """The report's data; ``analysis`` of the same paths, if the caller has one already.

    Above ``aggregate_above`` calls the uneventful ones (``eventful`` says which are not) are folded into
    per-lane time buckets (``aggregates``) and only the eventful calls get a row each.
    """
    sources = [str(p) for p in paths]
    analysis = analysis if analysis is not None else analyze(sources)
    every = analysis.call_objects
    files = _capture_files(sources, every)  # each file read, as the user named it or its directory held it
    origin, end = _span(every)
    lanes = _lane_indices(every)
    calls, quiet = _split_quiet_calls(analysis, aggregate_above)
    clients: dict[str, int] = {}  # unit -> index into the page's client table
    table = StringTable()
    # The table numbers each text where it is first indexed: in the rows, the aggregates, then the lanes, lane
    # groups, clients, groups and anatomy below. Moving a step renumbers the strings of the same report.
    redactor = Redactor.of(redact)  # every peer's word on the page passes through it
    rows = _rows(calls, origin, lanes, clients, files, analysis.retry_groups, table, redactor)
    errors = _top_errors(calls, rows, table)
    row_of = {call.call_id: n for n, call in enumerate(calls)}
    # The details are read again from the files the analysis decoded: not those wholly outside the range.
    read = [s for s in sources if s not in (analysis.range or {}).get("captures_not_read", ())]
    details = _details(read, _worth_opening(calls, ran_more_than_once(analysis)), origin, redactor)
    lane_records, lane_groups = _lanes(every, lanes, files)
    aggregates, bucket_ms = _aggregates(quiet, origin, lanes, end, table)
    meta = _meta(analysis, sources, origin, redactor)
    # The captures by name (analyzer/wire/inputs.py capture_names): a page made to be shared names no directory.
    names = capture_names(files)
    meta["captures"] = [names[f] for f in files]
    meta["top_errors"] = errors
    if analysis.time_range is not None:  # --since/--until: said in the header (the key only then: no change else)
        meta["range"] = range_lines(analysis.time_range, analysis.range)
    meta.update(aggregated=len(quiet), aggregate_above=aggregate_above, bucket_ms=bucket_ms, rows=len(rows))
    return {
        "meta": meta,
        "columns": COLUMNS,
        "string_columns": STRING_COLUMNS,
        # A lane's id (its client unit's text, mostly) and a group's lineage through the string table.
        "lane_columns": LANE_COLUMNS,
        "lanes": [[table.index(lane["id"]), lane["label"], lane["group"]] for lane in lane_records],
        "lane_group_columns": LANE_GROUP_COLUMNS,
        "lane_groups": [[g["source"], table.index(g["lineage"])] for g in lane_groups],
        "client_columns": CLIENT_COLUMNS,
        "clients": [[table.index(c[k]) for k in CLIENT_COLUMNS] for c in _client_rows(calls, clients, redactor)],
        "calls": rows,
        "aggregate_columns": AGGREGATE_COLUMNS,
        "aggregates": aggregates,
        # [row, then each SSE event's time in microseconds after the call's start]
        "ticks": _ticks_by_row(calls, _ticks),
        # [row, then each stderr line's time (a stdio server's, written during the call), the same way]
        "stderr_ticks": _ticks_by_row(calls, _stderr_ticks),
        "group_columns": GROUP_COLUMNS,
        "groups": [_group(g, row_of, table) for g in analysis.retry_groups],
        "details": details,
        "anatomy_columns": ANATOMY_COLUMNS,
        "anatomy": _anatomies(calls, redactor, table),
        "vocabulary": vocabulary_data(),
        "strings": table.strings,  # last: every index above is into it
    }


def _span(calls: list[Call]) -> tuple[float, float]:
    """The capture's span: the earliest call start and the latest call end (both 0.0 without calls)."""
    origin = min((c.request.t for c in calls), default=0.0)
    end = max((c.t_end or c.request.t for c in calls), default=origin)
    return origin, end


def _capture_files(sources: list[str], calls: list[Call]) -> dict[str, int]:
    """Each capture file by its index in meta.captures: the arguments' files (a directory's, a glob's), in order,
    then any other a call came from."""
    files = dict.fromkeys([*expand_captures(sources), *(c.exchange.source for c in calls)])
    return {f: n for n, f in enumerate(files)}


def _top_errors(calls: list[Call], rows: list[list[Any]], table: StringTable) -> list[dict[str, Any]]:
    """The TOP_ERRORS most frequent errors of the failed calls (review/top_errors.py: the reasons with the
    figures that differ set aside), each with its count and first call; each failed call's row gets its
    error's index (column ``error``)."""
    verdict, error = COLUMNS.index("verdict"), COLUMNS.index("error")
    strings = table.strings
    failed = [(n, c) for n, c in enumerate(calls) if c.outcome is not None and c.outcome.is_failure]
    errors = top_errors((c.call_id, str(c.outcome), str(strings[rows[n][verdict]])) for n, c in failed)[:TOP_ERRORS]
    index = {call_id: k for k, e in enumerate(errors) for call_id in e.calls}
    for n, call in failed:
        rows[n][error] = index.get(call.call_id)
    return [{"outcome": e.outcome, "error": e.error, "count": e.count, "first": e.first} for e in errors]


def _lane_indices(calls: list[Call]) -> dict[str, int]:
    """Each lane's index, in the order the lanes start."""
    lanes: dict[str, int] = {_lane_key(call): 0 for call in calls}
    for n, lane in enumerate(lanes):
        lanes[lane] = n
    return lanes


def _split_quiet_calls(analysis: Analysis, aggregate_above: int) -> tuple[list[Call], list[Call]]:
    """The calls that get a row each, and the uneventful ones folded into ``aggregates`` instead: none unless
    there are more than ``aggregate_above`` calls."""
    every = analysis.call_objects
    if len(every) <= aggregate_above:
        return every, []
    duplicate_calls = ran_more_than_once(analysis)
    return [c for c in every if eventful(c, duplicate_calls)], [c for c in every if not eventful(c, duplicate_calls)]


def _rows(
    calls: list[Call],
    origin: float,
    lanes: dict[str, int],
    clients: dict[str, int],
    files: dict[str, int],
    groups: list[RetryGroup],
    table: StringTable,
    redactor: Redactor,
) -> list[list[Any]]:
    """A row per call (``_row``), each t0 the step from the previous row's."""
    group_index = {g.group_id: n for n, g in enumerate(groups)}
    rows, previous = [], 0
    for call in calls:
        row = _row(call, origin, lanes, clients, files, group_index, table, redactor)
        row[8], previous = row[8] - previous, row[8]  # t0 as the step from the previous row
        rows.append(row)
    return rows


def _ticks_by_row(calls: list[Call], ticks_of: Callable[[Call], list[int]]) -> list[list[int]]:
    """[row, then each of its ticks] for every call that has any."""
    return [[n, *ticks] for n, c in enumerate(calls) if (ticks := ticks_of(c))]


def _group(group: RetryGroup, row_of: dict[str, int], table: StringTable) -> list[Any]:
    """A retry chain's record (``RetryGroup.record``) in GROUP_COLUMNS. Every attempt of a chain is eventful,
    so each has a row; with --since/--until, the attempts outside the range have none and are not drawn."""
    record = group.record()
    return [
        record["retry_group"], table.index(record["origin"]), table.index(record["confidence"]),
        [row_of[m] for m in record["members"] if m in row_of], int(record["failure_retry"]), _us(record["total_ms"]),
        table.index(record["final_outcome"]), table.index(record["safety"]), int(record["may_have_run_twice"]),
        [table.index(line) for line in record["evidence"]],
    ]  # fmt: skip


def eventful(call: Call, duplicate_calls: set[str]) -> bool:
    """A call that gets a row of its own (``noteworthy``); the others may be aggregated in a huge capture."""
    return noteworthy(call.outcome, call.flags, call.retry_group, call.call_id in duplicate_calls)


def bucket_width(span_ms: float) -> float:
    """A round width (1 s, 2 s, 5 s, 10 s ... 1 day) giving at most AGGREGATE_BUCKETS buckets across the span."""
    for step in BUCKET_STEPS_MS:
        if span_ms / step <= AGGREGATE_BUCKETS:
            return step
    return BUCKET_STEPS_MS[-1]


def _aggregates(
    quiet: list[Call], origin: float, lanes: dict[str, int], end: float, table: StringTable
) -> tuple[list[list[Any]], float | None]:
    """The uneventful calls folded per lane and time bucket: one record each (``AGGREGATE_COLUMNS``), by start.

    Outcomes, methods and tools are counted as flat lists: a string's index, its count, the next ... (most
    common first).

    Durations are summarised by their minimum, median, 95th percentile (nearest rank) and maximum; the bucket's
    drawn extent runs from its first call's start to its last call's end.
    """
    if not quiet:
        return [], None
    width = bucket_width((end - origin) * 1000)
    buckets: dict[tuple[int, int], list[Call]] = {}
    for call in quiet:
        start = (call.request.t - origin) * 1000
        buckets.setdefault((lanes[_lane_key(call)], int(start // width)), []).append(call)
    records = [_aggregate(lane, members, origin, table) for (lane, _), members in buckets.items()]
    records.sort(key=lambda r: (r[1], r[0]))
    return records, width


def _aggregate(lane: int, members: list[Call], origin: float, table: StringTable) -> list[Any]:
    """One bucket's record (``AGGREGATE_COLUMNS``): its lane, drawn extent, count, counted outcomes, methods and
    tools, and its durations' minimum, median, 95th percentile and maximum."""
    spans = [((c.request.t - origin) * 1000, max(0.0, (c.t_end or c.request.t) - c.request.t) * 1000)
             for c in members]  # fmt: skip
    durations = sorted(d for _, d in spans)
    return [
        lane, round(min(s for s, _ in spans), 3), round(max(s + d for s, d in spans), 3), len(members),
        *_bucket_counts(members, table),
        round(durations[0], 3), _nearest_rank(durations, 0.5), _nearest_rank(durations, 0.95), round(durations[-1], 3),
    ]  # fmt: skip


def _bucket_counts(members: list[Call], table: StringTable) -> list[list[int]]:
    """A bucket's outcomes, methods and tools, each counted as ``_counted`` lists them."""
    return [
        _counted(Counter(str(c.outcome) for c in members), table),
        _counted(Counter(c.method or "(response)" for c in members), table),
        _counted(Counter(c.tool for c in members if c.tool), table),
    ]


def _nearest_rank(durations: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``durations`` by nearest rank, rounded to the microsecond."""
    return round(durations[max(0, math.ceil(q * len(durations)) - 1)], 3)


def _counted(counter: Counter[str], table: StringTable) -> list[int]:
    return [n for name, count in counter.most_common() for n in (table.index(name), count)]


def _lane_key(call: Call) -> str:
    scope = call.scope
    if scope.startswith("exchange:"):  # stateless: one lane per client connection
        return f"connection:{call.exchange.client_conn or scope}"
    return scope


def _lane_label(lane: str, address: str | None) -> str:
    """A short readable name: the session id's first digits, or the client's address for a connection."""
    kind, _, name = lane.partition(":")
    if kind == "connection" and address:
        return f"conn {address}"
    if kind == "stdio":  # stdio:<capture file>:<pid>
        return f"stdio pid {name.rpartition(':')[2]}"
    return f"{LANE_KINDS.get(kind, kind)} {name[:8]}"


def _lanes(
    calls: list[Call], lanes: dict[str, int], files: dict[str, int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The lanes in index order, each in a group: the capture its first call came from and that call's client
    lineage (calls without a client identity are a group of their own in their capture)."""
    first: dict[str, Call] = {}
    for call in calls:
        first.setdefault(_lane_key(call), call)
    groups: dict[tuple[int, str | None], int] = {}
    records = []
    for lane in lanes:
        call = first[lane]
        source = files.get(call.exchange.source, 0)
        lineage = call.client.lineage if call.client is not None else None
        group = groups.setdefault((source, lineage), len(groups))
        address = call.client.address if call.client is not None else None
        records.append({"id": lane, "label": _lane_label(lane, address), "group": group})
    return records, [{"source": source, "lineage": lineage} for source, lineage in groups]


def _anatomies(calls: list[Call], redactor: Redactor, table: StringTable) -> list[list[Any]]:
    """The timeout anatomy of every call that got no answer (analyzer/calls/anatomy.py), with its sentence, in
    ANATOMY_COLUMNS. The sentences recur (the same few endings after the same few waits): the table holds each
    once."""
    out = []
    for n, call in enumerate(calls):
        anatomy = ending(call)
        if anatomy is None:
            continue
        # The detail quotes the proxy's or the stream's own words, and the sentence quotes the detail.
        sentence = redactor.text(describe(anatomy, call.exchange.transport))
        detail = redactor.text(anatomy["detail"]) if anatomy["detail"] else anatomy["detail"]
        sent = anatomy["server_sent"]
        out.append([
            n, _us(anatomy["reached_server_ms"]), sent["progress"], sent["other_notifications"], _us(sent["last_ms"]),
            table.index(anatomy["ended_by"]), _us(anatomy["waited_ms"]), table.index(detail), table.index(sentence),
        ])  # fmt: skip
    return out


def _row(
    call: Call,
    origin: float,
    lanes: dict[str, int],
    clients: dict[str, int],
    files: dict[str, int],
    group_index: dict[str, int],
    table: StringTable,
    redactor: Redactor,
) -> list[Any]:
    """The call in COLUMNS, its t0 still after the first call (``_rows`` makes it a step)."""
    exchange = call.exchange
    client = clients.setdefault(call.client.unit, len(clients)) if call.client is not None else None
    end = call.t_end or call.request.t
    lane = lanes.setdefault(_lane_key(call), len(lanes))
    s = table.index
    return [
        call.call_id, lane, s(call.method), s(call.tool), call.request.id, s(call.outcome), exchange.status,
        s(" ".join(call.flags)), round((call.request.t - origin) * 1e6), round(max(0.0, end - call.request.t) * 1e6),
        group_index.get(call.retry_group) if call.retry_group else None, s(call.retry_origin),
        s(call.retry_confidence), files.get(exchange.source, 0),
        s(redactor.text(reason(call, ending(call)))), call.error_code, client, s(exchange.transport), None,
    ]  # fmt: skip


def _client_rows(calls: list[Call], clients: dict[str, int], redactor: Redactor) -> list[dict[str, Any]]:
    """``_clients`` as plain mappings, for the page's columns: the process as one text."""
    return [
        {**record, "process": f"pid {p['pid']} ({p['name']})" if (p := record["process"]) else None}
        for record in _clients(calls, clients, redactor)
    ]


def _clients(calls: list[Call], clients: dict[str, int], redactor: Redactor) -> list[ClientRecord]:
    """One record per client unit, in the order of ``clients``' indices (the rows refer to them)."""
    by_unit = {call.client.unit: call.client for call in calls if call.client is not None}
    records = [by_unit[unit].record() for unit in clients]
    # A User-Agent or clientInfo is the client's own text: redacted like the export's.
    return [redactor.client(record) for record in records]


def _stderr_ticks(call: Call) -> list[int]:
    return [round((line.t - call.request.t) * 1e6) for line in call.stderr[:TICK_LIMIT]]


def _ticks(call: Call) -> list[int]:
    stream = [m.t for m in (*call.notifications, *call.responses) if m.exchange.is_event_stream]
    return [round((t - call.request.t) * 1e6) for t in sorted(stream)[:TICK_LIMIT]]


def _worth_opening(calls: list[Call], duplicate_calls: set[str]) -> dict[str, Call]:
    """The calls whose bytes the page carries: every eventful call first, then the rest."""
    ranked = sorted(calls, key=lambda c: (not eventful(c, duplicate_calls), c.number))
    return {c.call_id: c for c in ranked[:DETAIL_LIMIT]}


def ran_more_than_once(analysis: Analysis) -> set[str]:
    """The ids of every attempt of a write that ran more than once, the first one too."""
    return {attempt.call_id for entry in analysis.ran_more_than_once for attempt in entry.attempts}


def _details(paths: list[str], chosen: dict[str, Call], origin: float, redactor: Redactor) -> dict[str, Any]:
    """The details of the ``chosen`` calls, by call id: evidence, exchanges (with their bytes) and stderr lines."""
    exchanges = _exchange_details(paths, chosen, origin, redactor)
    return {call_id: _call_detail(call, exchanges, origin, redactor) for call_id, call in chosen.items()}


def _call_detail(call: Call, exchanges: dict[str, dict[str, Any]], origin: float, redactor: Redactor) -> dict[str, Any]:
    """One call's details: ``exchanges`` holds its exchanges' (by flow id)."""
    return {
        "evidence": [redactor.text(e) for e in call.evidence],
        "exchanges": [exchanges[e.flow_id] for e in call.exchanges if e.flow_id in exchanges],
        # A stdio server's stderr lines written during the call: its own text, untrusted like any other.
        "stderr": [
            {"t": round((line.t - origin) * 1000, 3), "text": redactor.text(line.text)}
            for line in call.stderr[:STDERR_SHOWN]
        ],
    }


def _exchange_details(
    paths: list[str], chosen: dict[str, Call], origin: float, redactor: Redactor
) -> dict[str, dict[str, Any]]:
    """The detail of each exchange of the ``chosen`` calls, by flow id."""
    wanted = {e.flow_id for call in chosen.values() for e in call.exchanges}
    # A second pass over the files for the chosen flows only: the analysis kept no bodies.
    stdio = [path for path in expand_captures(paths) if is_stdio_capture(path)]
    flows = [path for path in paths if path not in stdio]
    exchanges = _http_details(flows, wanted, origin, redactor)
    # The stdio captures are read a second time only if a chosen call is a stdio one.
    if _any_stdio(chosen.values()):
        exchanges.update(_stdio_details(stdio, wanted, origin, redactor))
    return exchanges


def _any_stdio(calls: Iterable[Call]) -> bool:
    """Whether a call went over stdio (its exchange is a stdio line, or it has stderr lines)."""
    return any(call.stderr or call.exchange.stdio is not None for call in calls)


def _http_details(paths: list[str], wanted: set[str], origin: float, redactor: Redactor) -> dict[str, dict[str, Any]]:
    """The detail of each ``wanted`` exchange of the captures ``paths`` (all but stdio ones), by flow id."""
    return {
        exchange.flow_id: _exchange_detail(exchange, origin, redactor)
        for exchange in read_exchanges(paths, LoadReport(), keep_all=True)
        if exchange.flow_id in wanted
    }


def _stdio_details(paths: list[str], wanted: set[str], origin: float, redactor: Redactor) -> dict[str, dict[str, Any]]:
    """The detail of each ``wanted`` line of the stdio captures ``paths``, by flow id."""
    return {
        exchange.flow_id: _stdio_detail(exchange, origin, redactor)
        for path in paths
        for exchange in stdio_exchanges(path)
        if exchange.flow_id in wanted
    }


def _stdio_detail(exchange: Exchange, origin: float, redactor: Redactor) -> dict[str, Any]:
    """A line of a stdio capture, in the shape of an exchange's detail: the line is the "request" body whichever
    way it went, and ``stdio`` says which (the page draws it as a line, not as an HTTP request)."""
    facts = (exchange.stream or {}).get("stdio_line") or {}
    body = exchange.request_body if exchange.request_body is not None else exchange.response_body
    command = exchange.stdio.command_text if exchange.stdio is not None else exchange.path
    return {
        "flow": exchange.flow_id,
        "t": round((exchange.t_request - origin) * 1000, 3),
        "request": {
            "line": f"{exchange.method} {redactor.text(command)}",
            "headers": {},
            "body": _shown(redactor.text((body or b"").decode("utf-8", "replace"))),
        },
        "response": None,
        "error": exchange.error,
        "stream": {"ended": None, "error": None, "bytes": facts.get("bytes"), "dropped_bytes": None},
        "stdio": {
            "stream": facts.get("stream"),
            "bytes": facts.get("bytes"),
            "truncated": facts.get("truncated", False),
            "not_utf8": facts.get("not_utf8", False),
        },
    }


def _exchange_detail(exchange: Exchange, origin: float, redactor: Redactor) -> dict[str, Any]:
    """An HTTP exchange as the page's detail shows it: the request (line, headers, body), the response if one
    came (an event stream's body as its events), the error, how the stream ended; each through ``redactor``."""
    request_text, _ = decode_body(exchange.request_body, exchange.request_headers)
    response_text, problem = decode_body(exchange.response_body, exchange.response_headers)
    detail: dict[str, Any] = {
        "flow": exchange.flow_id,
        "t": round((exchange.t_request - origin) * 1000, 3),
        "request": {
            "line": f"{exchange.method} {redactor.url(exchange.url)}",
            "headers": redactor.headers(exchange.request_headers),
            "body": _shown(redactor.text(request_text or "")),
        },
        "response": None,
        "error": exchange.error,
        "stream": _stream_end(exchange),
    }
    if exchange.status is not None:
        detail["response"] = _response(exchange, response_text or problem, redactor)
        if exchange.is_event_stream:
            detail["events"] = _events(exchange, response_text or "", origin, redactor)
    return detail


def _stream_end(exchange: Exchange) -> dict[str, Any]:
    """How the response's stream ended, its error, its bytes and the bytes dropped (None where unknown)."""
    return {k: (exchange.stream or {}).get(k) for k in ("ended", "error", "bytes", "dropped_bytes")}


def _response(exchange: Exchange, text: str | None, redactor: Redactor) -> dict[str, Any]:
    """The response's status, headers and body (``text``: the decoded body, or why it could not be decoded);
    an event stream's body is none here: its events are shown instead."""
    return {
        "status": exchange.status,
        "headers": redactor.headers(exchange.response_headers),
        "body": None if exchange.is_event_stream else _shown(redactor.text(text or "")),
    }


def _events(exchange: Exchange, text: str, origin: float, redactor: Redactor) -> list[dict[str, Any]]:
    events, _ = split_sse(text.encode("utf-8"))
    times = (exchange.stream or {}).get("event_times") or []
    out = []
    for n, event in enumerate(events[:500]):
        t = times[n] if n < len(times) and times[n] is not None else exchange.t_end
        out.append({
            "t": round((t - origin) * 1000, 3) if t else None,
            "id": event.id,
            "event": event.event,
            "data": _shown(redactor.text(event.data)),
        })  # fmt: skip
    return out


def _shown(text: str) -> str:
    """Pretty JSON where the text is JSON; cut to BODY_LIMIT characters."""
    with contextlib.suppress(ValueError, RecursionError):  # RecursionError: nested too deeply to indent
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return text if len(text) <= BODY_LIMIT else text[:BODY_LIMIT] + f"\n… {len(text) - BODY_LIMIT} more characters"


def _meta(analysis: Analysis, paths: list[str], origin: float, redactor: Redactor) -> dict[str, Any]:
    """The page's header: the captures, their span and who took part, the counts of the verdicts, what was
    read and how, and the retries and repeated executions; the keys in the order the page's JSON has them."""
    facts = captured_facts(analysis, paths)
    return {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "captures": paths,
        "start": origin,
        "end": facts["end"] if facts["end"] is not None else origin,
        **{key: facts[key] for key in ("clients", "user_agents", "servers", "versions")},
        **_verdict_counts(analysis.call_objects),
        "flows_read": analysis.flows_read,
        "skipped": len(analysis.skipped),
        "read_problems": [f"{capture_name(p['source'])}: {p['reason']}" for p in analysis.read_problems],
        "notes": analysis.notes,
        "auth_steps": [
            f"{a['step']}: {a['method']} {a['path']} "
            + (f"(HTTP {a['status']})" if a["status"] is not None else "(no response)")
            for a in analysis.auth_steps[:20]
        ],
        # A refused GET stream or DELETE: said once in the header, neither a call nor a failure.
        "stream_events": _stream_event_lines(analysis.stream_events[:20], redactor),
        **_repetition_counts(analysis),
        # Named patterns across calls (analyzer/across/patterns): the page opens with them.
        "findings": [redactor.finding(f) for f in analysis.findings],
        "redacted": redactor.redacts,
        "detail_limit": DETAIL_LIMIT,
    }


def _verdict_counts(calls: list[Call]) -> dict[str, Any]:
    """How many calls have each outcome, layer and flag (most common first), and how many calls in all."""
    return {
        "outcomes": dict(Counter(c.outcome for c in calls).most_common()),
        "layers": dict(Counter(c.layer for c in calls).most_common()),
        "flags": dict(Counter(f for c in calls for f in c.flags).most_common()),
        "calls": len(calls),
    }


def _stream_event_lines(events: list[dict[str, Any]], redactor: Redactor) -> list[str]:
    """``GET /mcp (HTTP 405): what`` for each stream event, through ``redactor``."""
    return [
        redactor.text(
            f"{e['method']} {e['path']}"
            + (f" (HTTP {e['status']})" if e["status"] is not None else "")
            + f": {e['what']}"
        )
        for e in events
    ]


def _repetition_counts(analysis: Analysis) -> dict[str, Any]:
    """The retry groups, and the one answer to "did it run twice?": the writes that ran more than once
    (the first RAN_TWICE_SHOWN of them, whole), their count by certainty, and each of their attempts' call
    with its certainty (the card's filter and the calls' pills; the list is cut, this is not)."""
    entries = analysis.ran_more_than_once
    return {
        "retry_groups": len(analysis.retry_groups),
        "ran_more_than_once": [entry.record() for entry in entries[:RAN_TWICE_SHOWN]],
        "ran_more_than_once_counts": ran_more_than_once_counts(entries),
        "ran_more_than_once_calls": {
            attempt.call_id: entry.certainty.value for entry in entries for attempt in entry.attempts
        },
    }


def script_json(value: Any) -> str:
    """JSON safe inside <script>: no "</script>", no HTML comment openers, no line separators.

    Lone surrogates (a JSON "\\ud800" a server sent) stay escapes: the page must be written as UTF-8.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    text = (
        text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )  # fmt: skip
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def render_report(data: dict[str, Any]) -> str:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mcp_blackbox.templates", ""),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["script_json"] = script_json
    loader = env.loader
    assert loader is not None
    # Line ends as a browser hashes them: a CRLF checkout must not break the policy's hashes.
    style = (loader.get_source(env, "report.css")[0] + outcome_classes()).replace("\r\n", "\n")
    script = loader.get_source(env, "report.js")[0].replace("\r\n", "\n")
    vocabulary = data["vocabulary"]
    return env.get_template("report.html.j2").render(
        data=data,
        meta=data["meta"],
        vocabulary=vocabulary,
        failures={o["name"] for o in vocabulary["outcomes"] if o["failure"]},
        # The cards that count risks say what they count, in the vocabulary's own words.
        explain={certainty.value: certainty.description for certainty in Certainty},
        style=style,
        script=script,
        csp=content_security_policy(style, script),
    )


def outcome_classes() -> str:
    """A CSS class per outcome (``o-NAME``) in its colour: the legend's swatches."""
    return "".join(f"\n.o-{outcome.value} {{ background:{outcome.colour}; }}" for outcome in Outcome) + "\n"


def content_security_policy(style: str, script: str) -> str:
    """Nothing from any network; only this page's own style and script, named by hash.

    Inline markup that escaped the escaping (an ``onerror=``, a ``<script>``) matches no hash and
    does not run. The data block is ``application/json``, which is never executed.
    """

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"

    return f"default-src 'none'; style-src {digest(style)}; script-src {digest(script)}; img-src data:"


def write_report(
    paths: Iterable[str | Path],
    output: str | Path,
    *,
    redact: bool = True,
    analysis: Analysis | None = None,
    aggregate_above: int = AGGREGATE_ABOVE,
) -> dict[str, Any]:
    data = build_report(paths, redact=redact, analysis=analysis, aggregate_above=aggregate_above)
    # What can still hold a lone surrogate (a clientInfo name in the header) is written as an escape.
    Path(output).write_text(render_report(data), encoding="utf-8", errors="backslashreplace")
    return data
