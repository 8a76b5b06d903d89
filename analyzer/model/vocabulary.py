"""The words mcp-blackbox judges with: outcomes, layers, flags, retry origins, confidences, safety.

Each name is spelled here and nowhere else. The analyzer, the addon's live line, the CLI
(``summary``, ``check``), the export and the report's template and script all take them from
this module; the page receives them as data (``vocabulary_data``). A test fails if another
module spells a list of its own. docs/ARCHITECTURE.md, "Vocabulary", says what each means.

Every enum is a ``StrEnum``: a member *is* its string, so records, JSON and CSV carry plain
names and compare equal to them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Layer(StrEnum):
    """Where a call failed (or, for a success, the layer its answer came from)."""

    TRANSPORT = "transport"
    PROTOCOL = "protocol"
    INTERACTION = "interaction"
    APPLICATION = "application"


class Outcome(StrEnum):
    """One per call, in the order the answer's reading tries them, CANCELLED aside (an override): ARCHITECTURE,
    "Outcome precedence", and analyzer/calls/classify.py."""

    NO_RESPONSE = "NO_RESPONSE"
    HTTP_ERROR = "HTTP_ERROR"
    STREAM_INCOMPLETE = "STREAM_INCOMPLETE"
    MALFORMED_JSON = "MALFORMED_JSON"
    INVALID_ENVELOPE = "INVALID_ENVELOPE"
    JSONRPC_ERROR = "JSONRPC_ERROR"
    INVALID_TOOL_RESULT = "INVALID_TOOL_RESULT"
    INPUT_REQUIRED = "INPUT_REQUIRED"
    CANCELLED = "CANCELLED"
    TOOL_ERROR = "TOOL_ERROR"
    TOOL_SUCCESS = "TOOL_SUCCESS"
    SUCCESS = "SUCCESS"
    ACCEPTED = "ACCEPTED"

    @property
    def layer(self) -> Layer:
        return _OUTCOME_FACTS[self][0]

    @property
    def is_failure(self) -> bool:
        """The one answer to "did this call fail?"."""
        return self not in NOT_FAILURES

    @property
    def colour(self) -> str:
        return _OUTCOME_FACTS[self][1]

    @property
    def description(self) -> str:
        return _OUTCOME_FACTS[self][2]


# layer, colour (the report's bars, pills and legend), what it means
_OUTCOME_FACTS: dict[Outcome, tuple[Layer, str, str]] = {
    Outcome.NO_RESPONSE: (
        Layer.TRANSPORT, "#d92d20", "The request went out; no HTTP response came (refused, reset, timed out)."
    ),
    Outcome.HTTP_ERROR: (
        Layer.TRANSPORT, "#f04438", "A status other than 2xx, without a JSON-RPC error in the body: 401, 404, 429, 503…"
    ),
    Outcome.STREAM_INCOMPLETE: (
        Layer.TRANSPORT,
        "#b42318",
        "The response started (an SSE stream, or a body cut before its declared length) and ended before the answer.",
    ),
    Outcome.MALFORMED_JSON: (Layer.PROTOCOL, "#dc6803", "The answer is not JSON."),
    Outcome.INVALID_ENVELOPE: (
        Layer.PROTOCOL, "#f79009", "Not a valid JSON-RPC 2.0 response: wrong id, both or neither of result and error."
    ),
    Outcome.JSONRPC_ERROR: (
        Layer.PROTOCOL, "#e04f16", "A JSON-RPC error object, whatever the HTTP status that carried it."
    ),
    Outcome.INVALID_TOOL_RESULT: (Layer.PROTOCOL, "#fdb022", "A tools/call result of the wrong shape."),
    Outcome.INPUT_REQUIRED: (
        Layer.INTERACTION, "#7a5af8", "The server asked for input: a round of the conversation, not a failure."
    ),
    Outcome.CANCELLED: (Layer.INTERACTION, "#9e77ed", "The client cancelled the request."),
    Outcome.TOOL_ERROR: (Layer.APPLICATION, "#c11574", "The tool ran and reported a failure (isError: true)."),
    Outcome.TOOL_SUCCESS: (Layer.APPLICATION, "#12b76a", "A tools/call completed."),
    Outcome.SUCCESS: (Layer.APPLICATION, "#32d583", "Any other request completed."),
    Outcome.ACCEPTED: (Layer.TRANSPORT, "#98a2b3", "A notification, accepted (202, or another 2xx)."),
}  # fmt: skip

# INPUT_REQUIRED is a round of an interaction, not an error; everything else not listed failed.
NOT_FAILURES = frozenset({Outcome.SUCCESS, Outcome.TOOL_SUCCESS, Outcome.ACCEPTED, Outcome.INPUT_REQUIRED})
# A failure after which the server may or may not have run the request.
EFFECTS_UNKNOWN = frozenset({Outcome.NO_RESPONSE, Outcome.STREAM_INCOMPLETE, Outcome.CANCELLED})
# The server answered, so it ran: a replay repeats the work, it does not recover it.
ANSWERED_WRONGLY = frozenset({Outcome.MALFORMED_JSON, Outcome.INVALID_ENVELOPE, Outcome.INVALID_TOOL_RESULT})


def is_failure(outcome: str | None) -> bool:
    """For outcome names read back from an export (plain strings); a call not yet judged did not succeed."""
    return outcome not in NOT_FAILURES


class Flag(StrEnum):
    """What the outcome alone hides; a call may have several."""

    HTTP_STATUS_MISMATCH = "HTTP_STATUS_MISMATCH"
    SUSPECT_SOFT_ERROR = "SUSPECT_SOFT_ERROR"
    EMPTY_RESULT = "EMPTY_RESULT"
    OUTPUT_SCHEMA_VIOLATION = "OUTPUT_SCHEMA_VIOLATION"
    ORPHAN_RESPONSE = "ORPHAN_RESPONSE"
    DUPLICATE_RESPONSE = "DUPLICATE_RESPONSE"
    ID_REUSED = "ID_REUSED"
    LATE_RESPONSE = "LATE_RESPONSE"
    ANSWERED_AFTER_CANCEL = "ANSWERED_AFTER_CANCEL"
    UNSAFE_RETRY = "UNSAFE_RETRY"
    DUPLICATE_EXECUTION = "DUPLICATE_EXECUTION"
    RETRY_AFTER_IGNORED = "RETRY_AFTER_IGNORED"
    TRUNCATED_IN_CAPTURE = "TRUNCATED_IN_CAPTURE"
    STDERR_DURING_CALL = "STDERR_DURING_CALL"

    @property
    def description(self) -> str:
        return _FLAG_DESCRIPTIONS[self]


_FLAG_DESCRIPTIONS: dict[Flag, str] = {
    Flag.HTTP_STATUS_MISMATCH: "A JSON-RPC error carried by a 4xx, or a result carried by a non-2xx status.",
    Flag.SUSPECT_SOFT_ERROR: "isError is false, but the content reads like an error.",
    Flag.EMPTY_RESULT: "isError is false, and nothing was returned.",
    Flag.OUTPUT_SCHEMA_VIOLATION: "structuredContent breaks the tool's outputSchema from tools/list.",
    Flag.ORPHAN_RESPONSE: "A response that answers no request in the capture.",
    Flag.DUPLICATE_RESPONSE: "More than one response to one request; the first counts.",
    Flag.ID_REUSED: "A request id used again in the same scope.",
    Flag.LATE_RESPONSE: "The answer arrived on a resumed GET stream.",
    Flag.ANSWERED_AFTER_CANCEL: "A result arrived after the client cancelled: the server did the work anyway.",
    Flag.UNSAFE_RETRY: (
        "A tool that is not read-only or idempotent was called again after a failure that may have run it."
    ),
    Flag.DUPLICATE_EXECUTION: (
        "The same client ran again a tool not marked read-only or idempotent, with identical arguments, after an "
        "earlier execution that completed or may have: a write that may have happened twice."
    ),
    Flag.RETRY_AFTER_IGNORED: "Retried sooner than the 429's (or 503's) Retry-After asked.",
    Flag.TRUNCATED_IN_CAPTURE: (
        "The stream was longer than the recorder keeps (mcp_stream_max_body): the client got every byte, the "
        "capture holds its head and its tail. A capture's limit, not a transport failure."
    ),
    Flag.STDERR_DURING_CALL: (
        "A stdio server's stderr shows an exception or a traceback written during a call that returned success "
        "or an empty result: a swallowed exception."
    ),
}


class Certainty(StrEnum):
    """How sure "it ran more than once" is (analyzer/across/repeated_runs.py)."""

    CERTAIN = "certain"
    POSSIBLE = "possible"

    @property
    def description(self) -> str:
        return _CERTAINTY_DESCRIPTIONS[self]


_CERTAINTY_DESCRIPTIONS: dict[Certainty, str] = {
    Certainty.CERTAIN: "Two or more of its attempts answered with a result: the tool ran more than once.",
    Certainty.POSSIBLE: (
        "An attempt whose effects are unknown (no answer, a cut stream, a 5xx) was sent again and reached the "
        "server: the tool may have run more than once."
    ),
}


# The per-call facts that "ran more than once" (analyzer/across/repeated_runs.py) answers for: the export keeps
# them on each call (its stable shape); the page and the summaries show the one answer instead, so that a
# reader gets one count for one question.
RAN_TWICE_FLAGS = frozenset({Flag.DUPLICATE_EXECUTION, Flag.UNSAFE_RETRY})


# Flags that put a success in doubt: the call did not fail by its outcome, but what came back (or what the
# server wrote meanwhile) says something went wrong. The incident document lists such calls apart.
DOUBTED_SUCCESS = frozenset(
    {
        Flag.HTTP_STATUS_MISMATCH,
        Flag.SUSPECT_SOFT_ERROR,
        Flag.EMPTY_RESULT,
        Flag.OUTPUT_SCHEMA_VIOLATION,
        Flag.STDERR_DURING_CALL,
    }
)


class RetryOrigin(StrEnum):
    """Who (or what) made a repeated attempt."""

    TRANSPORT_RESUME = "transport-resume"
    AUTH_RETRY = "auth-retry"
    SESSION_REINIT = "session-reinit"
    PROTOCOL_FALLBACK = "protocol-fallback"
    MRTR_ROUND = "mrtr-round"
    APP_RETRY = "app-retry"
    AGENT_RETRY = "agent-retry"
    MANUAL = "manual"
    PROXY = "proxy"
    UNKNOWN = "unknown"

    @property
    def retries_a_failure(self) -> bool:
        """Negotiation and MRTR rounds are linked like retries, but nothing failed."""
        return self not in (RetryOrigin.PROTOCOL_FALLBACK, RetryOrigin.MRTR_ROUND)

    @property
    def description(self) -> str:
        return _ORIGIN_DESCRIPTIONS[self]


_ORIGIN_DESCRIPTIONS: dict[RetryOrigin, str] = {
    RetryOrigin.TRANSPORT_RESUME: "The SDK resumed a broken stream (GET with Last-Event-ID); nothing ran twice.",
    RetryOrigin.AUTH_RETRY: "The same request again after 401/403, with credentials added or changed.",
    RetryOrigin.SESSION_REINIT: "After a 404 on the session, a fresh initialize and the request again.",
    RetryOrigin.PROTOCOL_FALLBACK: "A refused modern probe (or Streamable HTTP), then initialize: negotiation.",
    RetryOrigin.MRTR_ROUND: "input_required answered under a new id: a round, not a failure.",
    RetryOrigin.APP_RETRY: "The application sent the failed request again.",
    RetryOrigin.AGENT_RETRY: "After isError, the same tool again (other arguments only in the same session).",
    RetryOrigin.MANUAL: "The same client after a long pause: a person, not a loop.",
    RetryOrigin.PROXY: "A gateway's copy (x-envoy-attempt-count, the same X-Request-ID, or a re-send within 0.5 s).",
    RetryOrigin.UNKNOWN: "Linked, but nothing tells who re-sent it.",
}


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @staticmethod
    def weakest(*levels: Confidence) -> Confidence:
        """A chain of links is only as sure as its weakest link."""
        return max(levels, key=list(Confidence).index)


class Safety(StrEnum):
    """A retry group's replay-safety verdict (a retry decision table: what a replay after each failure does)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    RESUMED = "resumed"
    NOT_A_FAILURE_RETRY = "not-a-failure-retry"
    RETRY_AFTER_IGNORED = "retry-after-ignored"
    POINTLESS = "pointless"
    DO_NOT_REPLAY = "do-not-replay"
    DEPENDS_ON_TOOL = "depends-on-tool"

    @property
    def is_unsafe(self) -> bool:
        return self is Safety.UNSAFE

    @property
    def description(self) -> str:
        return _SAFETY_DESCRIPTIONS[self]


_SAFETY_DESCRIPTIONS: dict[Safety, str] = {
    Safety.SAFE: "Nothing in the capture says the replay was harmful.",
    Safety.UNSAFE: "A tool that may have run was called again, and is not marked read-only or idempotent.",
    Safety.RESUMED: "The stream was resumed, not re-executed.",
    Safety.NOT_A_FAILURE_RETRY: "Negotiation or an input_required round: nothing failed.",
    Safety.RETRY_AFTER_IGNORED: "Retried sooner than Retry-After asked.",
    Safety.POINTLESS: "Retried unchanged after -32602 invalid params: it will fail again.",
    Safety.DO_NOT_REPLAY: "Replayed after a malformed answer: the server answered, so it ran.",
    Safety.DEPENDS_ON_TOOL: "The tool ran and reported an error; repeating it depends on what it does.",
}


class Transport(StrEnum):
    """What carried a call: an HTTP exchange (through the proxy) or a stdio server's pipes (``record --stdio``)."""

    HTTP = "http"
    STDIO = "stdio"


class Ending(StrEnum):
    """How a call that got no answer ended (analyzer/calls/anatomy.py): the question of every "Request timed out"."""

    CLIENT_CANCEL = "client-cancel"
    CLIENT_CLOSE = "client-close"
    SERVER_CUT = "server-cut"
    RESET = "reset"
    PROXY = "proxy"
    HTTP_STATUS = "http-status"
    NEVER_ANSWERED = "never-answered"
    CAPTURE_END = "capture-end"

    @property
    def description(self) -> str:
        return _ENDING_DESCRIPTIONS[self]


_ENDING_DESCRIPTIONS: dict[Ending, str] = {
    Ending.CLIENT_CANCEL: "The client sent notifications/cancelled: it gave up waiting.",
    Ending.CLIENT_CLOSE: "The client closed the connection or the stream before the answer.",
    Ending.SERVER_CUT: "The server closed or reset the stream, or closed the connection, without the answer.",
    Ending.RESET: "An HTTP/2 stream reset before the answer, by a side the capture does not know.",
    Ending.PROXY: "The proxy ended it: it could not reach the server, or was stopped.",
    Ending.HTTP_STATUS: "An HTTP error status came instead of a JSON-RPC answer (from the server or a gateway).",
    Ending.NEVER_ANSWERED: "The server took the request (a 202 or a body without the answer); no answer followed.",
    Ending.CAPTURE_END: "Nothing ended it before the capture did: still waiting when recording stopped.",
}


def vocabulary_data() -> dict[str, Any]:
    """Everything a page or a script needs to name, colour and explain what the analyzer says."""
    return {
        "outcomes": [
            {
                "name": o.value,
                "layer": o.layer.value,
                "failure": o.is_failure,
                "colour": o.colour,
                "description": o.description,
            }
            for o in Outcome
        ],
        "layers": [layer.value for layer in Layer],
        # A flag that feeds "ran more than once" is not shown on its own: the page shows that answer.
        "flags": [{"name": f.value, "description": f.description, "shown": f not in RAN_TWICE_FLAGS} for f in Flag],
        "certainties": [{"name": c.value, "description": c.description} for c in Certainty],
        "origins": [
            {"name": o.value, "failure_retry": o.retries_a_failure, "description": o.description} for o in RetryOrigin
        ],
        "confidences": [c.value for c in Confidence],
        "safety": [{"name": s.value, "unsafe": s.is_unsafe, "description": s.description} for s in Safety],
        "endings": [{"name": e.value, "description": e.description} for e in Ending],
    }
