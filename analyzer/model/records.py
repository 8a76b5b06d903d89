"""The records the pipeline passes along: Exchange -> Message -> Call, and what the stages find about a call.

Reading and pairing build Exchanges, Messages and Calls. Every later stage returns its result as a typed
record of its own (a ``Verdict``, a ``ClientIdentity``, a ``RetryLink``, ``Finding``s) and ``CallStream``
attaches it to the call, once; the call's outcome, flags and evidence are read from those results.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from mcp_blackbox.analyzer.model.pickling import pickled_by_fields
from mcp_blackbox.analyzer.model.slim import RequestFacts, ResultShape, reference
from mcp_blackbox.analyzer.model.vocabulary import Confidence, Flag, Layer, Outcome, RetryOrigin, Transport

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.model.identity import ClientIdentity, ClientProcess
    from mcp_blackbox.analyzer.model.stdio_session import StderrLine, StdioSession

NO_QUERY: Mapping[str, str] = MappingProxyType({})

# A call is named after the flow that carried its request (analyzer/across/call_ids.py).
DIGITS = 12  # 48 bits: two of a million random flows share a prefix with a chance of about 1 in 500
HEX_ID = re.compile(r"[0-9a-fA-F-]+")


def flow_key(flow_id: str) -> str:
    """The flow's id as DIGITS hex digits: its own digits when it is hex (a UUID), else a hash of it."""
    if HEX_ID.fullmatch(flow_id):
        digits = flow_id.replace("-", "").lower()
        if len(digits) >= DIGITS:
            return digits[:DIGITS]
    return hashlib.sha256(flow_id.encode("utf-8", "surrogatepass")).hexdigest()[:DIGITS]


C2S = "client->server"
S2C = "server->client"
# The endpoint of an exchange read from a stdio capture: stdio://<the server's command> (analyzer/read/stdio_load.py).
STDIO_SCHEME = "stdio://"


@pickled_by_fields
@dataclass(slots=True)
class Exchange:
    """One HTTP request and what came back (a response, an error, or nothing)."""

    flow_id: str
    source: str
    index: int  # position in its file
    method: str
    endpoint: str  # scheme://host:port/path, without the query
    path: str  # without the query
    query_string: str  # as the request line sent it: repeated names, order and escapes kept
    request_headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    request_body: bytes | None
    client_conn: str | None  # mitmproxy's id of the client's connection (shared by keep-alive requests)
    t_request: float
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes | None = None  # as on the wire (content-encoded)
    t_response: float | None = None
    t_end: float | None = None
    error: str | None = None
    t_error: float | None = None
    stream: dict[str, Any] | None = None  # the addon's stream record, if any
    recorded_by_addon: bool = False
    scope: str = ""  # the pairing scope of its messages (see analyzer.pair.scope_of)
    sse_retry: int | None = None  # the last `retry:` (ms) its event stream carried
    client_addr: str | None = None  # "address:port" the client connected from
    # The local process that sent it, as the recorder looked it up (analyzer/read/load.py: ``process_of``); None
    # when not recorded, remote, or a gateway's.
    client_process: ClientProcess | None = None
    # Processes the recorder found late for earlier connections (FlowRecord.earlier_connections): (id, process).
    earlier_processes: tuple[tuple[str, ClientProcess], ...] = ()
    error_text: str | None = None  # an HTTP error's body, whitespace folded, cut (analyzer.extract.error_text)
    stdio: StdioSession | None = None  # the session of a line read from a stdio capture (analyzer/read/stdio_load.py)

    @property
    def transport(self) -> Transport:
        return Transport.STDIO if self.stdio is not None else Transport.HTTP

    @property
    def server(self) -> str:
        """scheme://host:port: where the request went; a stdio server's command."""
        if self.stdio is not None:
            return self.endpoint
        return self.endpoint[: self.endpoint.find("/", self.endpoint.find("//") + 2)] if "//" in self.endpoint else ""

    @property
    def url(self) -> str:
        """The request's URL as sent (not rebuilt from parsed parameters)."""
        return self.endpoint + ("?" + self.query_string if self.query_string else "")

    @property
    def query(self) -> Mapping[str, str]:
        """The query's parameters (the last value of a repeated one), blank values kept."""
        return dict(parse_qsl(self.query_string, keep_blank_values=True)) if self.query_string else NO_QUERY

    @property
    def content_type(self) -> str:
        return self.response_headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def ok(self) -> bool:
        """A 2xx status."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def is_event_stream(self) -> bool:
        return self.content_type == "text/event-stream"

    @property
    def session_id(self) -> str | None:
        return self.request_headers.get("mcp-session-id") or self.response_headers.get("mcp-session-id")

    @property
    def legacy_session(self) -> str | None:
        return self.query.get("sessionId") or self.query.get("session_id")


@pickled_by_fields
@dataclass(slots=True)
class Message:
    """One JSON-RPC object (or what should have been one) found in a body or an SSE event."""

    exchange: Exchange
    direction: str  # C2S when sent in a request body, S2C when received in a response
    kind: str  # request, notification, result, error, invalid
    id: Any
    method: str | None
    body: dict[str, Any] | None  # the parsed object, when kept (see analyzer.slim)
    t: float
    problem: str | None = None  # why it is not valid JSON-RPC, if it is not
    event_id: str | None = None  # the SSE event id it came with
    # One slot for what its kind carries (a capture holds hundreds of thousands of messages):
    # a request's RequestFacts, a result's ResultShape, an error's (code, message), or a
    # notification's progressToken / cancelled requestId as a reference string.
    detail: RequestFacts | ResultShape | tuple[int, str] | str | None = None

    @property
    def facts(self) -> RequestFacts | None:
        return self.detail if isinstance(self.detail, RequestFacts) else None

    @property
    def shape(self) -> ResultShape | None:
        return self.detail if isinstance(self.detail, ResultShape) else None

    @property
    def error(self) -> tuple[int, str] | None:
        return self.detail if isinstance(self.detail, tuple) else None

    @property
    def ref(self) -> str | None:
        return self.detail if isinstance(self.detail, str) else None

    @property
    def key_id(self) -> str:
        """The id as a pairing key: 1 and "1" are different ids in JSON-RPC."""
        return reference(self.id) or "NoneType:None"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One call's judgement (analyzer/calls/classify.py): its outcome, flags, and the evidence for them."""

    outcome: Outcome
    evidence: tuple[str, ...]
    flags: tuple[Flag, ...] = ()  # sorted
    error_code: int | None = None
    error_message: str | None = None

    @property
    def layer(self) -> Layer:
        return self.outcome.layer


@dataclass(frozen=True, slots=True)
class RetryLink:
    """A call's place in a retry group (analyzer/across/retries.py): which attempt, who sent it, how sure."""

    group: str
    attempt: int
    origin: RetryOrigin | None  # None for a group's first attempt, unless the group is a resumed stream
    confidence: Confidence | None


class Stage(IntEnum):
    """The stages that note findings about a call, in the order their lines follow its verdict's evidence."""

    PAIRING = 1  # an id used twice in a scope
    RETRIES = 2  # why a look-alike was not linked; what a retry risked
    EXECUTIONS = 3  # a write the same client ran again


@dataclass(frozen=True, slots=True)
class Finding:
    """What a stage found about a call beyond its verdict: one line of evidence, and the flag it raises."""

    stage: Stage
    why: str
    flag: Flag | None = None


@dataclass(slots=True)
class Call:
    """A request and everything that answered it."""

    request: Message
    scope: str
    responses: list[Message] = field(default_factory=list)
    # Most calls have none of these: an empty tuple until the first one (see ``note``).
    notifications: list[Message] | tuple[()] = ()  # progress, log, cancel
    stray: list[Message] | tuple[()] = ()  # answers on its exchange that name another id
    exchanges: list[Exchange] = field(default_factory=list)  # every HTTP exchange that carried a part
    # The stages' results, each attached once by CallStream (analyzer/across/call_stream.py).
    verdict: Verdict | None = None  # None until judged
    findings: tuple[Finding, ...] = ()  # in the order they were found
    link: RetryLink | None = None  # None: not in a retry group
    client: ClientIdentity | None = None  # who sent it (analyzer/across/clients.py), shared by its session's calls
    number: int = 0  # position in the analysis, 1-based: the order of the export and the page
    # What follows the flow's digits in the call's id: "" for most calls (analyzer/across/call_ids.py).
    id_suffix: str = ""
    cancelled_at: float | None = None  # when the client sent notifications/cancelled for it
    stderr: tuple[
        StderrLine, ...
    ] = ()  # a stdio server's stderr lines written during it (analyzer/calls/stdio_calls.py)

    @property
    def outcome(self) -> Outcome | None:
        return self.verdict.outcome if self.verdict is not None else None

    @property
    def layer(self) -> Layer | None:
        return self.verdict.outcome.layer if self.verdict is not None else None

    @property
    def flags(self) -> tuple[Flag, ...]:
        """The verdict's flags and the findings', sorted."""
        flags = self.verdict.flags if self.verdict is not None else ()
        if not self.findings:
            return flags
        return tuple(sorted({*flags, *(f.flag for f in self.findings if f.flag is not None)}))

    @property
    def evidence(self) -> tuple[str, ...]:
        """The verdict's evidence, then each finding's line by stage (Stage), in the order found within one."""
        evidence = self.verdict.evidence if self.verdict is not None else ()
        if not self.findings:
            return evidence
        return (*evidence, *(f.why for f in sorted(self.findings, key=lambda f: f.stage)))

    @property
    def error_code(self) -> int | None:
        return self.verdict.error_code if self.verdict is not None else None

    @property
    def error_message(self) -> str | None:
        return self.verdict.error_message if self.verdict is not None else None

    @property
    def retry_group(self) -> str | None:
        return self.link.group if self.link is not None else None

    @property
    def attempt(self) -> int:
        return self.link.attempt if self.link is not None else 1

    @property
    def retry_origin(self) -> RetryOrigin | None:
        return self.link.origin if self.link is not None else None

    @property
    def retry_confidence(self) -> Confidence | None:
        return self.link.confidence if self.link is not None else None

    def found(self, *findings: Finding) -> None:
        """Findings a stage returned about this call, attached by CallStream."""
        self.findings = (*self.findings, *findings)

    @property
    def call_id(self) -> str:
        """Stable whichever captures are loaded: named after the flow that carried the request."""
        return f"c{flow_key(self.request.exchange.flow_id)}{self.id_suffix}"

    @property
    def method(self) -> str | None:
        return self.request.method

    @property
    def direction(self) -> str:
        return self.request.direction

    @property
    def exchange(self) -> Exchange:
        """The exchange that carried the request."""
        return self.request.exchange

    @property
    def tool(self) -> str | None:
        return self.request.facts.tool if self.request.facts else None

    @property
    def t_end(self) -> float | None:
        """When the attempt ended for the client: its first answer or its cancel, whichever came first;
        else when its exchange ended. A retry's delay and window are measured from here."""
        ends = [t for t in (self.responses[0].t if self.responses else None, self.cancelled_at) if t is not None]
        if ends:
            return min(ends)
        return self.exchange.t_end or self.exchange.t_error

    def note(self, message: Message) -> None:
        """A notification that belongs to this call."""
        if message.direction == C2S and self.cancelled_at is None:  # the only client notification a call keeps
            self.cancelled_at = message.t
        if not self.notifications:
            self.notifications = []
        self.notifications.append(message)

    def note_stray(self, message: Message) -> None:
        """An answer on this call's exchange that names another id."""
        if not self.stray:
            self.stray = []
        self.stray.append(message)

    def add_exchange(self, exchange: Exchange) -> None:
        if all(e is not exchange for e in self.exchanges):
            self.exchanges.append(exchange)
