"""Findings about gateways and HTTP failures: what a reverse proxy, a rate limiter or an MCP aggregator did to
many calls at once, read from the wire (status, timing, headers, the verdict's fields).

- ``upstream_marked_down``: a gateway's 504s (it waited on its upstream and gave up), then 502s that came back
  at once (it no longer tried): nginx marks an upstream down after ``max_fails`` failures within
  ``fail_timeout`` and answers "no live upstreams" with its own 502 page, without connecting.
- ``gateway_timeout``: 504s whose durations cluster at one value: a timeout configured somewhere in the path.
- ``rate_limited``: 429s (and 503s with Retry-After) from one server, and whether the retries kept the wait.
- ``retry_storm``: many requests on the wire per logical call over a burst (a retry chain is one call).
- ``dead_backend_is_error``: every tools/call of an MCP gateway or aggregator answered ``isError`` with one
  text, across tools, from a point in time: its backend is gone, the tools did not fail.

Each rule keeps counts, a few call ids and small records per server (engine.py): never the calls.
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from mcp_blackbox.analyzer.across.executions import unknown_tool
from mcp_blackbox.analyzer.across.patterns.engine import CALLS_NAMED, Context, duration_text, finding_record
from mcp_blackbox.analyzer.across.retries import retry_after
from mcp_blackbox.analyzer.calls.gateway import gateway_sign
from mcp_blackbox.analyzer.model.contract import FindingRecord
from mcp_blackbox.analyzer.model.records import C2S, Call
from mcp_blackbox.analyzer.model.vocabulary import Flag, Outcome, RetryOrigin, is_failure

# ---------------------------------------------------------------- shared


def _is_client_request(call: Call) -> bool:
    """A request the client sent (not a server's request on its stream): what a gateway answers."""
    return call.direction == C2S and call.request.kind == "request"


def _took(call: Call) -> float | None:
    """Seconds from the request to the end of its attempt (its answer, or its exchange's end)."""
    end = call.t_end
    return None if end is None else max(0.0, end - call.request.t)


def _clock(t: float) -> str:
    """A time of day in UTC to the millisecond: the findings of one incident sit within minutes."""
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]


def _between(first: float, last: float) -> str:
    return f"at {_clock(first)} UTC" if last - first < 0.001 else f"from {_clock(first)} to {_clock(last)} UTC"


def _range(low: float, high: float) -> str:
    """Durations from low to high, as one value when they round alike."""
    low_text, high_text = duration_text(low), duration_text(high)
    return low_text if low_text == high_text else f"{low_text} to {high_text}"


def _retries(count: int) -> str:
    return "1 retry" if count == 1 else f"{count} retries"


def _sentence(text: str) -> str:
    """``text`` opening a sentence: its first letter upper-case, the rest as written ("UTC" stays)."""
    return text[:1].upper() + text[1:]


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _statuses(statuses: set[int]) -> str:
    return "/".join(str(status) for status in sorted(statuses))


def _gateway_of(call: Call) -> str | None:
    """The gateway the call's answer shows (a proxy's Server or Via header, its own error page), and how."""
    sign = gateway_sign(call.exchange)
    return None if sign is None else f"{sign[0]} ({sign[1]})"


@dataclass(slots=True)
class _Tally:
    """How many calls, when the first started and the last ended, and the first CALLS_NAMED of their ids."""

    count: int = 0
    first: float = math.inf
    last: float = -math.inf
    calls: list[str] = field(default_factory=list)
    shortest: float = math.inf  # of the durations added
    longest: float = 0.0

    def add(self, call: Call) -> None:
        self.count += 1
        self.first = min(self.first, call.request.t)
        self.last = max(self.last, call.t_end or call.request.t)
        took = _took(call)
        if took is not None:
            self.shortest, self.longest = min(self.shortest, took), max(self.longest, took)
        if len(self.calls) < CALLS_NAMED:
            self.calls.append(call.call_id)

    def merge(self, other: _Tally) -> None:
        self.count += other.count
        self.first, self.last = min(self.first, other.first), max(self.last, other.last)
        self.shortest, self.longest = min(self.shortest, other.shortest), max(self.longest, other.longest)
        self.calls.extend(other.calls[: CALLS_NAMED - len(self.calls)])


def _finding(name: str, title: str, summary: str, evidence: list[str], *tallies: _Tally) -> FindingRecord:
    """A finding about the calls of ``tallies`` (in the order they started: the stream feeds them so)."""
    calls = [call for tally in tallies for call in tally.calls]
    start, end = min(tally.first for tally in tallies), max(tally.last for tally in tallies)
    return finding_record(name, title, summary, evidence, calls, start, end)


# ---------------------------------------------------------------- upstream marked down

# Statuses a gateway answers when it gave up waiting on its upstream: 504, and Cloudflare's 524.
TIMEOUT_STATUSES = frozenset({504, 524})
# A 502 that never waited on the upstream comes back in a few milliseconds (nginx with no live upstream does
# not even connect). Under 250 ms, and under a fifth of the gateway's own timeouts, it cannot have waited.
FAST_502 = 0.25
FAST_SHARE_OF_TIMEOUT = 0.2
# One fast 502 after a timeout may be a single refused connection; the gateway that stopped trying answers
# every request so, so a run of them is asked for.
MIN_FAST_502 = 3


@dataclass(slots=True)
class _Outage:
    """One gateway's timeouts and the fast 502s after them, until it answers a request again."""

    gateway: str
    timeouts: _Tally = field(default_factory=_Tally)
    fast_502: _Tally = field(default_factory=_Tally)
    statuses: set[int] = field(default_factory=set)  # of the timeouts


class UpstreamMarkedDown:
    """A gateway's 504s (it waited on its upstream and gave up), then 502s that came back at once: it stopped
    sending to its upstream. nginx does so once every upstream failed ``max_fails`` times within
    ``fail_timeout`` ("no live upstreams" in its error log; on the wire, its own 502 page, in milliseconds).

    Look-alikes: an upstream that is dead from the start (fast 502s, no 504s before them: nothing timed out),
    a slow upstream the gateway keeps waiting on (504s only), 502s that took as long as a timeout (the gateway
    did try)."""

    name = "upstream_marked_down"

    def __init__(self) -> None:
        self._open: dict[str, _Outage] = {}  # server -> the outage under way
        self._found: list[tuple[str, _Outage]] = []

    def add(self, call: Call) -> None:
        if not _is_client_request(call):
            return
        server, status = call.exchange.server, call.exchange.status
        outage = self._open.get(server)
        if status in TIMEOUT_STATUSES and (gateway := _gateway_of(call)) is not None:
            outage = self._open.setdefault(server, _Outage(gateway))
            outage.timeouts.add(call)
            outage.statuses.add(status)
        elif outage is not None and status == 502 and _gateway_of(call) is not None and self._fast(call, outage):
            outage.fast_502.add(call)
        elif outage is not None and call.exchange.ok:  # the gateway reached its upstream again
            self._close(server)

    @staticmethod
    def _fast(call: Call, outage: _Outage) -> bool:
        took = _took(call)
        return took is not None and took < min(FAST_502, FAST_SHARE_OF_TIMEOUT * outage.timeouts.shortest)

    def _close(self, server: str) -> None:
        outage = self._open.pop(server)
        if outage.fast_502.count >= MIN_FAST_502:
            self._found.append((server, outage))

    def finish(self, context: Context) -> list[FindingRecord]:
        for server in list(self._open):
            self._close(server)
        return [self._record(server, outage) for server, outage in self._found]

    def _record(self, server: str, outage: _Outage) -> FindingRecord:
        timeouts, fast = outage.timeouts, outage.fast_502
        evidence = [
            f"{timeouts.count} HTTP {_statuses(outage.statuses)} from {outage.gateway} at {server}, each after "
            f"{_range(timeouts.shortest, timeouts.longest)}, {_between(timeouts.first, timeouts.last)}",
            f"then {fast.count} HTTP 502 from it, each within {duration_text(fast.longest)}, "
            f"{_between(fast.first, fast.last)}: answered without waiting on the upstream",
        ]
        title = (
            f"upstream marked down behind {outage.gateway.split(' ')[0]}: {_statuses(outage.statuses)} timeouts, "
            "then fast 502s"
        )
        summary = (
            f"The gateway at {server} timed out on its upstream {_times(timeouts.count)}, then answered "
            f"{fast.count} requests with 502 at once, without trying it: the upstream was marked down (nginx: "
            'max_fails within fail_timeout, "no live upstreams"). An upstream refusing connections after the '
            "timeouts would look the same on the wire."
        )
        return _finding(self.name, title, summary, evidence, timeouts, fast)


# ---------------------------------------------------------------- gateway timeouts at one duration

# A configured timeout cuts every call at the same moment give or take the gateway's timer and the loopback
# (milliseconds): durations are counted in 100 ms buckets and a cluster is two adjacent ones (< 200 ms wide).
BUCKET_S = 0.1
# Two cut calls at one duration may be chance; three is a pattern.
MIN_TIMEOUTS = 3
# The cluster must hold at least half of the server's timeout answers: a server's own 504s at varied times
# may put three in one bucket by chance among many.
MIN_CLUSTER_SHARE = 0.5
# Timeouts people configure (seconds): a cluster this close to one is named by it.
ROUND_TIMEOUTS = (1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 100, 120, 180, 300, 600)


@dataclass(slots=True)
class _Timeouts:
    gateway: str | None = None  # the first gateway its answers showed
    buckets: dict[int, _Tally] = field(default_factory=dict)  # duration // BUCKET_S -> the calls
    total: int = 0
    total_seconds: dict[int, float] = field(default_factory=dict)  # bucket -> the sum of its durations
    statuses: set[int] = field(default_factory=set)


class GatewayTimeout:
    """504s whose durations cluster at one value: a timeout configured in the path cut them (nginx's
    ``proxy_read_timeout``, HAProxy's ``timeout server``, a load balancer's idle timeout).

    Look-alikes: a server's own 504s at varied times (no cluster), slow calls that end at varied times."""

    name = "gateway_timeout"

    def __init__(self) -> None:
        self._servers: dict[str, _Timeouts] = {}

    def add(self, call: Call) -> None:
        took = _took(call)
        if not _is_client_request(call) or call.exchange.status not in TIMEOUT_STATUSES or took is None:
            return
        # A gateway's own 504 only: a server's 504 after a time of its choosing is no timeout in the path.
        if (gateway := _gateway_of(call)) is None:
            return
        record = self._servers.setdefault(call.exchange.server, _Timeouts())
        record.gateway = record.gateway or gateway
        bucket = int(took / BUCKET_S)
        record.buckets.setdefault(bucket, _Tally()).add(call)
        record.total_seconds[bucket] = record.total_seconds.get(bucket, 0.0) + took
        record.total += 1
        record.statuses.add(call.exchange.status or 0)

    def finish(self, context: Context) -> list[FindingRecord]:
        found = []
        for server, record in self._servers.items():
            cluster, seconds = _densest(record)
            # A timeout under FAST_502 is no wait on an upstream: the gateway refused at once.
            waited = cluster.count and seconds / cluster.count >= FAST_502
            if waited and cluster.count >= MIN_TIMEOUTS and cluster.count >= MIN_CLUSTER_SHARE * record.total:
                found.append(self._record(server, record, cluster, seconds / cluster.count))
        return found

    def _record(self, server: str, record: _Timeouts, cluster: _Tally, mean: float) -> FindingRecord:
        value = _round_timeout(mean)
        if record.gateway:
            title = f"{record.gateway.split(' ')[0]}'s timeout is ~{value}: it cut {cluster.count} calls"
        else:
            title = f"a timeout of ~{value} in front of {server}: it cut {cluster.count} calls"
        evidence = [
            f"{cluster.count} of {record.total} HTTP {_statuses(record.statuses)} from {server} came after "
            f"{_range(cluster.shortest, cluster.longest)}, {_between(cluster.first, cluster.last)}",
        ]
        if record.gateway:
            evidence.append(f"answered by {record.gateway}")
        answered = f" ({record.gateway.split(' ')[0]} answered)" if record.gateway else ""
        summary = (
            f"{cluster.count} calls to {server} ended in HTTP {_statuses(record.statuses)} after the same time, "
            f"~{value}: a timeout configured in the path cut them{answered}, whatever the server was doing."
        )
        return _finding(self.name, title, summary, evidence, cluster)


def _densest(record: _Timeouts) -> tuple[_Tally, float]:
    """The two adjacent buckets with the most calls, merged, and the sum of their durations."""
    best, best_seconds = _Tally(), 0.0
    for bucket in record.buckets:
        merged, seconds = _Tally(), 0.0
        for neighbour in (bucket, bucket + 1):
            if neighbour in record.buckets:
                merged.merge(record.buckets[neighbour])
                seconds += record.total_seconds[neighbour]
        if merged.count > best.count:
            best, best_seconds = merged, seconds
    return best, best_seconds


def _round_timeout(seconds: float) -> str:
    """The configured timeout a mean duration shows: a round value when it is within 10% above it (the time
    to connect and send comes on top), else the duration itself."""
    for value in ROUND_TIMEOUTS:
        if value <= seconds <= value * 1.1:
            return f"{value} s"
    return duration_text(seconds)


# ---------------------------------------------------------------- rate limiting

RATE_LIMIT = 429
# A 503 says "unavailable"; only with Retry-After is it a limit that asks the client to come back later.
UNAVAILABLE = 503
# One rate-limited answer is the call's own verdict; a pattern needs it twice.
MIN_LIMITED = 2
# Retry chains whose last attempt was rate-limited, waiting for the next attempt: a chain that gave up is
# never asked for again, so the oldest are dropped past this many.
MAX_WAITING_CHAINS = 1000


def _rate_limited(call: Call) -> bool:
    status = call.exchange.status
    return status == RATE_LIMIT or (status == UNAVAILABLE and "retry-after" in call.exchange.response_headers)


@dataclass(slots=True)
class _Limits:
    limited: _Tally = field(default_factory=_Tally)
    statuses: Counter[int] = field(default_factory=Counter)
    asked: list[float] = field(default_factory=list)  # the shortest and longest Retry-After (s)
    dated: int = 0  # answers whose Retry-After is an HTTP date
    honoured: list[float] = field(default_factory=list)  # how long the retries that kept it waited: min, max
    ignored: list[float] = field(default_factory=list)  # the same for those that did not
    honoured_count: int = 0
    ignored_count: int = 0


def _widen(bounds: list[float], value: float) -> None:
    """Keep [lowest, highest] of the values seen."""
    if bounds:
        bounds[:] = [min(bounds[0], value), max(bounds[1], value)]
    else:
        bounds[:] = [value, value]


class RateLimited:
    """429s (and 503s with Retry-After) from one server; whether the client's retries kept Retry-After, from the
    retry chains and RETRY_AFTER_IGNORED (analyzer/across/retries.py).

    Look-alike: 503s without Retry-After (a server unavailable, not a limit)."""

    name = "rate_limited"

    def __init__(self) -> None:
        self._servers: dict[str, _Limits] = {}
        # retry group -> (server, when its rate-limited attempt ended), until the chain's next attempt
        self._waiting: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def add(self, call: Call) -> None:
        if not _is_client_request(call):
            return
        if call.link is not None and (waiting := self._waiting.pop(call.link.group, None)) is not None:
            self._judge_retry(call, *waiting)
        if not _rate_limited(call):
            return
        server = call.exchange.server
        limits = self._servers.setdefault(server, _Limits())
        limits.limited.add(call)
        limits.statuses[call.exchange.status or 0] += 1
        if (asked := retry_after(call)) is not None:
            _widen(limits.asked, asked)
        elif "retry-after" in call.exchange.response_headers:
            limits.dated += 1
        if call.link is not None and "retry-after" in call.exchange.response_headers:
            self._waiting[call.link.group] = (server, call.t_end or call.request.t)
            while len(self._waiting) > MAX_WAITING_CHAINS:
                self._waiting.popitem(last=False)

    def _judge_retry(self, retry: Call, server: str, limited_at: float) -> None:
        limits = self._servers[server]
        waited = retry.request.t - limited_at
        if Flag.RETRY_AFTER_IGNORED in retry.flags:
            limits.ignored_count += 1
            _widen(limits.ignored, waited)
        else:
            limits.honoured_count += 1
            _widen(limits.honoured, waited)

    def finish(self, context: Context) -> list[FindingRecord]:
        return [
            self._record(server, limits)
            for server, limits in self._servers.items()
            if limits.limited.count >= MIN_LIMITED
        ]

    def _record(self, server: str, limits: _Limits) -> FindingRecord:
        statuses = ", ".join(f"{count} HTTP {status}" for status, count in sorted(limits.statuses.items()))
        evidence = [f"{statuses} from {server}, {_between(limits.limited.first, limits.limited.last)}"]
        if limits.asked:
            low, high = limits.asked
            evidence.append(f"Retry-After asked for {low:g} s" + (f" to {high:g} s" if high > low else ""))
        if limits.dated:
            evidence.append(f"{limits.dated} gave Retry-After as an HTTP date")
        if not limits.asked and not limits.dated:
            evidence.append("no Retry-After given")
        if limits.ignored_count:
            evidence.append(
                f"{_retries(limits.ignored_count)} came {_range(*limits.ignored)} after the answer, sooner than asked "
                "(RETRY_AFTER_IGNORED)"
            )
        if limits.honoured_count:
            evidence.append(f"{_retries(limits.honoured_count)} waited {_range(*limits.honoured)}, as asked")
        kept = _kept(limits)
        title = f"rate limited by {server}: {statuses}, {kept}"
        summary = f"{server} rate-limited {limits.limited.count} requests ({statuses}); {_kept_sentence(limits)}"
        return _finding(self.name, title, summary, evidence, limits.limited)


def _kept(limits: _Limits) -> str:
    """What the title says of the retries: Retry-After honoured, ignored, or both."""
    if not limits.asked and not limits.dated:
        return "no Retry-After"
    if limits.ignored_count and limits.honoured_count:
        return "Retry-After ignored by some retries"
    if limits.ignored_count:
        return "Retry-After ignored"
    return "Retry-After honoured" if limits.honoured_count else "no retry seen"


def _kept_sentence(limits: _Limits) -> str:
    retries = limits.ignored_count + limits.honoured_count
    if not retries:
        return "no retry of a rate-limited request is in the capture."
    return (
        f"of the {retries} retries after a Retry-After, {limits.honoured_count} waited as asked and "
        f"{limits.ignored_count} came sooner."
    )


# ---------------------------------------------------------------- retry storms

# Calls are counted per server in 10 s buckets; a burst is a run of buckets that each hold a retry, with the
# bucket before it (where the first attempts of its chains started).
STORM_BUCKET_S = 10.0
# One retry doubles a call; 3 requests per logical call is a loop that retries most calls more than once.
MIN_FACTOR = 3.0
# Fewer requests than this are one chain's retries, not a storm on the wire.
MIN_STORM_REQUESTS = 10


def _is_retry(call: Call) -> bool:
    """A later attempt of a retry chain: a request on the wire that no new logical call made. A resumed
    stream is one call's, and negotiation and MRTR rounds are not failures retried."""
    link = call.link
    if link is None or link.attempt < 2 or link.origin is None:
        return False
    return link.origin is not RetryOrigin.TRANSPORT_RESUME and link.origin.retries_a_failure


@dataclass(slots=True)
class _Burst:
    index: int  # the bucket it reached
    requests: _Tally = field(default_factory=_Tally)
    retries: int = 0
    origins: Counter[RetryOrigin] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)  # what the failed attempts got

    def add(self, call: Call) -> None:
        self.requests.add(call)
        if _is_retry(call) and call.link is not None and call.link.origin is not None:
            self.retries += 1
            self.origins[call.link.origin] += 1
        if is_failure(call.outcome):
            status = call.exchange.status
            self.failed[f"HTTP {status}" if status is not None and status >= 400 else str(call.outcome)] += 1

    def merge(self, other: _Burst) -> None:
        self.index = max(self.index, other.index)
        self.requests.merge(other.requests)
        self.retries += other.retries
        self.origins.update(other.origins)
        self.failed.update(other.failed)

    @property
    def factor(self) -> float:
        return self.requests.count / max(1, self.requests.count - self.retries)


@dataclass(slots=True)
class _Traffic:
    """One server's current bucket, the one before it, and the burst under way."""

    bucket: _Burst
    before: _Burst | None = None
    burst: _Burst | None = None


class RetryStorm:
    """Many requests on the wire per logical call, over a burst: retries multiplying the load on a server that
    is already failing. The factor is requests / logical calls, a retry chain counting as one call.

    Look-alikes: a busy client making many distinct calls (factor ~1), one retried call (few requests)."""

    name = "retry_storm"

    def __init__(self) -> None:
        self._servers: dict[str, _Traffic] = {}
        self._found: list[tuple[str, _Burst]] = []

    def add(self, call: Call) -> None:
        if not _is_client_request(call):
            return
        server, index = call.exchange.server, int(call.request.t // STORM_BUCKET_S)
        traffic = self._servers.get(server)
        if traffic is None:
            traffic = self._servers[server] = _Traffic(_Burst(index))
        elif index > traffic.bucket.index:  # calls come in about the order they started: an earlier one stays
            self._close_bucket(server, traffic, index)
        traffic.bucket.add(call)

    def _close_bucket(self, server: str, traffic: _Traffic, index: int) -> None:
        """The current bucket is over: it extends the burst when it holds a retry (and the next bucket is
        adjacent), else the burst ends."""
        bucket = traffic.bucket
        if bucket.retries:
            if traffic.burst is None:
                traffic.burst = _Burst(bucket.index)
                if traffic.before is not None and traffic.before.index == bucket.index - 1:
                    traffic.burst.merge(traffic.before)
            traffic.burst.merge(bucket)
        if not bucket.retries or index > bucket.index + 1:
            self._end_burst(server, traffic)
        traffic.before, traffic.bucket = bucket, _Burst(index)

    def _end_burst(self, server: str, traffic: _Traffic) -> None:
        burst, traffic.burst = traffic.burst, None
        if burst is not None and burst.requests.count >= MIN_STORM_REQUESTS and burst.factor >= MIN_FACTOR:
            self._found.append((server, burst))

    def finish(self, context: Context) -> list[FindingRecord]:
        for server, traffic in self._servers.items():
            self._close_bucket(server, traffic, traffic.bucket.index + 2)  # past the last: the burst ends
        return [self._record(server, burst) for server, burst in self._found]

    def _record(self, server: str, burst: _Burst) -> FindingRecord:
        requests, logical = burst.requests.count, burst.requests.count - burst.retries
        who = ", ".join(f"{origin} {count}" for origin, count in burst.origins.most_common())
        failed = ", ".join(f"{what} ({count})" for what, count in burst.failed.most_common(3))
        evidence = [
            f"{requests} requests to {server} for {logical} logical calls, "
            f"{_between(burst.requests.first, burst.requests.last)} "
            f"({duration_text(burst.requests.last - burst.requests.first)}): {burst.retries} were retries",
            f"who retried: {who}",
        ]
        if failed:
            evidence.append(f"the failed attempts got: {failed}")
        title = f"retry storm: {burst.factor:.1f} requests per logical call to {server}"
        summary = (
            f"{requests} requests reached {server} for {logical} logical calls, an amplification of "
            f"{burst.factor:.1f}x: {burst.retries} were failed attempts sent again, "
            f"{'all' if len(burst.origins) == 1 else 'mostly'} by {burst.origins.most_common(1)[0][0]}."
        )
        return _finding(self.name, title, summary, evidence, burst.requests)


# ---------------------------------------------------------------- a dead backend behind a gateway

# The same text on three isError answers in a row, across two tools or more, is not one tool's input
# failing: a tool that reports an error for some inputs answers other calls with results, and a dead
# backend's text is the gateway's own. One tool failing alike for every input is left alone.
MIN_DEAD_CALLS = 3
MIN_DEAD_TOOLS = 2
TOOLS_NAMED = 10  # the tools a finding names, of those the calls asked for
# Numbers and ids that change from call to call in one error text (request ids, ports, counts, uuids).
_VARYING = re.compile(r"\b(?=[0-9a-f-]*\d)[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b|\d+", re.IGNORECASE)


def _error_text(call: Call) -> str | None:
    """The isError text with what varies between calls folded: the tool's own name, numbers and ids."""
    text = call.error_message
    if text is None or unknown_tool(call):
        return None  # the server has no such tool: it answered for itself, no backend was asked
    if call.tool and len(call.tool) > 1:
        text = text.replace(call.tool, "<tool>")
    return _VARYING.sub("#", text).strip()


@dataclass(slots=True)
class _Streak:
    """tools/call answers in a row from one server, all isError with one text."""

    text: str
    example: str  # the first answer's text as sent
    calls: _Tally = field(default_factory=_Tally)
    tools: list[str] = field(default_factory=list)  # up to TOOLS_NAMED
    distinct_tools: int = 0
    ended_by: str | None = None  # what broke the streak, if anything did

    def add(self, call: Call) -> None:
        self.calls.add(call)
        tool = call.tool or "?"
        if tool not in self.tools:
            self.distinct_tools += 1
            if len(self.tools) < TOOLS_NAMED:
                self.tools.append(tool)


class DeadBackendIsError:
    """An MCP gateway or aggregator whose backend is gone answers HTTP 200 with ``isError: true`` for every
    tools/call, with its own error text (FastMCP's proxy: "Error calling tool 'X': All connection attempts
    failed"): from a point in time, every call fails alike whatever tool it names.

    Look-alike: a tool that reports isError for some inputs while other calls succeed."""

    name = "dead_backend_is_error"

    def __init__(self) -> None:
        self._streaks: dict[str, _Streak] = {}
        self._found: list[tuple[str, _Streak]] = []

    def add(self, call: Call) -> None:
        if not _is_client_request(call) or call.method != "tools/call":
            return
        server = call.exchange.server
        streak = self._streaks.get(server)
        text = _error_text(call) if call.outcome == Outcome.TOOL_ERROR else None
        if streak is not None and text == streak.text:
            streak.add(call)
            return
        if streak is not None:
            streak.ended_by = f"{call.outcome} at {_clock(call.request.t)} UTC"
            self._end(server)
        if text is not None:
            self._streaks[server] = _Streak(text, call.error_message or "")
            self._streaks[server].add(call)

    def _end(self, server: str) -> None:
        streak = self._streaks.pop(server)
        if streak.calls.count >= MIN_DEAD_CALLS and streak.distinct_tools >= MIN_DEAD_TOOLS:
            self._found.append((server, streak))

    def finish(self, context: Context) -> list[FindingRecord]:
        for server in list(self._streaks):
            self._end(server)
        return [self._record(server, streak) for server, streak in self._found]

    def _record(self, server: str, streak: _Streak) -> FindingRecord:
        calls = streak.calls
        tools = ", ".join(sorted(streak.tools)) + (", ..." if streak.distinct_tools > len(streak.tools) else "")
        evidence = [
            f"{calls.count} tools/call in a row to {server} answered isError, {_between(calls.first, calls.last)}, "
            f"across {streak.distinct_tools} tools ({tools})",
            f"all with one text (numbers, ids and the tool's name aside): {streak.example!r}",
            f"the next tools/call got {streak.ended_by}"
            if streak.ended_by
            else "no tools/call to it succeeded after that in the capture",
        ]
        title = f"dead backend behind {server}: {calls.count} tools/call in a row answered isError"
        summary = (
            f"{_sentence(_between(calls.first, calls.last))} every tools/call to {server} ({calls.count}, across "
            f"{streak.distinct_tools} tools) answered isError with the same text, as a gateway answers when its "
            "backend is unreachable: a tool failing for its input would not answer every tool alike."
        )
        return _finding(self.name, title, summary, evidence, calls)
