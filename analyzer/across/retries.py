"""Retries: which calls are attempts of one logical request, who made them, and was it safe.

Attempts are linked when a later request repeats an earlier one that did not
succeed: the same method and params (``_meta`` aside), under the same id or a
new one, in the same session or a fresh one, within a window after the
failure. A resumed stream (GET with Last-Event-ID) is an attempt inside one
call. Version negotiation and MRTR rounds are linked too, but they are not
failures retried. Each link gets an origin, a confidence and its evidence;
each group gets a safety verdict (docs/ARCHITECTURE.md, "Retry origins, confidence, safety").
"""

from __future__ import annotations

import email.utils
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mcp_blackbox.analyzer.across.clients import OPENING_METHODS
from mcp_blackbox.analyzer.across.executions import Execution, execution
from mcp_blackbox.analyzer.calls.classify import CaptureFacts, replayable
from mcp_blackbox.analyzer.model.contract import RetryGroupRecord
from mcp_blackbox.analyzer.model.records import C2S, Call, Exchange, Finding, RetryLink, Stage
from mcp_blackbox.analyzer.model.slim import RequestFacts
from mcp_blackbox.analyzer.model.vocabulary import (
    ANSWERED_WRONGLY,
    EFFECTS_UNKNOWN,
    Confidence,
    Flag,
    Outcome,
    RetryOrigin,
    Safety,
    is_failure,
)

RETRY_WINDOW = 300.0  # seconds after a failure in which the same request counts as its retry
# Seconds of a unit's tool calls kept to tell an application loop re-running the sequence that led to a
# failure: the sequence as far back as this before it, re-run within RETRY_WINDOW after. Older calls are
# never asked about, so a session open for hours costs what its last minutes sent.
HISTORY = 2 * RETRY_WINDOW
MANUAL_GAP = 60.0  # a longer pause before a retry reads as a person, not a loop
PROXY_GAP = 0.5  # gateways re-send within ~250 ms
FALLBACK_GAP = 10.0  # a client falls back to an older protocol right after a refusal
GATEWAY_GAP = 120.0  # a gateway re-sends at once after a 5xx, or one upstream timeout (nginx: 60 s) later
# Look-alike clients of a stateless lineage that send the same request this close to a candidate link
# (before or after it) make it a crowd: the same window a gateway's copy is told by.
LOOKALIKE_NEAR = 0.5
AGENT_GAP = 30.0  # an agent re-calls a tool with new arguments right after isError (pydantic-ai: milliseconds)

SDK_RECONNECT_DELAYS = {
    1.0: "the TypeScript and Python SDKs' first reconnection delay (1 s)",
    1.5: "the TypeScript SDK's second reconnection delay (1.5 s)",
}

Origin = tuple[RetryOrigin, Confidence, list[str]]  # who repeated a request, how sure, and why


class _Unlinked(NamedTuple):
    """A look-alike of an earlier failed attempt that an origin rule declined to link, and why."""

    why: list[str]


@dataclass(slots=True)
class _Sent:
    """A unit's tool calls, in order, within HISTORY of its latest: what each asked (tool, params digest) and
    when. Places are counted from the unit's first call; ``dropped`` are the oldest, no longer kept."""

    facts: deque[RequestFacts | None] = field(default_factory=deque)
    times: deque[float] = field(default_factory=deque)
    dropped: int = 0

    def add(self, facts: RequestFacts | None, t: float) -> int:
        """Its place; the calls more than HISTORY before ``t`` go."""
        place = self.dropped + len(self.facts)
        self.facts.append(facts)
        self.times.append(t)
        while self.times[0] < t - HISTORY:
            self.facts.popleft()
            self.times.popleft()
            self.dropped += 1
        return place

    def before(self, place: int) -> set[tuple[str, str]]:
        kept = itertools.islice(self.facts, max(0, place - self.dropped))
        return {(facts.tool or "", facts.digest) for facts in kept if facts}


class _History:
    """What each client unit sent, in order: whether a fresh session re-ran the sequence that led to a
    failed call (an application loop starting over), or only sent the same request again; and whether
    other units of a lineage sent the same request meanwhile (several clients behind one lineage).
    Both questions are rare (a link across units), so only what answers them is kept and the answers are
    worked out when asked: a capture of 100,000 calls must not pay for them."""

    def __init__(self) -> None:
        self._tool_calls: dict[str, _Sent] = {}  # unit -> its tools/call requests
        self._place: dict[int, tuple[str, int]] = {}  # id(a failed call) -> (its unit, its place in the list)
        self._current: tuple[int, str, int] = (0, "", 0)  # the same of the call being linked
        # lineage key -> its latest identical requests (only look-alikes close in time matter); most keys
        # are sent once, so a lone request is kept as itself, not in a list
        self._recent: dict[tuple[str, str, str, str], Call | list[Call]] = {}

    def index(self, requests: list[Call]) -> None:
        """Every stateless lineage's identical requests, before any link is judged: look-alike clients that
        start together are told by the requests on both sides of a candidate link, later ones included."""
        for call in requests:
            if call.client is None or call.client.unit_is_session:
                continue  # crowds are told apart by session; only a stateless lineage's connections need this
            key = _key(call)
            earlier = self._recent.get(key)
            if earlier is None:
                self._recent[key] = call
            elif isinstance(earlier, list):
                earlier.append(call)
            else:
                self._recent[key] = [earlier, call]

    def add(self, call: Call) -> None:
        """``call`` is being linked: what it sent joins its unit's history."""
        self._current = (id(call), "", 0)
        if call.tool is not None and call.client is not None:
            sent = self._tool_calls.setdefault(call.client.unit, _Sent())
            # The call's own record of what it asked: no copy per call.
            self._current = (id(call), call.client.unit, sent.add(call.request.facts, call.request.t))
            if is_failure(call.outcome):  # only a failed call is asked about again, as a later one's before
                self._place[id(call)] = self._current[1:]

    def prior(self, call: Call) -> set[tuple[str, str]]:
        """(tool, params digest) of the tool calls its unit sent before it (the call being linked, or a failed
        one before it), as far back as HISTORY."""
        unit, before = self._unit_place(call)
        sent = self._tool_calls.get(unit)
        return sent.before(before) if sent is not None else set()

    def _unit_place(self, call: Call) -> tuple[str, int]:
        current, unit, before = self._current
        return (unit, before) if current == id(call) else self._place.get(id(call), ("", 0))

    def forget(self, call: Call, unit_ended: bool) -> None:
        """``call`` is final; ``unit_ended``: it was its unit's last call so far. Then what the unit sent goes: a
        later attempt can no longer join it. (A unit that sends again after so long, a session idle for the
        retry window and more, starts a history anew.)"""
        self._place.pop(id(call), None)
        if unit_ended and call.client is not None:
            self._tool_calls.pop(call.client.unit, None)
        if call.client is None or call.client.unit_is_session:
            return
        key = _key(call)
        recent = self._recent.get(key)
        if recent is call:
            del self._recent[key]
        elif isinstance(recent, list):
            recent[:] = [other for other in recent if other is not call]
            if not recent:
                del self._recent[key]

    def crowded(self, before: Call, call: Call) -> bool:
        """Another unit sent the identical request between ``before`` and ``call``, or within LOOKALIKE_NEAR
        of them (clients that start together fail one after another, each looking like the last one's
        retry): the lineage holds several clients doing the same thing, and which of them re-sent cannot be
        told."""
        start, end = before.request.t - LOOKALIKE_NEAR, call.request.t + LOOKALIKE_NEAR
        recent = self._recent.get(_key(call), [])
        return any(
            other is not call
            and not _same_unit(other, before)
            and not (_same_unit(other, call) and other.request.t > call.request.t)  # its own next attempts
            and other.request.t <= end
            and (other.t_end or other.request.t) >= start
            for other in (recent if isinstance(recent, list) else [recent])
        )

    def reruns(self, before: Call, call: Call) -> bool:
        """The new unit first repeated tool calls that the earlier unit made before the failed attempt (a unit
        whose first calls are no longer kept is no new one)."""
        unit, place = self._unit_place(call)
        sent = self._tool_calls.get(unit)
        if sent is None or sent.dropped:
            return False
        replayed = sent.before(place)
        return bool(replayed) and replayed <= self.prior(before)


@dataclass
class RetryGroup:
    group_id: str
    origin: RetryOrigin
    confidence: Confidence
    members: list[Call] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    # Who sent each attempt after the first, and how sure: a gateway's copy and the application's own
    # re-send can be attempts of one request. The group's origin is its first link's; its confidence the
    # weakest link's.
    links: list[tuple[RetryOrigin, Confidence]] = field(default_factory=list)
    is_failure_retry: bool = True  # False for negotiation, MRTR rounds and planned reconnects
    safety: Safety = Safety.SAFE
    may_have_run_twice: bool = False
    # What judging the group's safety found about its attempts (a flag, a line of evidence): set by settle.
    findings: list[tuple[Call, Finding]] = field(default_factory=list)

    def links_of_members(self) -> list[tuple[Call, RetryLink]]:
        """Each attempt's place in the group; a resumed stream's first attempt carries the group's origin."""
        resumed = self.origin is RetryOrigin.TRANSPORT_RESUME
        first = (self.origin, self.confidence) if resumed else (None, None)
        links = [first, *self.links]
        return [
            (call, RetryLink(self.group_id, attempt, origin, confidence))
            for attempt, (call, (origin, confidence)) in enumerate(zip(self.members, links, strict=True), 1)
        ]

    def record(self) -> RetryGroupRecord:
        first, last = self.members[0], self.members[-1]
        end = max((m.request.t for m in self.members), default=first.request.t)
        last_end = last.t_end or end
        return {
            "retry_group": self.group_id,
            "origin": self.origin,
            "confidence": self.confidence,
            "members": [m.call_id for m in self.members],
            "attempts": len(self.members),
            "failure_retry": self.is_failure_retry,
            "total_ms": round((last_end - first.request.t) * 1000, 3),
            "final_outcome": last.outcome,
            "safety": self.safety,
            "may_have_run_twice": self.may_have_run_twice,
            "evidence": list(self.evidence),
        }


def add_gateway_services(service: dict[str, str], groups: list[RetryGroup]) -> dict[str, str]:
    """Servers that a gateway re-sent one request between are replicas of one service: server -> the
    service's name (its first server seen); a write that ran on each of them ran twice. ``service`` grows
    by ``groups``, in place (the stream settles groups a few at a time)."""

    def find(server: str) -> str:
        while (parent := service.get(server, server)) != server:
            server = parent
        return server

    for group in groups:
        for (before, after), (origin, _) in zip(itertools.pairwise(group.members), group.links, strict=True):
            if origin is RetryOrigin.PROXY and before.exchange.server != after.exchange.server:
                first, second = find(before.exchange.server), find(after.exchange.server)
                if first != second:
                    service[second] = first
    for server in service:
        service[server] = find(server)
    return service


def retry_after(call: Call) -> float | None:
    """Seconds a 429 (or 503) asked the client to wait, from Retry-After: a number, or an HTTP date (after
    the answer's end). The one reading of the header: RETRY_AFTER_IGNORED and the rate-limit finding."""
    value = call.exchange.response_headers.get("retry-after")
    if not value:
        return None
    if value.strip().isascii() and value.strip().isdigit():  # isdigit() alone also takes "²"
        return float(value.strip())
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    sent = call.t_end or call.request.t
    return max(0.0, email.utils.mktime_tz(parsed) - sent)


class _Keys(NamedTuple):
    """Where a call's earlier attempts are looked up, computed once per call."""

    request: tuple[str, str, str, str]  # server, method and params, under the caller's lineage
    unit: tuple[str, str, str, str]  # the same under the caller's unit
    request_id: tuple[str, str, str] | None  # the same X-Request-ID (a gateway's copy), when it has one


class Retries:
    """Retry linking fed calls in the order they started (with verdicts and clients).

    ``take`` links a batch of calls; ``settle(before)`` judges the safety of every group that no call
    yet to come can join, since its attempts all started before ``before``, and drops those calls from
    the indexes: only a request that did not succeed can be retried, and only within RETRY_WINDOW, so
    what is kept depends on the window, not on the capture.
    """

    def __init__(self, facts: CaptureFacts) -> None:
        self.facts = facts
        self.groups: list[RetryGroup] = []
        self.count = 0
        # Keyed by the client (analyzer/across/clients.py): a retry is the same client's. Each attempt is kept under
        # its unit (session or connection) and under its lineage: the unit's own failure first, so that
        # clients that share a lineage (stateless connections of one software) do not hide each other's.
        self.latest: dict[tuple[str, str, str, str], Call] = {}  # (unit or lineage, server, method, digest)
        self.latest_tool: dict[tuple[str, str, str], Call] = {}  # (unit or lineage, server, tool), any arguments
        self.latest_probe: dict[str, Call] = {}  # lineage -> its last refused modern probe or initialize
        # (X-Request-ID, method, params digest) -> attempt: a gateway re-sends to another server, from its own
        # connection, under the request id it gave the first attempt.
        self.by_request_id: dict[tuple[str, str, str], Call] = {}
        self.by_call: dict[int, RetryGroup] = {}
        self.history = _History()
        self.linked: deque[Call] = deque()  # in the order they started, until settled
        self.last_of_unit: dict[str, Call] = {}

    def _new_group(self, origin: RetryOrigin, confidence: Confidence, first: Call) -> RetryGroup:
        self.count += 1
        group = RetryGroup(f"r{self.count}", origin, confidence, [first])
        self.groups.append(group)
        self.by_call[id(first)] = group
        return group

    def take(self, calls: list[Call]) -> list[tuple[Call, Finding]]:
        """Link ``calls``; what was found about a call that was not linked (a look-alike left alone, and why)."""
        requests = [c for c in calls if c.request.kind == "request" and c.direction == C2S and c.request.facts]
        self.history.index(requests)
        found: list[tuple[Call, Finding]] = []
        for call in requests:
            # Groups are numbered in the order their first attempts started, whichever calls arrive together.
            if (group := _resumed_stream(call, f"r{self.count + 1}")) is not None:
                self.count += 1
                self.groups.append(group)
                self.by_call[id(call)] = group
            found.extend((call, Finding(Stage.RETRIES, why)) for why in self._link(call))
            self.linked.append(call)
            if call.client is not None:
                self.last_of_unit[call.client.unit] = call
        return found

    def _link(self, call: Call) -> list[str]:
        """``call`` joins the group of the attempt it repeats, if any, and the indexes a later one looks in;
        why a look-alike it was not linked to was left alone."""
        assert call.request.facts is not None
        keys = _Keys(_key(call), _key(call, in_unit=True), _request_id_key(call))
        self.history.add(call)
        previous, origin = self._earlier_attempt(call, keys)
        if previous is not None and origin is not None and not isinstance(origin, _Unlinked):
            self._join(previous, call, origin)
        self._remember(call, keys)
        return origin.why if isinstance(origin, _Unlinked) else []

    def _earlier_attempt(self, call: Call, keys: _Keys) -> tuple[Call | None, Origin | _Unlinked | None]:
        """The attempt ``call`` repeats, and (origin, confidence, evidence) of the repetition. A gateway's
        re-send (the same X-Request-ID soon after an attempt that may have run) is asked first."""
        gateway_copy = self.by_request_id.get(keys.request_id) if keys.request_id else None
        if gateway_copy is not None and _gateway_may_resend(gateway_copy, call):
            return gateway_copy, _gateway_origin(gateway_copy, call)
        same = self.latest.get(keys.unit) or self.latest.get(keys.request)
        return _previous_attempt(call, same, self.latest_tool, self.latest_probe.get(_lineage(call)), self.history)

    def _join(self, previous: Call, call: Call, origin: Origin) -> None:
        """``call`` becomes the next attempt in ``previous``'s group (a new one if ``previous`` has none, or
        only a resumed stream's)."""
        sender, confidence, evidence = origin
        group = self.by_call.get(id(previous))
        if group is None or group.origin is RetryOrigin.TRANSPORT_RESUME:
            group = self._new_group(sender, confidence, previous)
        elif group.origin != sender and sender.retries_a_failure:
            group.evidence.append(f"attempt {len(group.members) + 1} by {sender}")
        group.members.append(call)
        group.links.append((sender, confidence))
        group.confidence = Confidence.weakest(group.confidence, confidence)
        group.evidence.extend(evidence)
        self.by_call[id(call)] = group
        group.is_failure_retry = group.is_failure_retry and sender.retries_a_failure
        if sender is RetryOrigin.PROTOCOL_FALLBACK:
            # Negotiation is over: the same probe later (another client, a new session) starts anew.
            self.latest.pop(_key(previous), None)
            self.latest.pop(_key(previous, in_unit=True), None)
            self.latest_probe.pop(_lineage(call), None)

    def _remember(self, call: Call, keys: _Keys) -> None:
        """``call`` in the indexes a later attempt of it is looked up by, or out of them."""
        # Only a request that did not succeed can be retried: keep those, so the index stays small.
        if is_failure(call.outcome):
            self.latest[keys.request] = self.latest[keys.unit] = call
        else:
            self.latest.pop(keys.request, None)
            self.latest.pop(keys.unit, None)
        # Only an attempt a gateway re-sends after can have a gateway's copy: keep those, so the index stays small.
        if keys.request_id and _gateway_resends_after(call):
            self.by_request_id[keys.request_id] = call
        elif keys.request_id:
            self.by_request_id.pop(keys.request_id, None)
        if call.tool:
            # What a later call of the tool needs to know: its lineage's last call asked for input (an MRTR
            # round follows), its unit's last call answered isError (an agent re-calls). Only those are kept.
            for tool_key, outcome in (
                (_tool_key(call), Outcome.INPUT_REQUIRED),
                (_tool_key(call, True), Outcome.TOOL_ERROR),
            ):
                if call.outcome == outcome:
                    self.latest_tool[tool_key] = call
                else:
                    self.latest_tool.pop(tool_key, None)
        if _is_refused_probe(call):
            self.latest_probe[_lineage(call)] = call

    def settle(self, before: float) -> list[RetryGroup]:
        """The groups whose attempts all started before ``before``, with their safety judged, in the order
        they were made; their calls, and every other call linked before ``before``, leave the indexes."""
        while self.linked and self.linked[0].request.t < before:
            self._forget(self.linked.popleft())
        # In the order they were made: a group waits for every earlier one (and its calls stay open).
        settled = next((i for i, g in enumerate(self.groups) if g.members[-1].request.t >= before), len(self.groups))
        done, self.groups = self.groups[:settled], self.groups[settled:]
        for group in done:
            _apply(group, self.facts)
            for member in group.members:
                if self.by_call.get(id(member)) is group:  # a resumed call may also start a retry group
                    del self.by_call[id(member)]
        return done

    def is_open(self, call: Call) -> bool:
        """``call`` is in a group that a later attempt may still join."""
        return id(call) in self.by_call

    def _forget(self, call: Call) -> None:
        def drop(index: dict[Any, Call], key: Any) -> None:
            if index.get(key) is call:
                del index[key]

        drop(self.latest, _key(call))
        drop(self.latest, _key(call, in_unit=True))
        drop(self.latest_tool, _tool_key(call))
        drop(self.latest_tool, _tool_key(call, True))
        drop(self.latest_probe, _lineage(call))
        if (request_id_key := _request_id_key(call)) is not None:
            drop(self.by_request_id, request_id_key)
        unit = call.client.unit if call.client is not None else ""
        ended = self.last_of_unit.get(unit) is call
        if ended:
            del self.last_of_unit[unit]
        self.history.forget(call, ended)


def _resumed_stream(call: Call, group_id: str) -> RetryGroup | None:
    resumes = [e for e in call.exchanges if e.method == "GET" and "last-event-id" in e.request_headers]
    if not resumes:
        return None
    first = call.exchange
    ended = (first.stream or {}).get("ended") or ("error" if first.error else "complete")
    planned = ended == "complete" and not first.error
    delay = resumes[0].t_request - (first.t_end or first.t_error or first.t_request)
    evidence = [
        f"POST stream ended {ended}; GET with Last-Event-ID {resumes[0].request_headers['last-event-id']} "
        f"{delay:.1f} s later" + _known_delay(delay, first.sse_retry)
    ]
    if planned:
        evidence.append("the stream ended cleanly: a planned reconnect (priming event and retry:), not a failure")
    group = RetryGroup(
        group_id, RetryOrigin.TRANSPORT_RESUME, Confidence.HIGH, [call], evidence, is_failure_retry=not planned
    )
    return group


def _known_delay(delay: float, server_retry_ms: int | None) -> str:
    if server_retry_ms is not None and abs(delay - server_retry_ms / 1000) < 0.25:
        return f" (the server's retry: {server_retry_ms} ms)"
    for expected, name in SDK_RECONNECT_DELAYS.items():
        if abs(delay - expected) < 0.25:
            return f" ({name})"
    return ""


def _lineage(call: Call) -> str:
    return call.client.lineage if call.client is not None else ""


def _owner(call: Call, in_unit: bool) -> str:
    """The client's unit, or its lineage (unit names and lineage names never collide)."""
    if in_unit:
        return call.client.unit if call.client is not None else call.scope
    return _lineage(call)


def _key(call: Call, in_unit: bool = False) -> tuple[str, str, str, str]:
    """A retry is the same client's, to the same server, with the same request."""
    digest = call.request.facts.digest if call.request.facts else ""
    return (_owner(call, in_unit), call.exchange.server, call.method or "", digest)


def _request_id_key(call: Call) -> tuple[str, str, str] | None:
    request_id = call.exchange.request_headers.get("x-request-id")
    if not request_id or call.request.facts is None:
        return None
    return (request_id, call.method or "", call.request.facts.digest)


def _gateway_resends_after(call: Call) -> bool:
    """What a gateway re-sends a request after (nginx proxy_next_upstream, HAProxy retry-on): an attempt that
    may have run (a cut, its own upstream timeout, a 502 or 504), or a 5xx that ran nothing (a 503)."""
    status = call.exchange.status
    return execution(call) is Execution.MAYBE or (status is not None and status >= 500)


def _gateway_may_resend(before: Call, call: Call) -> bool:
    """A gateway re-sends after a 5xx or a cut or its own upstream timeout, at once or one timeout later."""
    return _gateway_resends_after(before) and _within_window(before, call, GATEWAY_GAP)


def _gateway_origin(before: Call, call: Call) -> Origin:
    """The same request under the same X-Request-ID after a failed attempt: the gateway re-sent it (nginx
    proxy_next_upstream, HAProxy retry-on), to this server or another, right after a 5xx or after its
    upstream timeout. The client saw one request."""
    delay = call.request.t - (before.t_end or before.request.t)
    where = "the same server" if before.exchange.server == call.exchange.server else f"{call.exchange.server}"
    evidence = [
        f"{before.outcome} ({_carried(before.exchange)}) from {before.exchange.server}, then the same request "
        f"with the same X-Request-ID {delay:.3f} s later to {where}: a gateway's re-send"
    ]
    return RetryOrigin.PROXY, Confidence.HIGH, evidence


def _tool_key(call: Call, in_unit: bool = False) -> tuple[str, str, str]:
    return (_owner(call, in_unit), call.exchange.server, call.tool or "")


def _same_unit(before: Call, after: Call) -> bool:
    """The same session (or, outside sessions, the same connection): one client for certain."""
    return before.client is not None and after.client is not None and before.client.unit == after.client.unit


def _is_refused_probe(call: Call) -> bool:
    """A refused modern probe (any 4xx or 5xx, or a JSON-RPC error), or an initialize that Streamable HTTP
    refused as such (400, 404, 405: the client then tries the 2024-11-05 transport)."""
    status = call.exchange.status
    if call.method == "server/discover":
        return call.outcome == Outcome.JSONRPC_ERROR or (status is not None and status >= 400)
    return call.method == "initialize" and (status in (400, 404, 405) or call.outcome == Outcome.JSONRPC_ERROR)


def _previous_attempt(
    call: Call,
    same: Call | None,
    latest_tool: dict[tuple[str, str, str], Call],
    probe: Call | None,
    history: _History,
) -> tuple[Call | None, Origin | _Unlinked | None]:
    """The attempt this call repeats, and (origin, confidence, evidence) of the repetition.

    The kinds of repetition are tried in this order, the first that fits winning: a protocol fallback, an
    MRTR round, an agent's retry with other arguments, the same request sent again after a failure. The
    last may say why it does not link a look-alike (_Unlinked): ``or`` asks it only when none of the others
    fits."""
    facts = call.request.facts
    assert facts is not None
    found = (
        _protocol_fallback(call, probe)
        or _mrtr_round(call, facts, latest_tool)
        or _agent_retry(call, same, latest_tool)
        or _failure_retry(call, same, history)
    )
    return found if found is not None else (None, None)


def _protocol_fallback(call: Call, probe: Call | None) -> tuple[Call, Origin] | None:
    """initialize after a refused probe (_falls_back): version negotiation, linked to the probe."""
    if probe is None or not _falls_back(call, probe):
        return None
    why = f"{probe.method} refused ({_carried(probe.exchange)}, {probe.outcome}), then initialize"
    return probe, (RetryOrigin.PROTOCOL_FALLBACK, Confidence.HIGH, [f"version negotiation: {why}"])


def _mrtr_round(
    call: Call, facts: RequestFacts, latest_tool: dict[tuple[str, str, str], Call]
) -> tuple[Call, Origin] | None:
    """The same tool called again with inputResponses after it answered input_required: the next round."""
    if facts.round_digest is None or not call.tool:
        return None
    before = latest_tool.get(_tool_key(call))
    if before is None or before.outcome != Outcome.INPUT_REQUIRED:
        return None
    why = "input_required answered: same tool, new id, inputResponses"
    return before, (RetryOrigin.MRTR_ROUND, Confidence.HIGH, [why])


def _agent_retry(
    call: Call, same: Call | None, latest_tool: dict[tuple[str, str, str], Call]
) -> tuple[Call, Origin] | None:
    """The same tool with other arguments (no identical request before it), right after its isError."""
    if not call.tool or same is not None:
        return None
    # Other arguments: only the same session (or connection), right after the isError. A new run of an
    # agent calls the same tool on a fresh session with arguments of its own.
    before = latest_tool.get(_tool_key(call, in_unit=True))
    if (
        before is None
        or before.outcome != Outcome.TOOL_ERROR
        or not _same_unit(before, call)
        or not _within_window(before, call, AGENT_GAP)
    ):
        return None
    why = "after isError, the same tool again with other arguments, in the same session"
    return before, (RetryOrigin.AGENT_RETRY, Confidence.MEDIUM, [why])


def _failure_retry(call: Call, same: Call | None, history: _History) -> tuple[Call, Origin | _Unlinked] | None:
    """The identical request sent again within the window after ``same`` failed, if an origin rule links it
    (or says why it does not)."""
    if same is None or not is_failure(same.outcome) or not _within_window(same, call):
        return None
    origin = _origin(same, call, history)
    return (same, origin) if origin is not None else None


def _falls_back(call: Call, probe: Call | None) -> bool:
    """initialize right after a refused modern probe, or after Streamable HTTP refused an initialize."""
    if probe is None or call.method != "initialize" or call.request.t - probe.request.t >= FALLBACK_GAP:
        return False
    if probe.exchange.server != call.exchange.server:
        return False
    return probe.method == "server/discover" or call.scope != probe.scope


def _carried(exchange: Exchange) -> str:
    """What carried an attempt's answer, for the evidence: its HTTP status, or the stdio pipes (no status)."""
    return "stdio" if exchange.stdio is not None else f"HTTP {exchange.status}"


def _within_window(before: Call, call: Call, window: float = RETRY_WINDOW) -> bool:
    """Sent after the failure was visible to the client (its answer, cut or cancel), and soon after."""
    return 0 <= call.request.t - (before.t_end or before.request.t) <= window


@dataclass(frozen=True)
class _Repeat:
    """A request sent again after ``before`` failed, within the window: what the origin rules read."""

    before: Call
    call: Call
    history: _History

    @property
    def delay(self) -> float:
        """Seconds from the failure being visible to the client to the request sent again."""
        return self.call.request.t - (self.before.t_end or self.before.request.t)

    @property
    def same_id(self) -> bool:
        return self.before.request.key_id == self.call.request.key_id

    @property
    def same_scope(self) -> bool:
        return self.before.scope == self.call.scope

    @property
    def envoy_attempts(self) -> str | None:
        """Envoy's own count of the attempts it made, as sent (x-envoy-attempt-count)."""
        return self.call.exchange.request_headers.get("x-envoy-attempt-count")

    @property
    def joined(self) -> str:
        """How the two units are known to be one client's, for the evidence."""
        return self.call.client.joined if self.call.client is not None else "the same client"

    @property
    def unit_kind(self) -> str:
        return "session" if self.call.client is not None and self.call.client.unit_is_session else "connection"


def _what_was_repeated(repeat: _Repeat) -> str:
    """The evidence every link starts with: the failure, the delay, and what stayed the same."""
    a, b = repeat.before.exchange, repeat.call.exchange
    before, call = repeat.before, repeat.call
    id_text = "same JSON-RPC id" if repeat.same_id else f"new id {call.request.id!r} (was {before.request.id!r})"
    session = "same session" if repeat.same_scope else _session_change(a, b)
    connection = "same connection" if a.client_conn == b.client_conn else "a new connection"
    if a.stdio is not None or b.stdio is not None:  # pipes: a run of the server, no connection
        connection = "the same server process" if a.stdio is b.stdio else "another run of the server"
    return (
        f"{before.outcome} ({_carried(a)}), then the same request {repeat.delay:.2f} s later: {id_text}, "
        f"{session}, {connection}"
    )


def _envoy_counted_attempt(repeat: _Repeat) -> bool:
    """Envoy numbers the attempts it makes itself: past the first, the copy is the gateway's."""
    attempts = repeat.envoy_attempts
    if not attempts:
        return False
    return attempts.strip().isascii() and attempts.strip().isdigit() and int(attempts) > 1


def _new_credentials_after_refusal(repeat: _Repeat) -> bool:
    """Only new credentials make it an auth retry: the same request refused again, or an unconditional
    probe after a 403 for another reason (a foreign Origin), is not one."""
    a, b = repeat.before.exchange, repeat.call.exchange
    credentials = b.request_headers.get("authorization")
    return a.status in (401, 403) and credentials is not None and credentials != a.request_headers.get("authorization")


def _identical_at_once(repeat: _Repeat) -> bool:
    """The same id in the same session sooner than a client would retry: a gateway re-sends that fast."""
    return repeat.same_id and repeat.same_scope and repeat.delay < PROXY_GAP


def _fresh_session_after_404(repeat: _Repeat) -> bool:
    """The server forgot the session (404), and the request came again in another one."""
    a = repeat.before.exchange
    return a.status == 404 and bool(a.session_id) and not repeat.same_scope


def _after_manual_gap(repeat: _Repeat) -> bool:
    return repeat.delay > MANUAL_GAP


def _tool_error_in_same_unit(repeat: _Repeat) -> bool:
    return repeat.before.outcome == Outcome.TOOL_ERROR and _same_unit(repeat.before, repeat.call)


def _in_same_unit(repeat: _Repeat) -> bool:
    return _same_unit(repeat.before, repeat.call)


def _on_pool_connection(repeat: _Repeat) -> bool:
    """Another connection, outside sessions, that did not open with a negotiation: only another of the
    client's pool, not a new start."""
    return not _opened_anew(repeat.call)


def _on_crowded_pool_connection(repeat: _Repeat) -> bool:
    """On a pool connection, with identical requests from other connections of the lineage in between:
    which client re-sent cannot be told."""
    return _on_pool_connection(repeat) and repeat.history.crowded(repeat.before, repeat.call)


def _answer_lost(repeat: _Repeat) -> bool:
    """The client never learned how the call ended (its stream was cut, no answer came, it cancelled) and its
    next unit sent the identical request: it still wanted that answer. A next run or a test's next case would
    repeat a call whatever its answer was; the lineage, measured or told by the turnaround, keeps those out."""
    return repeat.before.outcome in EFFECTS_UNKNOWN


def _restarted_stdio_server(repeat: _Repeat) -> bool:
    """The same client process (measured: the header of each server run's capture) sent the request again to
    a stdio server it started anew after the last one failed it: a restart and a re-send, not the
    application's next run, which would be another process. Not high: one process may host several
    clients. Over HTTP a process's next session says less (an agent framework runs its next case in the
    same process), so the rules above decide there."""
    before, after = repeat.before, repeat.call
    if before.exchange.stdio is None or after.exchange.stdio is None:
        return False
    process = before.client.process if before.client is not None else None
    return process is not None and after.client is not None and after.client.process == process


def _opening_again(repeat: _Repeat) -> bool:
    """The client never got in: opening again is its next attempt, not a next run."""
    return repeat.call.method in OPENING_METHODS


def _reran_calls_before_failure(repeat: _Repeat) -> bool:
    """An application loop that starts over re-runs the calls that led to the failure."""
    return repeat.history.reruns(repeat.before, repeat.call)


def _lone_request_on_new_unit(repeat: _Repeat) -> bool:
    """What is left (the last rule, so it always applies): a lone identical request on a fresh unit, which
    may as well be the client's next run or a test suite's next case; the capture cannot tell it from a
    retry."""
    return True


def _surer_with_same_id(repeat: _Repeat) -> Confidence:
    """New credentials under the same id: the client re-sent that very request."""
    return Confidence.HIGH if repeat.same_id else Confidence.MEDIUM


def _surer_with_new_id(repeat: _Repeat) -> Confidence:
    """Within one session (or connection) the sender is certain; a new id says it is no gateway's copy."""
    return Confidence.HIGH if not repeat.same_id else Confidence.MEDIUM


class _Rule(NamedTuple):
    """If ``applies``, the request was sent again by ``origin``, as sure as ``confidence``, because ``why``."""

    applies: Callable[[_Repeat], bool]
    # None, with confidence None (confidence "none" in docs/ARCHITECTURE.md): not linked as a retry, and
    # ``why`` goes on the later call's own evidence instead.
    origin: RetryOrigin | None
    confidence: Confidence | Callable[[_Repeat], Confidence] | None
    # The evidence after _what_was_repeated: str.format templates of ``r``, the _Repeat.
    why: tuple[str, ...]


# The delay is in the line before: a delay near 1, 2 or 4 s does not show a backoff schedule (a person, a
# timer or a job's next round waits as long), so the evidence does not name one.
_SENT_AGAIN = "the application sent it again"

# Who repeated a failed request: the first rule that applies answers, so a rule is only asked when every
# rule above it did not apply. Signs that name the sender (a gateway's header, new credentials, a copy too
# fast for a client, the server's lost session) come before the delay and the units it was sent from.
_ORIGIN_RULES: tuple[_Rule, ...] = (
    _Rule(_envoy_counted_attempt, RetryOrigin.PROXY, Confidence.HIGH, ("x-envoy-attempt-count: {r.envoy_attempts}",)),
    _Rule(
        _new_credentials_after_refusal,
        RetryOrigin.AUTH_RETRY,
        _surer_with_same_id,
        ("credentials added or changed after 401/403",),
    ),
    _Rule(
        _identical_at_once,
        RetryOrigin.PROXY,
        Confidence.MEDIUM,
        ("byte-identical re-send within 0.5 s: a gateway's copy",),
    ),
    _Rule(
        _fresh_session_after_404,
        RetryOrigin.SESSION_REINIT,
        Confidence.HIGH,
        ("404 on the session, then a fresh initialize",),
    ),
    _Rule(_after_manual_gap, RetryOrigin.MANUAL, Confidence.LOW, ("after {r.delay:.0f} s: a person, not a loop",)),
    _Rule(
        _tool_error_in_same_unit,
        RetryOrigin.AGENT_RETRY,
        Confidence.MEDIUM,
        ("after isError, the same tool call again",),
    ),
    # From here on the application sent it again; which unit it came from says how sure that is.
    _Rule(_in_same_unit, RetryOrigin.APP_RETRY, _surer_with_new_id, (_SENT_AGAIN,)),
    # Another unit of the same client: another connection of its pool, or a new start (a fresh session, a
    # stateless run's own connection) that is a retry only if it starts over or never got in.
    _Rule(_on_crowded_pool_connection, None, None, ()),  # not linked, and nothing to say on the call
    _Rule(
        _on_pool_connection,
        RetryOrigin.APP_RETRY,
        Confidence.MEDIUM,
        (_SENT_AGAIN, "on another connection ({r.joined})"),
    ),
    _Rule(_opening_again, RetryOrigin.APP_RETRY, Confidence.MEDIUM, (_SENT_AGAIN, "opening anew ({r.joined})")),
    _Rule(
        _reran_calls_before_failure,
        RetryOrigin.APP_RETRY,
        Confidence.MEDIUM,
        (_SENT_AGAIN, "on a fresh {r.unit_kind} ({r.joined}) that first re-ran the calls before the failed one"),
    ),
    _Rule(
        _answer_lost,
        RetryOrigin.APP_RETRY,
        Confidence.MEDIUM,
        (_SENT_AGAIN, "on a fresh {r.unit_kind} ({r.joined}) after its answer was lost"),
    ),
    _Rule(
        _restarted_stdio_server,
        RetryOrigin.APP_RETRY,
        Confidence.MEDIUM,
        (_SENT_AGAIN, "to the stdio server the same process (pid {r.call.client.process.pid}) started again"),
    ),
    _Rule(
        _lone_request_on_new_unit,
        None,
        None,
        (
            "not linked as a retry: {r.before.call_id} sent the same request {r.delay:.2f} s earlier from the same "
            "client's previous {r.unit_kind} and got {r.before.outcome}; a lone identical request on a new "
            "{r.unit_kind} may be a new one (the next run, a test's next case)",
        ),
    ),
)


def _origin(before: Call, call: Call, history: _History) -> Origin | _Unlinked | None:
    """Who sent ``call`` again after ``before`` failed, how sure, and why (_ORIGIN_RULES); _Unlinked: not
    linked, and why; None: not linked, nothing to say."""
    repeat = _Repeat(before, call, history)
    rule = next(rule for rule in _ORIGIN_RULES if rule.applies(repeat))  # the last rule always applies
    why = [line.format(r=repeat) for line in rule.why]
    if rule.origin is None or rule.confidence is None:
        return _Unlinked(why) if why else None
    confidence = rule.confidence if isinstance(rule.confidence, Confidence) else rule.confidence(repeat)
    if _across_runs(before, call):
        confidence = Confidence.LOW
        why.append("low: the later session may be the application's next run (clients.NEW_PROCESS_GAP)")
    return rule.origin, confidence, [_what_was_repeated(repeat), *why]


def _across_runs(before: Call, call: Call) -> bool:
    """The two units of one lineage may be two runs of the application (ClientIdentity.run): nothing measured
    says they are one process, and the gap between them is as long as a process takes to start."""
    return before.client is not None and call.client is not None and before.client.run != call.client.run


def _opened_anew(call: Call) -> bool:
    return call.client is not None and call.client.opened


def _session_change(before: Exchange, after: Exchange) -> str:
    had = before.session_id or before.legacy_session
    has = after.session_id or after.legacy_session
    if had and has:
        return "a new session"
    if has:
        return "now in a session"
    return "no session (stateless)" if not had else "no longer in a session"


def _apply(group: RetryGroup, facts: CaptureFacts) -> None:
    """The group's safety, and what it found about each attempt (group.findings)."""
    if group.origin is RetryOrigin.TRANSPORT_RESUME:
        group.safety = Safety.RESUMED
        return
    if not group.is_failure_retry:
        group.safety = Safety.NOT_A_FAILURE_RETRY
        return
    pairs = list(zip(group.members, group.members[1:], strict=False))
    verdicts = []
    for before, after in pairs:
        safety, findings = _attempt_safety(before, after, facts)
        verdicts.append(safety)
        group.findings.extend((after, finding) for finding in findings)
    group.safety = next((v for v in verdicts if v is not Safety.SAFE), Safety.SAFE)
    group.may_have_run_twice = _may_have_run_twice(group.members)
    if group.may_have_run_twice and group.safety.is_unsafe:
        group.evidence.append(
            "an attempt that may have run was sent again and reached the server: the tool may have run more than once"
        )


def _may_have_run_twice(members: list[Call]) -> bool:
    """An attempt that may have run was followed, at once or after refusals (a 503 between), by one that
    ran or may have: the tool may have run twice. Only a tool runs: a repeated initialize or tools/list
    changes nothing on the server. What ran is read from each verdict, as DUPLICATE_EXECUTION reads it."""
    if members[0].method != "tools/call":
        return False
    maybe_before = False
    for call in members:
        ran = execution(call)
        if maybe_before and ran is not Execution.NOT_RUN:
            return True
        maybe_before = maybe_before or ran is Execution.MAYBE
    return False


_Concern = tuple[Safety, Finding]  # what sending an attempt again risked, and the line (and flag) that says so


def _attempt_safety(before: Call, after: Call, facts: CaptureFacts) -> tuple[Safety, list[Finding]]:
    """How safe it was to send ``before`` again as ``after``, and every concern found, in this order: the
    verdict is UNSAFE if the replay was, else the first concern found, else SAFE."""
    concerns = [
        concern
        for concern in (
            _retry_after_ignored(before, after),
            _pointless_repeat(before, after),
            _replay_concern(before, after, facts),
        )
        if concern is not None
    ]
    findings = [finding for _, finding in concerns]
    if any(safety is Safety.UNSAFE for safety, _ in concerns):
        return Safety.UNSAFE, findings
    return (concerns[0][0] if concerns else Safety.SAFE), findings


def _retry_after_ignored(before: Call, after: Call) -> _Concern | None:
    """A 429 or 503 asked for a wait (Retry-After) that the retry did not keep."""
    wait = retry_after(before) if before.exchange.status in (429, 503) else None
    if wait is None:
        return None
    waited = after.request.t - (before.t_end or before.request.t)
    if waited < wait:
        why = f"retried after {waited:.2f} s; Retry-After asked for {wait:g} s"
        return Safety.RETRY_AFTER_IGNORED, Finding(Stage.RETRIES, why, Flag.RETRY_AFTER_IGNORED)
    return None


def _pointless_repeat(before: Call, after: Call) -> _Concern | None:
    """The same params again after the server refused them as invalid (-32602): it will fail again."""
    if before.error_code != -32602 or not _same_params(before, after):
        return None
    return Safety.POINTLESS, Finding(Stage.RETRIES, "retried unchanged after -32602 invalid params: it will fail again")


def _replay_concern(before: Call, after: Call, facts: CaptureFacts) -> _Concern | None:
    """What replaying the call may do on the server: a tool whose effects are unknown and not marked
    harmless (UNSAFE), a call the server answered wrongly and so ran (DO_NOT_REPLAY), a tool that ran and
    reported an error (DEPENDS_ON_TOOL)."""
    tool = facts.tools.get(after.tool or "") or {}
    harmless = replayable(after.tool, facts)
    if after.method == "tools/call" and _effects_unknown(before) and not harmless:
        return Safety.UNSAFE, Finding(Stage.RETRIES, _unsafe_why(before, after, tool), Flag.UNSAFE_RETRY)
    if before.outcome in ANSWERED_WRONGLY:
        # The server answered, so it ran: do not replay; keep the raw answer and find the defect.
        why = f"replayed after {before.outcome}: the server answered, so it ran"
        return Safety.DO_NOT_REPLAY, Finding(Stage.RETRIES, why)
    if before.outcome == Outcome.TOOL_ERROR and after.method == "tools/call" and not harmless:
        why = f"{after.tool!r} ran and reported an error; repeating it depends on what it does"
        return Safety.DEPENDS_ON_TOOL, Finding(Stage.RETRIES, why)
    return None


def _unsafe_why(before: Call, after: Call, tool: dict[str, Any]) -> str:
    """Why a replayed tool call is unsafe: what left its effects unknown, and what tools/list said of it."""
    hints = given if isinstance(given := tool.get("annotations"), dict) else {}
    why = f"{before.outcome} left the tool's side effects unknown and {after.tool!r} is not marked "
    why += "readOnlyHint or idempotentHint in tools/list" if tool else "in any tools/list of the capture"
    if hints.get("destructiveHint"):
        why += "; it is marked destructiveHint"
    return why


def _same_params(before: Call, after: Call) -> bool:
    a, b = before.request.facts, after.request.facts
    return a is not None and b is not None and a.digest == b.digest


def _effects_unknown(call: Call) -> bool:
    return execution(call) is Execution.MAYBE
