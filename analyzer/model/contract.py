"""The export contract's records, each defined once (docs/ARCHITECTURE.md, "Export contract").

``CallRecord`` is one call as ``export`` writes it; the CSV's columns and the pandas frame's columns are
its keys, in this order (``CALL_COLUMNS``). ``RetryGroupRecord`` is one retry group, ``DuplicateRecord``
one write the same client ran again. tests/unit/test_contract.py holds the builders, the frames and
ARCHITECTURE to these definitions.

Values are what JSON carries: a vocabulary member is its string (a ``StrEnum``), times are epoch
seconds and ISO-8601 text, and collections are lists: a record reads back from the JSON export as it was
built (``Analysis.calls`` and ``json.load`` of the export give equal records).
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from mcp_blackbox.analyzer.model.vocabulary import Certainty, Confidence, Flag, Layer, Outcome, RetryOrigin, Safety


class EpochSeconds:
    """Marks a float field as a time, in seconds since the epoch (a frame makes it a UTC datetime)."""


class ProcessRecord(TypedDict):
    """The local process that sent a call, as the recorder measured it (addon/peer_process.py)."""

    pid: int
    name: str
    started_at: float  # epoch seconds


class ClientRecord(TypedDict):
    """Who sent a call (analyzer/model/identity.py)."""

    lineage: str
    unit: str
    address: str | None
    session: str | None
    user_agent: str | None
    client_info: str | None
    protocol_version: str | None
    joined: str
    process: ProcessRecord | None  # null: not recorded (a remote client, a gateway, an older capture)


class ServerSent(TypedDict):
    progress: int
    other_notifications: int
    last_ms: float | None


class EndingRecord(TypedDict):
    """The timeout anatomy of a request that got no answer (analyzer/calls/anatomy.py); milliseconds after
    the request."""

    reached_server_ms: float | None
    server_sent: ServerSent
    ended_by: str  # an Ending
    waited_ms: float | None
    detail: str | None


class StderrRecord(TypedDict):
    t: float
    text: str


class CallRecord(TypedDict):
    call_id: str
    scope: str
    direction: str
    method: str | None
    tool: str | None
    prompt: str | None
    resource_uri: str | None
    jsonrpc_id: Any  # as sent: a number, a string or null (1 and "1" are different ids)
    outcome: Outcome  # every call recorded has been judged
    layer: Layer
    http_status: int | None
    error_code: int | None
    error_message: str | None
    reason: str
    result_excerpt: str | None
    flags: list[Flag]
    t_start: Annotated[float, EpochSeconds]
    t_end: Annotated[float, EpochSeconds] | None
    started_at: str | None  # None for a time ISO-8601 cannot write (years outside 1 to 9999)
    ended_at: str | None
    duration_ms: float | None
    ending: EndingRecord | None
    sse_events: int
    exchanges: list[str]
    retry_group: str | None
    attempt: int
    retry_origin: RetryOrigin | None
    retry_confidence: Confidence | None
    client: ClientRecord | None
    session_id: str | None
    arguments_digest: str | None
    protocol_version: str | None
    evidence: list[str]
    source: str
    carrier: str  # vocabulary.Transport: http or stdio (a plain column in a frame)
    endpoint: str
    stderr: list[StderrRecord] | None


class RetryGroupRecord(TypedDict):
    retry_group: str
    origin: RetryOrigin
    confidence: Confidence
    members: list[str]
    attempts: int
    failure_retry: bool
    total_ms: float
    final_outcome: Outcome | None
    safety: Safety
    may_have_run_twice: bool
    evidence: list[str]


class DuplicateRecord(TypedDict):
    tool: str
    arguments_digest: str
    lineage: str
    calls: list[str]
    executions: list[str]


class AttemptRecord(TypedDict):
    """One attempt of a tool call that ran more than once, and how it ended."""

    call_id: str
    outcome: Outcome | None
    http_status: int | None
    ran: str  # across/executions.Execution: "ran", "may have run" or "did not run"
    retry_group: str | None  # the retry chain that holds it; null: sent again, not as a retry


class RanMoreThanOnceRecord(TypedDict):
    """A write (a tool not marked readOnlyHint or idempotentHint) that one client ran more than once with the
    same arguments, or may have (analyzer/across/repeated_runs.py): the one answer to "did it run twice?"."""

    tool: str
    arguments_digest: str
    lineage: str
    certainty: Certainty  # certain: two or more runs answered; possible: a run's effects are unknown
    runs: int  # the attempts that ran or may have
    attempts: list[AttemptRecord]  # every attempt, the retry chains' too, in the order they started


class FindingRecord(TypedDict):
    """A named pattern across calls (analyzer/across/patterns.py): what it is, how big, and what shows it."""

    rule: str  # the rule's stable name, from the rule table
    title: str  # one line
    summary: str  # one or two sentences, with the figures
    evidence: list[str]  # what the capture shows, line by line
    calls: list[str]  # the calls it is about, in the order they started
    start: Annotated[float, EpochSeconds]
    end: Annotated[float, EpochSeconds]


CALL_COLUMNS: tuple[str, ...] = tuple(CallRecord.__annotations__)
RETRY_GROUP_COLUMNS: tuple[str, ...] = tuple(RetryGroupRecord.__annotations__)
