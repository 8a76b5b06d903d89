"""``mcp-blackbox diff BEFORE AFTER``: what changed between two captures, e.g. before and after a fix.

What is compared is each logical request: a lone call, or a retry chain as one request that ended as its
last attempt did (its first attempt stands for it; the later attempts are not matched on their own). A
request ``ok`` succeeded at once, ``recovered`` succeeded after a failure and a retry, ``failed`` ended
failing. Requests are matched by server, method, tool and arguments digest, in order: the first
``tools/call write_record`` with given arguments before is matched with the first one after, the second
with the second. The server is named by host and path, not port: a test server listens on a new port
each run.

Worse (``regressions``): a matched request that did not fail and now does, a failing request with no
counterpart before, a request that succeeded at once and now needs a retry (``needs_retry``), a write that
ran more than once (certainly or possibly: analyzer/across/repeated_runs.py) more often than before, and a
tool whose p95 latency grew past ``latency_ratio`` (with enough calls on both sides to say so). A request
that failed, was retried and succeeded is no new failure: it is where it needs a retry that it got worse.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcp_blackbox.analyzer.model.vocabulary import is_failure
from mcp_blackbox.analyzer.outputs.analysis import Analysis, CallStream
from mcp_blackbox.analyzer.outputs.export import iter_calls_and_records

MIN_LATENCY_CALLS = 5  # calls of a tool on each side before its p95 may count as a regression
DEFAULT_LATENCY_RATIO = 2.0

Key = tuple[str, str, str, str]  # server, method, tool, arguments digest
# A call as the diff keeps it: the fields of its export record that matching, states, latency and the
# outputs read. A side holds one per call, not the whole record: a long capture's diff stays small.
SLIM_FIELDS = ("call_id", "method", "tool", "arguments_digest", "outcome", "flags", "reason", "started_at",
               "t_start", "duration_ms")  # fmt: skip
CallRecord = dict[str, Any]  # SLIM_FIELDS of an export record
# How a logical request ended, worst first: the rank says which way a change went.
STATES = ("failed", "recovered", "ok")


@dataclass
class Side:
    """One capture as the diff reads it."""

    calls: list[CallRecord]
    servers: dict[str, str]  # call id -> host and path
    chains: dict[str, dict[str, Any]] = field(default_factory=dict)  # first attempt's id -> its group's record
    later: set[str] = field(default_factory=set)  # ids of the attempts after a chain's first
    retries: Counter[tuple[str, str]] = field(default_factory=Counter)  # (origin, what) of failure retries
    # (tool, arguments digest, certainty) of each write that ran more than once
    twice: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    @classmethod
    def of(cls, analysis: Analysis | CallStream, *, redact: bool = True) -> Side:
        """One capture's side, from the whole analysis or from the export's stream (read to its end here:
        its retry groups and writes run twice are known then)."""
        side = cls([], {})
        for call, record in iter_calls_and_records(analysis, redact=redact):
            side.calls.append({name: record[name] for name in SLIM_FIELDS})  # type: ignore[literal-required]
            side.servers[call.call_id] = _server(call.exchange.endpoint)
        by_id = {c["call_id"]: c for c in side.calls}
        for group in (g.record() for g in analysis.retry_groups):
            # With --since/--until a chain's earlier attempts may be outside the range: its first attempt
            # in the range stands for it.
            members = [m for m in group["members"] if m in by_id]
            first = by_id[members[0]]
            side.chains[first["call_id"]] = dict(group)
            side.later.update(members[1:])
            if group["failure_retry"]:
                side.retries[(group["origin"], _what(first))] += 1
        for entry in analysis.ran_more_than_once:
            side.twice[(entry.tool, entry.arguments_digest, entry.certainty.value)] += 1
        return side

    @property
    def requests(self) -> list[CallRecord]:
        """The logical requests: each call but a chain's later attempts."""
        return [c for c in self.calls if c["call_id"] not in self.later]

    def state(self, call: CallRecord) -> str:
        """How the request ``call`` stands for ended: failed, recovered (after a retry of a failure) or ok."""
        chain = self.chains.get(call["call_id"])
        if is_failure(chain["final_outcome"] if chain else call["outcome"]):
            return "failed"
        return "recovered" if chain and chain["failure_retry"] and chain["attempts"] > 1 else "ok"

    def key(self, call: CallRecord) -> Key:
        return (self.servers[call["call_id"]], call["method"] or "", call["tool"] or "", call["arguments_digest"] or "")


def _server(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return f"{parts.hostname or ''}{parts.path}"


def _what(call: CallRecord) -> str:
    return " ".join(part for part in (call["method"] or "(response)", call["tool"]) if part)


def diff(before: Side, after: Side, *, latency_ratio: float = DEFAULT_LATENCY_RATIO) -> dict[str, Any]:
    """What changed from ``before`` to ``after``; ``regressions`` says, a line each, what got worse."""
    pairs, only_before, only_after = _match(before, after)
    changed = [_change(b, a, before, after) for b, a in pairs if _differ(b, a, before, after)]
    new_failures = [c for c in changed if c["after"]["state"] == "failed"]
    new_failures += [_one_side(a, "after", after) for a in only_after if after.state(a) == "failed"]
    needs_retry = [c for c in changed if c["after"]["state"] == "recovered" and c["before"]["state"] == "ok"]
    fixed = [c for c in changed if c["better"]]
    fixed += [_one_side(b, "before", before) for b in only_before if before.state(b) == "failed"]
    latency = _latency(before.calls, after.calls, latency_ratio)
    retries = _counted_changes(before.retries, after.retries, lambda key: f"{key[0]}: {key[1]}")
    twice = _counted_changes(before.twice, after.twice, lambda key: f"{key[0]} (arguments {key[1][:10]}), {key[2]}")
    counted = {"ran more than once": twice}  # more retries: needs_retry, a line per request
    return {
        "calls": {
            "before": len(before.calls),
            "after": len(after.calls),
            "requests_before": len(before.requests),
            "requests_after": len(after.requests),
            "matched": len(pairs),
        },
        "failures": {"before": _failure_count(before.calls), "after": _failure_count(after.calls)},
        "changed": changed,
        "new_failures": new_failures,
        "needs_retry": needs_retry,
        "fixed": fixed,
        "only_before": len(only_before),
        "only_after": len(only_after),
        "retries": retries,
        "ran_more_than_once": twice,
        "latency": latency,
        "regressions": _regressions(new_failures, needs_retry, counted, latency),
    }


def _failure_count(calls: list[CallRecord]) -> int:
    return sum(1 for c in calls if is_failure(c["outcome"]))


def _differ(before_call: CallRecord, after_call: CallRecord, before: Side, after: Side) -> bool:
    was = (before.state(before_call), before_call["outcome"], before_call["flags"])
    return was != (after.state(after_call), after_call["outcome"], after_call["flags"])


def _regressions(
    new_failures: list[dict[str, Any]],
    needs_retry: list[dict[str, Any]],
    counted: dict[str, list[dict[str, Any]]],
    latency: list[dict[str, Any]],
) -> list[str]:
    """A line per regression: each new failure, each request that now needs a retry, each count in
    ``counted`` (by its name) that grew, each tool that got slower."""
    grew = [(name, r) for name, rows in counted.items() for r in rows if r["after"] > r["before"]]
    regressions = [f"new failure: {c['after']['call_id']} {c['what']} {c['after']['outcome']}" for c in new_failures]
    regressions += [
        f"now needs a retry: {c['after']['call_id']} {c['what']} ({c['after']['attempts']} attempts)"
        for c in needs_retry
    ]
    regressions += [f"{name}: {r['what']} ({r['before']} -> {r['after']})" for name, r in grew]
    regressions += [
        f"slower: {t['tool']} p95 {t['before']['p95']} -> {t['after']['p95']} ms" for t in latency if t["slower"]
    ]
    return regressions


def _match(before: Side, after: Side) -> tuple[list[tuple[CallRecord, CallRecord]], list[CallRecord], list[CallRecord]]:
    """The n-th call with a key before is paired with the n-th with that key after."""
    waiting: dict[Key, list[CallRecord]] = {}
    for call in after.requests:
        waiting.setdefault(after.key(call), []).append(call)
    taken: dict[Key, int] = Counter()
    pairs: list[tuple[CallRecord, CallRecord]] = []
    only_before: list[CallRecord] = []
    for call in before.requests:
        key = before.key(call)
        candidates = waiting.get(key, [])
        if taken[key] < len(candidates):
            pairs.append((call, candidates[taken[key]]))
            taken[key] += 1
        else:
            only_before.append(call)
    only_after = [c for key, calls in waiting.items() for c in calls[taken[key] :]]
    only_after.sort(key=lambda c: c["t_start"])
    return pairs, only_before, only_after


def _brief(call: CallRecord, side: Side) -> dict[str, Any]:
    """The request as ``call`` (its first attempt) shows it, with how its chain ended."""
    chain = side.chains.get(call["call_id"])
    return {
        "call_id": call["call_id"],
        "outcome": call["outcome"],
        "flags": call["flags"],
        "reason": call["reason"],
        "started_at": call["started_at"],
        "state": side.state(call),
        "attempts": chain["attempts"] if chain else 1,
        "final_outcome": chain["final_outcome"] if chain else call["outcome"],
    }


def _change(before_call: CallRecord, after_call: CallRecord, before: Side, after: Side) -> dict[str, Any]:
    was, now = STATES.index(before.state(before_call)), STATES.index(after.state(after_call))
    return {
        "what": _what(after_call),
        "before": _brief(before_call, before),
        "after": _brief(after_call, after),
        "worse": now < was,
        "better": now > was,
    }


def _one_side(call: CallRecord, where: str, side: Side) -> dict[str, Any]:
    """A request with no counterpart on the other side (``where``: the side it is on)."""
    other = "after" if where == "before" else "before"
    brief = _brief(call, side)
    return {"what": _what(call), where: brief, other: None, "worse": where == "after", "better": where == "before"}


def _counted_changes(before: Counter[Any], after: Counter[Any], name: Any) -> list[dict[str, Any]]:
    return [
        {"what": name(key), "before": before[key], "after": after[key]}
        for key in sorted(set(before) | set(after), key=str)
        if before[key] != after[key]
    ]


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100): a value that was measured, not an interpolation."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _latency(before: Iterable[CallRecord], after: Iterable[CallRecord], ratio: float) -> list[dict[str, Any]]:
    def durations(calls: Iterable[CallRecord]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for call in calls:
            if call["method"] == "tools/call" and call["tool"] and call["duration_ms"] is not None:
                out.setdefault(call["tool"], []).append(call["duration_ms"])
        return out

    was, now = durations(before), durations(after)
    rows = []
    for tool in sorted(set(was) | set(now)):
        b, a = was.get(tool, []), now.get(tool, [])
        p95_before, p95_after = percentile(b, 95), percentile(a, 95)
        enough = len(b) >= MIN_LATENCY_CALLS and len(a) >= MIN_LATENCY_CALLS
        slower = (
            ratio > 0
            and enough
            and p95_before is not None
            and p95_after is not None
            and p95_after > ratio * max(p95_before, 1.0)  # below 1 ms, noise
        )
        rows.append({
            "tool": tool,
            "before": {"calls": len(b), "p50": percentile(b, 50), "p95": p95_before},
            "after": {"calls": len(a), "p50": percentile(a, 50), "p95": p95_after},
            "slower": slower,
        })  # fmt: skip
    return rows
