"""What the report keeps of each call as the analysis streams past: a ``Kept`` record per call, on disk.

The report is built from a ``CallStream`` (analyzer/across/call_stream.py), whose calls are final one at a
time and then gone. Which of them get a row of their own is known only at the end: a capture over
AGGREGATE_ABOVE calls folds the uneventful ones, and a call becomes eventful late when a later call turns
out to have run the same write again (``ran_more_than_once`` is whole once the stream is read). So every
call is kept as a small record of what any part of the page may show of it (its row, its place in an
aggregate, its lane, its ticks, its timeout anatomy, the details panel's evidence), written to a
``Spool`` as it comes; ``report.build_report`` reads them back in order once the stream is done, and
holds only what the page carries. Memory then follows the page, not the recording.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from mcp_blackbox.analyzer.across.spool import Spool
from mcp_blackbox.analyzer.calls.anatomy import describe, ending
from mcp_blackbox.analyzer.calls.classify import CaptureFacts
from mcp_blackbox.analyzer.model.identity import ClientIdentity
from mcp_blackbox.analyzer.model.noteworthy import noteworthy
from mcp_blackbox.analyzer.model.records import Call
from mcp_blackbox.analyzer.outputs.call_record import reason
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.review.captured import Captured

TICK_LIMIT = 50  # SSE event ticks drawn per call
STDERR_SHOWN = 200  # stderr lines of one call carried in its details (the timeline ticks them all, up to TICK_LIMIT)


class Anatomy(NamedTuple):
    """A call's timeout anatomy (analyzer/calls/anatomy.py ``ending``) as the page draws it: times in
    microseconds after the call's start (None when unknown); detail and sentence redacted."""

    reached_server_us: int | None
    progress: int
    other_notifications: int
    last_us: int | None
    ended_by: str
    waited_us: int | None
    detail: str | None
    sentence: str


class Kept(NamedTuple):
    """One call as the report keeps it. Texts a peer wrote (the verdict's reason, evidence, stderr, the
    anatomy's words) are already redacted; times are the capture's (seconds), made relative at the end."""

    call_id: str
    number: int
    lane: str  # ``lane_key``
    method: str | None
    tool: str | None
    rpc_id: Any
    outcome: str | None
    status: int | None
    flags: str  # space-separated, as the row shows them
    start: float
    end: float  # its end, or its start when it has none
    retry_group: str | None
    origin: str | None
    confidence: str | None
    source: str  # the capture file it came from
    verdict: str  # the reason for its verdict, one line
    error_code: Any
    client: int | None  # index into ``KeptCalls.identities``
    carrier: str | None
    failed: bool
    noteworthy: bool  # a failure, a flag or a retry chain: eventful whatever comes later
    ticks: tuple[int, ...]  # each SSE event's time, microseconds after the start
    stderr_ticks: tuple[int, ...]  # each stderr line's, the same way
    anatomy: Anatomy | None
    evidence: tuple[str, ...]
    flow_ids: tuple[str, ...]  # its exchanges', for the details read from the files again
    stderr: tuple[tuple[float, str], ...]  # (time, text) of the first STDERR_SHOWN lines
    stdio: bool  # went over stdio: its details are read from the stdio captures

    def eventful(self, ran_again: set[str]) -> bool:
        """A call that gets a row of its own (``noteworthy``); the others may be aggregated in a huge capture."""
        return self.noteworthy or self.call_id in ran_again


def lane_key(call: Call) -> str:
    """The timeline lane a call is drawn in: its session, or its client connection outside one."""
    scope = call.scope
    if scope.startswith("exchange:"):  # stateless: one lane per client connection
        return f"connection:{call.exchange.client_conn or scope}"
    return scope


class KeptCalls:
    """The calls of a stream, kept (``Kept``, in a ``Spool``) as they become final, with what the header
    counts of all of them (``Captured``, outcomes, layers, flags) and the client identities they name."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.kept: Spool[tuple[Any, ...]] = Spool()
        self.captured = Captured()
        self.outcomes: Counter[Any] = Counter()
        self.layers: Counter[Any] = Counter()
        self.flags: Counter[str] = Counter()
        self.sources: dict[str, None] = {}  # the capture files calls came from, in the order first seen
        self.identities: list[ClientIdentity] = []  # each distinct client identity once (a unit's, mostly)
        self._identity_index: dict[ClientIdentity, int] = {}

    def read(self, calls: Iterable[Call], facts: CaptureFacts) -> KeptCalls:
        """Keep every call; ``facts`` as the stream has them when each call is final."""
        for call in calls:
            self.add(call, facts)
        return self

    def add(self, call: Call, facts: CaptureFacts) -> None:
        self.captured.add(call, facts)
        self.outcomes[call.outcome] += 1
        self.layers[call.layer] += 1
        self.flags.update(call.flags)
        self.sources.setdefault(call.exchange.source)
        self.kept.append(tuple(self._kept(call)))  # a plain tuple pickles in half the time

    def __iter__(self) -> Iterator[Kept]:
        for fields in self.kept:
            yield Kept._make(fields)

    def __len__(self) -> int:
        return len(self.kept)

    def _identity(self, identity: ClientIdentity | None) -> int | None:
        if identity is None:
            return None
        found = self._identity_index.get(identity)
        if found is None:
            found = self._identity_index[identity] = len(self.identities)
            self.identities.append(identity)
        return found

    def _kept(self, call: Call) -> Kept:
        exchange, redactor = call.exchange, self.redactor
        anatomy = ending(call)
        start = call.request.t
        return Kept(
            call.call_id, call.number, lane_key(call), call.method, call.tool, call.request.id,
            None if call.outcome is None else str(call.outcome), exchange.status, " ".join(call.flags), start,
            call.t_end or start, call.retry_group, _text(call.retry_origin), _text(call.retry_confidence),
            exchange.source, redactor.text(reason(call, anatomy)), call.error_code, self._identity(call.client),
            _text(exchange.transport), call.outcome is not None and call.outcome.is_failure,
            noteworthy(call.outcome, call.flags, call.retry_group, False), _ticks(call), _stderr_ticks(call),
            None if anatomy is None else _anatomy(anatomy, exchange.transport, redactor),
            tuple(redactor.text(e) for e in call.evidence), tuple(e.flow_id for e in call.exchanges),
            tuple((line.t, redactor.text(line.text)) for line in call.stderr[:STDERR_SHOWN]),
            bool(call.stderr) or exchange.stdio is not None,
        )  # fmt: skip


def _text(value: Any) -> str | None:
    """An enum or a text as the string table holds it."""
    return None if value is None else str(value)


def microseconds(ms: float | None) -> int | None:
    """Milliseconds (to the microsecond) as integer microseconds: no decimal point, no float's tail."""
    return None if ms is None else round(ms * 1000)


def _anatomy(anatomy: Any, transport: str, redactor: Redactor) -> Anatomy:
    # The detail quotes the proxy's or the stream's own words, and the sentence quotes the detail.
    sent = anatomy["server_sent"]
    return Anatomy(
        microseconds(anatomy["reached_server_ms"]), sent["progress"], sent["other_notifications"],
        microseconds(sent["last_ms"]), anatomy["ended_by"], microseconds(anatomy["waited_ms"]),
        redactor.text(anatomy["detail"]) if anatomy["detail"] else anatomy["detail"],
        redactor.text(describe(anatomy, transport)),
    )  # fmt: skip


def _stderr_ticks(call: Call) -> tuple[int, ...]:
    return tuple(round((line.t - call.request.t) * 1e6) for line in call.stderr[:TICK_LIMIT])


def _ticks(call: Call) -> tuple[int, ...]:
    stream = [m.t for m in (*call.notifications, *call.responses) if m.exchange.is_event_stream]
    return tuple(round((t - call.request.t) * 1e6) for t in sorted(stream)[:TICK_LIMIT])
