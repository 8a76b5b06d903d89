"""Findings about a client and the server it talks to, seen from the client's side (docs/ARCHITECTURE.md, "Findings").

- ``AuthRefreshLoop``: 401, a new token, 401 again, round after round.
- ``UnusableSseEndpoint``: an HTTP+SSE (2024-11-05) stream whose ``endpoint`` event names a URL the client
  cannot use, and no request of the session answered.
- ``LostSessionAffinity``: sessions answered 404 by another replica right after their initialize
  (analyzer/across/affinity.py), as a finding.
- ``StdioServerCrash``: a stdio server process that exited while calls were in flight.

Each keeps counts and a few call ids (at most CALLS_NAMED per finding); what only the whole capture can tell
(the OAuth steps, the endpoint events) comes in the ``Context`` at the end.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from mcp_blackbox.analyzer.across.affinity import AFFINITY_WINDOW, Affinity
from mcp_blackbox.analyzer.across.patterns.engine import CALLS_NAMED, Context, duration_text, finding_record
from mcp_blackbox.analyzer.calls.pair import legacy_session_of_endpoint
from mcp_blackbox.analyzer.calls.stdio_calls import short_command
from mcp_blackbox.analyzer.model.contract import FindingRecord
from mcp_blackbox.analyzer.model.records import C2S, S2C, Call, Exchange
from mcp_blackbox.analyzer.model.stdio_session import SKEW, StdioSession
from mcp_blackbox.analyzer.model.vocabulary import Ending

LISTED = 5  # items an evidence line spells out; the line gives the full count


def _counted(counter: Counter[Any]) -> str:
    """``Counter({404: 3, 202: 1})`` as "404 ×3, 202 ×1"."""
    return ", ".join(f"{value} ×{count}" for value, count in counter.most_common())


def _finding(
    rule: str, title: str, summary: str, evidence: list[str], calls: list[str], span: tuple[float, float]
) -> FindingRecord:
    return finding_record(rule, title, summary, evidence, calls, *span)


# --------------------------------------------------------------------------------------------------------------
# An auth refresh loop

# One round (401, a new token, 401) is what an SDK's own guard lets through once before it gives up (the
# TypeScript SDK throws "Server returned 401 after successful authentication"); a second round in a row means the
# client, or its application, got a token again and was refused again: the fix does not work and is repeated.
MIN_ROUNDS = 2
# The auth steps that get a client a new token (analyzer/read/auth.py): discovery and registration alone do not.
NEW_TOKEN_STEPS = ("token exchange", "authorization request")
# 401s kept per stretch without a success; past it a stretch is counted from the ones kept (a loop shows long
# before), so a client refused for hours costs no more than this.
MAX_REFUSED = 10_000


@dataclass(slots=True)
class _Refused:
    """One request answered 401."""

    t: float
    call_id: str
    carried_token: bool  # it had an Authorization header
    credential: int | None  # a hash of that header, never shown: a round refuses a token not refused before


@dataclass(slots=True)
class _Stretch:
    """The 401s of one client of one server since its last request answered 2xx."""

    server: str
    refused: list[_Refused] = field(default_factory=list)
    then_succeeded: bool = False  # a request was answered 2xx after them


@dataclass(slots=True)
class _Round:
    """A 401, the token steps after it, and the next 401."""

    before: _Refused
    after: _Refused
    steps: list[dict[str, Any]]


class AuthRefreshLoop:
    """401, a new token (token request or authorization), 401 again: at least MIN_ROUNDS times in a row, with no
    request of that client to that server answered 2xx in between.

    Look-alike: a token that expired: one 401, a refresh, and the re-sent request answered 200. A client is its
    process when the recorder knew it (a healthy neighbour's successes must not hide a loop), else every client
    of the server: then a neighbour's success ends the stretch, so a loop can be missed, never made up. The
    token steps are not tied to a server by the capture (the authorization server may be another host): those
    between two 401s of the stretch count."""

    name = "auth_refresh_loop"

    def __init__(self) -> None:
        self._open: dict[tuple[str, int | None], _Stretch] = {}
        self._kept: list[_Stretch] = []

    def add(self, call: Call) -> None:
        exchange = call.exchange
        if exchange.stdio is not None or call.direction != C2S or exchange.status is None:
            return
        key = (exchange.server, exchange.client_process.pid if exchange.client_process is not None else None)
        if exchange.status == 401:
            stretch = self._open.setdefault(key, _Stretch(exchange.server))
            if len(stretch.refused) < MAX_REFUSED:
                sent = exchange.request_headers.get("authorization")
                credential = None if sent is None else hash(sent)
                stretch.refused.append(_Refused(call.request.t, call.call_id, sent is not None, credential))
        elif exchange.ok:
            self._close(key, succeeded=True)

    def _close(self, key: tuple[str, int | None], *, succeeded: bool) -> None:
        stretch = self._open.pop(key, None)
        # Fewer 401s than MIN_ROUNDS + 1 cannot hold MIN_ROUNDS rounds: forgotten at once (an expiry, a first 401).
        if stretch is not None and len(stretch.refused) > MIN_ROUNDS:
            stretch.then_succeeded = succeeded
            self._kept.append(stretch)

    def finish(self, context: Context) -> list[FindingRecord]:
        for key in list(self._open):
            self._close(key, succeeded=False)
        steps = sorted((s for s in context.auth_steps if s.get("step") in NEW_TOKEN_STEPS), key=lambda s: s["t"])
        times = [step["t"] for step in steps]
        found = []
        for stretch in self._kept:
            rounds = _rounds(stretch, steps, times)
            if len(rounds) >= MIN_ROUNDS:
                found.append(_loop_finding(self.name, stretch, rounds))
        return found


def _rounds(stretch: _Stretch, steps: list[dict[str, Any]], times: list[float]) -> list[_Round]:
    """Each pair of successive 401s with a token step between them, the later one refusing a credential the
    earlier did not carry: the new token was sent and refused too. (Clients whose old tokens were refused one
    after another, each refreshing between, send their old tokens again: no round.)"""
    refused = sorted(stretch.refused, key=lambda r: r.t)
    rounds = []
    for before, after in itertools.pairwise(refused):
        low, high = bisect.bisect_right(times, before.t), bisect.bisect_left(times, after.t)
        if high > low and after.credential is not None and after.credential != before.credential:
            rounds.append(_Round(before, after, steps[low:high]))
    return rounds


def _loop_finding(rule: str, stretch: _Stretch, rounds: list[_Round]) -> FindingRecord:
    first, last = rounds[0].before, rounds[-1].after
    refused = [r for r in stretch.refused if first.t <= r.t <= last.t]
    steps = [step for round_ in rounds for step in round_.steps]
    tokens = Counter(s["status"] for s in steps if s["step"] == "token exchange")
    authorizations = sum(1 for s in steps if s["step"] == "authorization request")
    span = duration_text(last.t - first.t)
    server = stretch.server
    evidence = [
        f"{server}: {len(refused)} requests answered 401 in {span}, none answered 2xx in between",
        f"{len(rounds)} rounds of 401, new token, 401: {sum(tokens.values())} token request(s) between them "
        f"(HTTP {_counted(tokens) or 'none'}), {authorizations} authorization request(s)",
        f"{sum(r.carried_token for r in refused)} of the {len(refused)} requests answered 401 carried an "
        "Authorization header",
        "a request to it was answered 2xx after the last 401"
        if stretch.then_succeeded
        else "no request of this client to it was answered 2xx after the last 401 in the capture",
    ]
    summary = (
        f"A client got 401 from {server}, obtained a new token and got 401 again, {len(rounds)} times in {span}. "
        "The new tokens did not help: the resource server refuses what the authorization server issues (audience, "
        "signing key, clock, scope)."
    )
    title = f"Auth refresh loop at {server}: {len(rounds)} rounds of 401, new token, 401"
    return _finding(rule, title, summary, evidence, [r.call_id for r in refused], (first.t, last.t))


# --------------------------------------------------------------------------------------------------------------
# A client stuck on an unusable HTTP+SSE endpoint event


def endpoint_event(exchange: Exchange, endpoint: str) -> dict[str, Any]:
    """What the findings keep of an HTTP+SSE stream's ``endpoint`` event (CallStream records one per stream)."""
    stream = exchange.stream or {}
    return {
        "flow": exchange.flow_id,
        "source": exchange.source,
        "t": exchange.t_response or exchange.t_request,
        "t_end": exchange.t_end or exchange.t_error,
        "url": exchange.url,
        "status": exchange.status,
        "endpoint": endpoint[:500],  # a broken event can be anything: what a line can show
        "session": legacy_session_of_endpoint(endpoint),
        "ended": stream.get("ended") or exchange.error,
    }


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def unusable_endpoint(stream_url: str, endpoint: str) -> str | None:
    """Why a client cannot POST to ``endpoint`` as the stream at ``stream_url`` announced it; None: it can,
    as far as the text goes. Both SDKs resolve it against the stream's URL and refuse another origin."""
    if not endpoint:
        return "it is empty"
    if any(character.isspace() or ord(character) < 32 for character in endpoint):
        return "it holds whitespace or control characters"
    try:
        target = urljoin(stream_url, endpoint)
        urlsplit(target).port  # noqa: B018  # raises on a port that is not a number
    except ValueError as error:
        return f"it is not a URL ({error})"
    scheme, netloc = _origin(target)
    if scheme not in ("http", "https"):
        return f"it resolves to {target}, not an HTTP URL"
    if (scheme, netloc) != _origin(stream_url):
        return f"it resolves to {target}, on another origin than the stream's ({'://'.join(_origin(stream_url))})"
    return None


def _outside_stream_directory(stream_url: str, endpoint: str) -> str | None:
    """The stream's directory when the endpoint's path lies outside it (a prefix a gateway serves the stream
    under, missing from the path the server announced), else None."""
    stream_path = urlsplit(stream_url).path
    directory = stream_path[: stream_path.rfind("/") + 1] or "/"
    endpoint_path = urlsplit(urljoin(stream_url, endpoint)).path
    return None if endpoint_path.startswith(directory) else directory


@dataclass(slots=True)
class _SessionUse:
    """What the calls of one HTTP+SSE session show."""

    posts: int = 0
    statuses: Counter[int | None] = field(default_factory=Counter)  # the POSTs' statuses (None: no response)
    accepted: int = 0  # POSTs answered 2xx
    answered: int = 0  # answers the stream carried (to a request of the capture or not)
    calls: list[str] = field(default_factory=list)  # while nothing worked: the POSTs' calls, CALLS_NAMED at most


@dataclass(slots=True)
class _StuckGroup:
    """Streams of one server path that announced an unusable endpoint for one reason."""

    reason: str
    events: list[dict[str, Any]] = field(default_factory=list)
    uses: list[_SessionUse] = field(default_factory=list)


class UnusableSseEndpoint:
    """An HTTP+SSE (2024-11-05) stream announced, in its ``endpoint`` event, a URL the client cannot use, and no
    request of that session was accepted or answered.

    Unusable: empty, not a URL, not HTTP, on another origin than the stream's (both SDKs refuse it); or a path
    outside the stream's directory whose every POST got 404 (the prefix of a gateway missing from the path the
    server announced). A 404 on a path inside it is left alone: a server that forgot the session answers so too.
    Look-alike: a legacy session whose POSTs are accepted (202) and answered on the stream."""

    name = "unusable_sse_endpoint"

    def __init__(self) -> None:
        self._sessions: dict[str, _SessionUse] = {}

    def add(self, call: Call) -> None:
        scope = call.scope
        if not scope.startswith("sse-session:"):
            return
        use = self._sessions.setdefault(scope.removeprefix("sse-session:"), _SessionUse())
        if call.direction == S2C:  # an answer the stream carried to a request the capture lacks
            use.answered += 1
            return
        exchange = call.exchange
        if exchange.method == "POST":
            use.posts += 1
            use.statuses[exchange.status] += 1
            use.accepted += exchange.ok
        use.answered += bool(call.responses)
        if use.accepted or use.answered:
            use.calls.clear()  # the session works: nothing of it will be named
        elif len(use.calls) < CALLS_NAMED:
            use.calls.append(call.call_id)

    def finish(self, context: Context) -> list[FindingRecord]:
        groups: dict[tuple[str, str], _StuckGroup] = {}
        for event in context.endpoints:
            use = self._sessions.get(event["session"] or "", _SessionUse())
            if use.accepted or use.answered:
                continue
            reason = _why_stuck(event, use)
            if reason is not None:
                where = event["url"].partition("?")[0]
                group = groups.setdefault((where, reason), _StuckGroup(reason))
                group.events.append(event)
                group.uses.append(use)
        return [_stuck_finding(self.name, group) for group in groups.values()]


def _why_stuck(event: dict[str, Any], use: _SessionUse) -> str | None:
    """Why the stream's endpoint cannot be used, by its text or by what its POSTs got; None: no sign it cannot."""
    url, endpoint = event["url"], event["endpoint"]
    reason = unusable_endpoint(url, endpoint)
    if reason is not None:
        return reason
    directory = _outside_stream_directory(url, endpoint)
    if directory is not None and use.posts and use.statuses[404] == use.posts:
        path = urlsplit(urljoin(url, endpoint)).path
        return f"its path {path} is outside the stream's {directory}, and every POST to it was answered 404"
    return None


def _stuck_finding(rule: str, group: _StuckGroup) -> FindingRecord:
    first = group.events[0]
    stream = first["url"].partition("?")[0]
    posts = sum(use.posts for use in group.uses)
    statuses: Counter[int | None] = sum((use.statuses for use in group.uses), Counter())
    calls = [call_id for use in group.uses for call_id in use.calls]
    evidence = [
        f"GET {stream} (HTTP {first['status']}) announced the endpoint {first['endpoint']!r}: {group.reason}",
        f"{len(group.events)} stream(s) of it announced such an endpoint; none of their sessions had a request "
        "accepted or an answer on the stream",
        f"{posts} POST(s) to their sessions: HTTP {_counted(statuses)}" if posts else "no POST named their sessions",
    ]
    evidence += [_stream_life(event) for event in group.events[:LISTED]]
    title = f"Client stuck on an unusable HTTP+SSE endpoint announced by {stream}"
    summary = (
        f"The 2024-11-05 event stream at {stream} named {first['endpoint'][:80]!r} as the URL to POST to, and "
        f"{group.reason}. No request of the session got through, so no answer could come on the stream the "
        "client kept waiting on."
    )
    ends = [event["t_end"] or event["t"] for event in group.events]
    return _finding(rule, title, summary, evidence, calls, (first["t"], max(ends)))


def _stream_life(event: dict[str, Any]) -> str:
    """How long a stream stayed open after its response began, and how it ended."""
    if event["t_end"] is None:
        return f"the stream ({event['flow'][:8]}) was still open when the capture ended"
    ended = f", ended {event['ended']}" if event["ended"] else ""
    return f"the stream ({event['flow'][:8]}) stayed open {duration_text(event['t_end'] - event['t'])}{ended}"


# --------------------------------------------------------------------------------------------------------------
# Lost session affinity


@dataclass(slots=True)
class _HurtCall:
    call_id: str
    session: str
    method: str | None
    t: float
    after_initialize: float | None  # seconds since the session's initialize was answered


class LostSessionAffinity:
    """Sessions answered 404 within AFFINITY_WINDOW of their initialize, before any request of theirs worked,
    while other sessions of the same server worked (analyzer/across/affinity.py decides; this names it).

    Look-alike: a session that worked and then got 404 (expired, forgotten by a restart): not this."""

    name = "lost_session_affinity"

    def __init__(self) -> None:
        self._affinity = Affinity()
        self._hurt: dict[str, list[_HurtCall]] = {}  # server -> its hurt calls, CALLS_NAMED at most

    def add(self, call: Call) -> None:
        affinity, exchange = self._affinity, call.exchange
        affinity.feed(call)
        session = exchange.session_id
        server = affinity.servers.get(exchange.server)
        if exchange.status != 404 or not session or server is None:
            return
        if call.call_id in server.hurt.get(session, ()):
            hurt = self._hurt.setdefault(exchange.server, [])
            if len(hurt) < CALLS_NAMED:
                opened = affinity.opened.get(session)
                since = call.request.t - opened if opened is not None else None
                hurt.append(_HurtCall(call.call_id, session, call.method, call.request.t, since))

    def finish(self, context: Context) -> list[FindingRecord]:
        found = []
        for name, server in self._affinity.servers.items():
            working = server.working - set(server.hurt)
            if server.hurt and working and self._hurt.get(name):
                found.append(_affinity_finding(self.name, name, server.hurt, len(working), self._hurt[name]))
        return found


def _affinity_finding(
    rule: str, server: str, hurt: dict[str, list[str]], working: int, calls: list[_HurtCall]
) -> FindingRecord:
    count = sum(len(ids) for ids in hurt.values())
    evidence = [
        f"{server}: {len(hurt)} session(s) had {count} request(s) answered 404 within {AFFINITY_WINDOW:g} s of a "
        "successful initialize, before any request of theirs was answered 2xx",
        f"at least {working} other session(s) of the same server had requests answered meanwhile",
    ]
    for call in calls[:LISTED]:
        waited = call.after_initialize
        after = f" {duration_text(waited)} after its initialize" if waited is not None else ""
        evidence.append(f"session {call.session[:12]}: {call.method} answered 404{after} ({call.call_id})")
    title = f"Lost session affinity at {server}: {len(hurt)} session(s) answered 404 by another instance"
    summary = (
        f"{len(hurt)} session(s) created at {server} got 404 on their next requests while other sessions of the "
        "same server worked. The usual cause is a load balancer without stickiness in front of stateful MCP "
        "servers: a session's requests reach an instance that never saw it."
    )
    return _finding(rule, title, summary, evidence, [c.call_id for c in calls], (calls[0].t, calls[-1].t))


# --------------------------------------------------------------------------------------------------------------
# A stdio server that died mid-call


@dataclass(slots=True)
class _Crash:
    session: StdioSession
    count: int = 0  # calls in flight when it exited
    calls: list[Call] = field(default_factory=list)  # CALLS_NAMED at most (their ids, methods and times)


class StdioServerCrash:
    """A stdio server process that exited (a code or a signal) while requests of its client waited, before the
    client closed its stdin.

    Look-alikes: a server that exits after answering everything (a clean shutdown, nothing in flight), a client
    that closes the server's stdin with a request in flight (the server's exit then answers the client's
    close), a server that could not start (no call was ever in its hands)."""

    name = "stdio_server_crash"

    def __init__(self) -> None:
        self._crashes: dict[str, _Crash] = {}  # the session's scope -> what it left unanswered

    def add(self, call: Call) -> None:
        session = call.exchange.stdio
        if session is None or call.direction != C2S or call.request.kind != "request" or call.responses:
            return
        if session.exit_t is None or session.spawn_error is not None:
            return
        if session.signaled_t is not None and session.signaled_t <= session.exit_t:
            return  # its client sent it a signal (through the wrapper): the client ended it, no crash
        ended = session.end_after(call.request.t)
        if ended is None or ended[0] is not Ending.SERVER_CUT or session.exit_t < call.request.t:
            return
        crash = self._crashes.setdefault(session.scope, _Crash(session))
        crash.count += 1
        if len(crash.calls) < CALLS_NAMED:
            crash.calls.append(call)

    def finish(self, context: Context) -> list[FindingRecord]:
        return [_crash_finding(self.name, crash) for crash in self._crashes.values()]


def _crash_finding(rule: str, crash: _Crash) -> FindingRecord:
    session, calls = crash.session, crash.calls
    exit_t = session.exit_t if session.exit_t is not None else calls[-1].request.t
    exited, command = session.exit_words(), short_command(session.command_text, 80)
    named = ", ".join(_in_flight(call, exit_t) for call in calls[:LISTED])
    more = f", and {crash.count - LISTED} more" if crash.count > LISTED else ""
    evidence = [
        f"{command}: {exited}",
        f"{crash.count} request(s) in flight got no answer: {named}{more}",
        _last_stderr(session, exit_t),
    ]
    if session.stdin_eof is not None and session.stdin_eof >= exit_t:
        closed = duration_text(session.stdin_eof - exit_t)
        evidence.append(f"the client closed the server's stdin {closed} after the exit")
    title = f"stdio server died mid-call: {exited.removeprefix('the server ')}, {crash.count} request(s) unanswered"
    summary = (
        f"The stdio server ({command}) ended while {crash.count} request(s) of its client waited: {exited}, "
        "before the client closed its stdin. Whatever those requests were doing stopped with the process."
    )
    return _finding(rule, title, summary, evidence, [c.call_id for c in calls], (calls[0].request.t, exit_t))


def _in_flight(call: Call, exit_t: float) -> str:
    what = f"{call.method} {call.tool}" if call.tool else f"{call.method}"
    return f"{what} (id {call.request.id!r}, sent {duration_text(max(0.0, exit_t - call.request.t))} before the exit)"


def _last_stderr(session: StdioSession, exit_t: float) -> str:
    lines = session.lines_between(float("-inf"), exit_t + SKEW)
    if not lines:
        return "the server wrote nothing on stderr before it exited"
    last = lines[-1]
    before = duration_text(max(0.0, exit_t - last.t_first))
    return f"stderr's last line before the exit ({before} before it): {last.text!r}"
