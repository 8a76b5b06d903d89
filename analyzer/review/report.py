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

The calls come from a stream (``CallStream``; a windowed one keeps memory to the window): each is kept on
disk as it becomes final (review/report_calls.py), and the page is built from them in one pass once the
stream is read, when what decides a call's row is known. So memory holds what the page carries (the
eventful calls' rows, the aggregates, the details), not the analysis.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import io
import json
import math
import re
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import jinja2

from mcp_blackbox.analyzer.across.call_stream import CallStream
from mcp_blackbox.analyzer.model.contract import ClientRecord
from mcp_blackbox.analyzer.model.vocabulary import Certainty, Outcome, vocabulary_data
from mcp_blackbox.analyzer.outputs.analysis import Analysis
from mcp_blackbox.analyzer.outputs.export import ran_more_than_once_counts
from mcp_blackbox.analyzer.read.time_range import range_lines
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.review.report_calls import Kept, KeptCalls, microseconds
from mcp_blackbox.analyzer.review.report_details import details
from mcp_blackbox.analyzer.review.top_errors import top_errors
from mcp_blackbox.analyzer.wire.inputs import capture_name, capture_names, expand_captures

DETAIL_LIMIT = 3000  # calls whose bytes the report carries (failures and retries first)
RAN_TWICE_SHOWN = 20  # writes that ran more than once, listed whole in the header (all are counted)
# Above this many calls the uneventful ones are aggregated per lane and time bucket (``Kept.eventful``): one row
# per call would make a page of about 300 bytes a call, too big for a browser at a million calls.
AGGREGATE_ABOVE = 50_000
AGGREGATE_BUCKETS = 500  # at most this many buckets across the capture's span, per lane
BUCKET_STEPS_MS = [
    1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5, 108e5, 216e5, 432e5, 864e5,
]  # fmt: skip
AGGREGATE_COLUMNS = [
    "lane", "t0", "t1", "count", "outcomes", "methods", "tools", "dur_min", "dur_p50", "dur_p95", "dur_max",
]  # fmt: skip
TOP_ERRORS = 10  # errors listed in the header, each a filter (review/top_errors.py groups them)
LANE_KINDS = {"connection": "conn", "sse-session": "sse", "stdio": "stdio"}  # short names in the timeline's lane labels
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
JSON_CHUNK = 1000  # members of a list or mapping encoded at a time when the page's data is written
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


def build_report(
    paths: Iterable[str | Path],
    *,
    redact: bool = True,
    analysis: Analysis | CallStream | None = None,
    aggregate_above: int = AGGREGATE_ABOVE,
) -> dict[str, Any]:
    """The report's data; ``analysis`` of the same paths: a whole one, or a ``CallStream`` not read yet (the
    command's, through a window). Without it the captures are analyzed whole.

    Above ``aggregate_above`` calls the uneventful ones (``Kept.eventful`` says which are not) are folded into
    per-lane time buckets (``aggregates``) and only the eventful calls get a row each.
    """
    sources = [str(p) for p in paths]
    analysis = analysis if analysis is not None else CallStream(sources)
    redactor = Redactor.of(redact)  # every peer's word on the page passes through it
    kept = KeptCalls(redactor).read(analysis.final_calls(), analysis.facts)
    files = _capture_files(sources, kept.sources)  # each file read, as the user named it or its directory held it
    origin = kept.captured.start if kept.captured.start is not None else 0.0
    end = kept.captured.end if kept.captured.end is not None else origin
    table = StringTable()
    # The table numbers each text where it is first indexed: in the rows, the aggregates, then the lanes, lane
    # groups, clients, groups and anatomy below. Moving a step renumbers the strings of the same report.
    group_index = {group.record()["retry_group"]: n for n, group in enumerate(analysis.retry_groups)}
    page = _Pass(kept, files, origin, table, ran_more_than_once(analysis), group_index)
    page.read(aggregate_above, bucket_width((end - origin) * 1000))
    errors = page.top_errors()
    # The details are read again from the files the analysis decoded: not those wholly outside the range.
    cut = analysis.range_record() or {}
    read = [s for s in sources if s not in cut.get("captures_not_read", ())]
    shown = details(read, page.worth_opening(), origin, redactor)
    lane_records, lane_groups = page.lanes()
    aggregates = page.aggregates()
    meta = _meta(analysis, kept, sources, origin, redactor)
    # The captures by name (analyzer/wire/inputs.py capture_names): a page made to be shared names no directory.
    names = capture_names(files)
    meta["captures"] = [names[f] for f in files]
    meta["top_errors"] = errors
    if analysis.time_range is not None:  # --since/--until: said in the header (the key only then: no change else)
        meta["range"] = range_lines(analysis.time_range, cut)
    meta.update(
        aggregated=page.aggregated,
        aggregate_above=aggregate_above,
        bucket_ms=page.bucket_ms if page.aggregated else None,
        rows=len(page.rows),
    )
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
        "clients": [[table.index(c[k]) for k in CLIENT_COLUMNS] for c in _client_rows(page.clients(), redactor)],
        "calls": page.rows,
        "aggregate_columns": AGGREGATE_COLUMNS,
        "aggregates": aggregates,
        # [row, then each SSE event's time in microseconds after the call's start]
        "ticks": page.ticks,
        # [row, then each stderr line's time (a stdio server's, written during the call), the same way]
        "stderr_ticks": page.stderr_ticks,
        "group_columns": GROUP_COLUMNS,
        "groups": [_group(g.record(), page.row_of, table) for g in analysis.retry_groups],
        "details": shown,
        "anatomy_columns": ANATOMY_COLUMNS,
        "anatomy": page.anatomies(),
        "vocabulary": vocabulary_data(),
        "strings": table.strings,  # last: every index above is into it
    }


def _capture_files(sources: list[str], seen: Iterable[str]) -> dict[str, int]:
    """Each capture file by its index in meta.captures: the arguments' files (a directory's, a glob's), in order,
    then any other a call came from."""
    files = dict.fromkeys([*expand_captures(sources), *seen])
    return {f: n for n, f in enumerate(files)}


def ran_more_than_once(analysis: Analysis | CallStream) -> set[str]:
    """The ids of every attempt of a write that ran more than once, the first one too."""
    return {attempt.call_id for entry in analysis.ran_more_than_once for attempt in entry.attempts}


def bucket_width(span_ms: float) -> float:
    """A round width (1 s, 2 s, 5 s, 10 s ... 1 day) giving at most AGGREGATE_BUCKETS buckets across the span."""
    for step in BUCKET_STEPS_MS:
        if span_ms / step <= AGGREGATE_BUCKETS:
            return step
    return BUCKET_STEPS_MS[-1]


class _Bucket:
    """The uneventful calls of one lane in one time bucket, summed as they pass: the drawn extent (its first
    call's start to its last call's end), the count, the outcomes, methods and tools counted, the durations."""

    def __init__(self) -> None:
        self.t0 = math.inf
        self.t1 = -math.inf
        self.outcomes: Counter[str] = Counter()
        self.methods: Counter[str] = Counter()
        self.tools: Counter[str] = Counter()
        self.durations = array("d")  # milliseconds

    def add(self, kept: Kept, start: float) -> None:
        """One call, ``start`` milliseconds after the capture's."""
        duration = max(0.0, kept.end - kept.start) * 1000
        self.t0 = min(self.t0, start)
        self.t1 = max(self.t1, start + duration)
        self.outcomes[str(kept.outcome)] += 1
        self.methods[kept.method or "(response)"] += 1
        if kept.tool:
            self.tools[kept.tool] += 1
        self.durations.append(duration)

    def record(self, lane: int, table: StringTable) -> list[Any]:
        """The bucket in AGGREGATE_COLUMNS: outcomes, methods and tools as flat lists (a string's index, its
        count, the next ..., most common first); durations by minimum, median, 95th percentile (nearest rank)
        and maximum."""
        durations = sorted(self.durations)
        return [
            lane, round(self.t0, 3), round(self.t1, 3), len(durations),
            _counted(self.outcomes, table), _counted(self.methods, table), _counted(self.tools, table),
            round(durations[0], 3), _nearest_rank(durations, 0.5), _nearest_rank(durations, 0.95),
            round(durations[-1], 3),
        ]  # fmt: skip


def _nearest_rank(durations: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``durations`` by nearest rank, rounded to the microsecond."""
    return round(durations[max(0, math.ceil(q * len(durations)) - 1)], 3)


def _counted(counter: Counter[str], table: StringTable) -> list[int]:
    return [n for name, count in counter.most_common() for n in (table.index(name), count)]


class _Pass:
    """One pass over the kept calls, in the order they were final: a row for each call that gets one (every
    call up to ``aggregate_above``, else the eventful ones), the others summed into buckets; what the rows
    refer to (lanes, clients, retry groups) numbered as they first appear, and what later parts of the page
    need of the rows (errors, ticks, anatomies, the calls worth opening) set aside."""

    def __init__(
        self,
        kept: KeptCalls,
        files: dict[str, int],
        origin: float,
        table: StringTable,
        ran: set[str],
        group_index: dict[str, int],
    ) -> None:
        self.kept, self.files, self.origin, self.table = kept, files, origin, table
        self.ran = ran  # the ids of the attempts of writes that ran more than once: eventful
        self.group_index = group_index  # a retry chain's id -> its index in ``groups``
        self.rows: list[list[Any]] = []
        self.row_of: dict[str, int] = {}
        self.lane_index: dict[str, int] = {}  # every call's lane, in the order lanes start
        self.lane_first: list[tuple[int, int | None]] = []  # each lane's first call: its file, its identity
        self.client_index: dict[str, int] = {}  # a row's client unit -> index into the page's client table
        self.client_identity: dict[str, int] = {}  # a unit -> the identity its last row named
        self.failed: list[tuple[int, str, str, str]] = []  # (row, call id, outcome, verdict)
        self.ticks: list[list[int]] = []
        self.stderr_ticks: list[list[int]] = []
        self._anatomies: list[tuple[int, Any]] = []
        self._opening: list[tuple[int, int, Kept]] = []  # a heap of the DETAIL_LIMIT calls worth opening
        self._buckets: dict[tuple[int, int], _Bucket] = {}
        self.aggregated = 0
        self.bucket_ms = 0.0

    def read(self, aggregate_above: int, bucket_ms: float) -> None:
        aggregate = len(self.kept) > aggregate_above
        self.bucket_ms = bucket_ms
        previous = 0
        for kept in self.kept:
            lane = self._lane(kept)
            eventful = kept.eventful(self.ran)
            if aggregate and not eventful:
                self.aggregated += 1
                start = (kept.start - self.origin) * 1000
                self._buckets.setdefault((lane, int(start // bucket_ms)), _Bucket()).add(kept, start)
                continue
            row = self._row(kept, lane)
            row[8], previous = row[8] - previous, row[8]  # t0 as the step from the previous row
            self._keep_for_later(kept, len(self.rows), eventful)
            self.rows.append(row)

    def _lane(self, kept: Kept) -> int:
        found = self.lane_index.get(kept.lane)
        if found is None:
            found = self.lane_index[kept.lane] = len(self.lane_index)
            self.lane_first.append((self.files.get(kept.source, 0), kept.client))
        return found

    def _row(self, kept: Kept, lane: int) -> list[Any]:
        """The call in COLUMNS, its t0 still after the first call (``read`` makes it a step)."""
        client = None
        if kept.client is not None:
            unit = self.kept.identities[kept.client].unit
            client = self.client_index.setdefault(unit, len(self.client_index))
            self.client_identity[unit] = kept.client
        s = self.table.index
        return [
            kept.call_id, lane, s(kept.method), s(kept.tool), kept.rpc_id, s(kept.outcome), kept.status,
            s(kept.flags), round((kept.start - self.origin) * 1e6), round(max(0.0, kept.end - kept.start) * 1e6),
            self.group_index.get(kept.retry_group) if kept.retry_group else None, s(kept.origin),
            s(kept.confidence), self.files.get(kept.source, 0), s(kept.verdict), kept.error_code, client,
            s(kept.carrier), None,
        ]  # fmt: skip

    def _keep_for_later(self, kept: Kept, n: int, eventful: bool) -> None:
        """What the parts after the rows need of row ``n``."""
        self.row_of[kept.call_id] = n
        if kept.failed:
            self.failed.append((n, kept.call_id, str(kept.outcome), kept.verdict))
        if kept.ticks:
            self.ticks.append([n, *kept.ticks])
        if kept.stderr_ticks:
            self.stderr_ticks.append([n, *kept.stderr_ticks])
        if kept.anatomy is not None:
            self._anatomies.append((n, kept.anatomy))
        # The calls whose bytes the page carries: every eventful call first, then the rest, each by number.
        rank = (-int(not eventful), -kept.number, kept)
        if len(self._opening) < DETAIL_LIMIT:
            heapq.heappush(self._opening, rank)
        elif rank[:2] > self._opening[0][:2]:
            heapq.heapreplace(self._opening, rank)

    def worth_opening(self) -> list[Kept]:
        return [kept for _, _, kept in sorted(self._opening, key=lambda r: (-r[0], -r[1]))]

    def top_errors(self) -> list[dict[str, Any]]:
        """The TOP_ERRORS most frequent errors of the failed calls (review/top_errors.py: the reasons with the
        figures that differ set aside), each with its count and first call; each failed call's row gets its
        error's index (column ``error``)."""
        errors = top_errors((call_id, outcome, verdict) for _, call_id, outcome, verdict in self.failed)
        errors = errors[:TOP_ERRORS]
        index = {call_id: k for k, e in enumerate(errors) for call_id in e.calls}
        column = COLUMNS.index("error")
        for n, call_id, _, _ in self.failed:
            self.rows[n][column] = index.get(call_id)
        return [{"outcome": e.outcome, "error": e.error, "count": e.count, "first": e.first} for e in errors]

    def aggregates(self) -> list[list[Any]]:
        """The buckets' records (``_Bucket.record``), by start, then lane."""
        records = [bucket.record(lane, self.table) for (lane, _), bucket in self._buckets.items()]
        records.sort(key=lambda r: (r[1], r[0]))
        return records

    def lanes(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The lanes in index order, each in a group: the capture its first call came from and that call's client
        lineage (calls without a client identity are a group of their own in their capture)."""
        groups: dict[tuple[int, str | None], int] = {}
        records = []
        for lane, (source, identity_index) in zip(self.lane_index, self.lane_first, strict=True):
            identity = self.kept.identities[identity_index] if identity_index is not None else None
            lineage = identity.lineage if identity is not None else None
            group = groups.setdefault((source, lineage), len(groups))
            address = identity.address if identity is not None else None
            records.append({"id": lane, "label": _lane_label(lane, address), "group": group})
        return records, [{"source": source, "lineage": lineage} for source, lineage in groups]

    def clients(self) -> list[ClientRecord]:
        """One record per client unit of the rows, in the order of their indices (the rows refer to them)."""
        identities = self.kept.identities
        return [identities[self.client_identity[unit]].record() for unit in self.client_index]

    def anatomies(self) -> list[list[Any]]:
        """The timeout anatomy of every row's call that got no answer, in ANATOMY_COLUMNS. The sentences recur
        (the same few endings after the same few waits): the table holds each once."""
        s = self.table.index
        return [
            [n, a.reached_server_us, a.progress, a.other_notifications, a.last_us, s(a.ended_by), a.waited_us,
             s(a.detail), s(a.sentence)]
            for n, a in self._anatomies
        ]  # fmt: skip


def _group(record: Any, row_of: dict[str, int], table: StringTable) -> list[Any]:
    """A retry chain's record (``RetryGroup.record``) in GROUP_COLUMNS. Every attempt of a chain is eventful,
    so each has a row; with --since/--until, the attempts outside the range have none and are not drawn."""
    return [
        record["retry_group"], table.index(record["origin"]), table.index(record["confidence"]),
        [row_of[m] for m in record["members"] if m in row_of], int(record["failure_retry"]),
        microseconds(record["total_ms"]), table.index(record["final_outcome"]), table.index(record["safety"]),
        int(record["may_have_run_twice"]), [table.index(line) for line in record["evidence"]],
    ]  # fmt: skip


def _lane_label(lane: str, address: str | None) -> str:
    """A short readable name: the session id's first digits, or the client's address for a connection."""
    kind, _, name = lane.partition(":")
    if kind == "connection" and address:
        return f"conn {address}"
    if kind == "stdio":  # stdio:<capture file>:<pid>
        return f"stdio pid {name.rpartition(':')[2]}"
    return f"{LANE_KINDS.get(kind, kind)} {name[:8]}"


def _client_rows(records: list[ClientRecord], redactor: Redactor) -> list[dict[str, Any]]:
    """The clients' records as plain mappings, for the page's columns: the process as one text; a User-Agent
    or clientInfo is the client's own text, redacted like the export's."""
    return [
        {**record, "process": f"pid {p['pid']} ({p['name']})" if (p := record["process"]) else None}
        for record in (redactor.client(record) for record in records)
    ]


def _meta(
    analysis: Analysis | CallStream, kept: KeptCalls, paths: list[str], origin: float, redactor: Redactor
) -> dict[str, Any]:
    """The page's header: the captures, their span and who took part, the counts of the verdicts, what was
    read and how, and the retries and repeated executions; the keys in the order the page's JSON has them."""
    facts = kept.captured.facts(paths, analysis.facts)
    return {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "captures": paths,
        "start": origin,
        "end": facts["end"] if facts["end"] is not None else origin,
        **{key: facts[key] for key in ("clients", "user_agents", "servers", "versions")},
        "outcomes": dict(kept.outcomes.most_common()),
        "layers": dict(kept.layers.most_common()),
        "flags": dict(kept.flags.most_common()),
        "calls": len(kept),
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


def _repetition_counts(analysis: Analysis | CallStream) -> dict[str, Any]:
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
    return "".join(script_json_pieces(value))


def script_json_pieces(value: Any) -> Iterator[str]:
    """``script_json`` in pieces: a mapping's entries and a long list's items a chunk at a time, so that a
    page of tens of MB is written without being held whole (and copied by each escape) first. Joined, the
    pieces are the JSON of the whole: with no spaces in the separators, a container's JSON is its members'
    joined by commas."""
    for piece in _json_pieces(value, top=True):
        yield _script_safe(piece)


def _json_pieces(value: Any, *, top: bool = False) -> Iterator[str]:
    if isinstance(value, dict) and (top or len(value) > JSON_CHUNK):
        yield "{"
        for n, (key, member) in enumerate(value.items()):
            yield ("," if n else "") + _json({key: 0})[1:-2]  # the key as JSON writes it (None as "null")
            yield from _json_pieces(member)
        yield "}"
    elif isinstance(value, list) and len(value) > JSON_CHUNK:
        yield "["
        for start in range(0, len(value), JSON_CHUNK):
            yield ("," if start else "") + _json(value[start : start + JSON_CHUNK])[1:-1]
        yield "]"
    else:
        yield _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _script_safe(text: str) -> str:
    text = (
        text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )  # fmt: skip
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def render_report(data: dict[str, Any]) -> str:
    """The page as one text (``write_page`` writes it in pieces)."""
    page = io.StringIO()
    write_page(data, page)
    return page.getvalue()


def write_page(data: dict[str, Any], out: IO[str]) -> None:
    """The page into ``out``: the template rendered around a placeholder for the data, which is then written
    in pieces (``script_json_pieces``) where the placeholder stood."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mcp_blackbox.templates", ""),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    loader = env.loader
    assert loader is not None
    # Line ends as a browser hashes them: a CRLF checkout must not break the policy's hashes.
    style = (loader.get_source(env, "report.css")[0] + outcome_classes()).replace("\r\n", "\n")
    script = loader.get_source(env, "report.js")[0].replace("\r\n", "\n")
    vocabulary = data["vocabulary"]
    # Unguessable, so that no captured text in the header can stand for it.
    placeholder = f"report-data-{uuid.uuid4().hex}"
    html = env.get_template("report.html.j2").render(
        data_placeholder=placeholder,
        meta=data["meta"],
        vocabulary=vocabulary,
        failures={o["name"] for o in vocabulary["outcomes"] if o["failure"]},
        # The cards that count risks say what they count, in the vocabulary's own words.
        explain={certainty.value: certainty.description for certainty in Certainty},
        style=style,
        script=script,
        csp=content_security_policy(style, script),
    )
    head, tail = html.split(placeholder)
    out.write(head)
    for piece in script_json_pieces(data):
        out.write(piece)
    out.write(tail)


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
    analysis: Analysis | CallStream | None = None,
    aggregate_above: int = AGGREGATE_ABOVE,
) -> dict[str, Any]:
    data = build_report(paths, redact=redact, analysis=analysis, aggregate_above=aggregate_above)
    # What can still hold a lone surrogate (a clientInfo name in the header) is written as an escape.
    with open(output, "w", encoding="utf-8", errors="backslashreplace") as out:
        write_page(data, out)
    return data
