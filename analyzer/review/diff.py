"""``mcp-blackbox diff BEFORE AFTER``: what changed between two captures, e.g. before and after a fix.

What is compared is each logical request: a lone call, or a retry chain as one request that ended as its
last attempt did (its first attempt stands for it; the later attempts are not matched on their own). A
request ``ok`` succeeded at once, ``recovered`` succeeded after a failure and a retry, ``failed`` ended
failing. Requests are matched by server, method, tool and arguments digest, in order: the first
``tools/call write_record`` with given arguments before is matched with the first one after, the second
with the second. The server is named by host and path, not port: a test server listens on a new port
each run.

Each side is kept on disk (``diff_side.py``): what stays in memory is what the output lists.

Worse (``regressions``): a matched request that did not fail and now does, a failing request with no
counterpart before, a request that succeeded at once and now needs a retry (``needs_retry``), a write that
ran more than once (certainly or possibly: analyzer/across/repeated_runs.py) more often than before, and a
tool whose p95 latency grew past ``latency_ratio`` (with enough calls on both sides to say so). A request
that failed, was retried and succeeded is no new failure: it is where it needs a retry that it got worse.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from mcp_blackbox.analyzer.review.diff_side import Attached, Request, Side, what

MIN_LATENCY_CALLS = 5  # calls of a tool on each side before its p95 may count as a regression
DEFAULT_LATENCY_RATIO = 2.0
# How a logical request ended, worst first: the rank says which way a change went.
STATES = ("failed", "recovered", "ok")


def diff(before: Side, after: Side, *, latency_ratio: float = DEFAULT_LATENCY_RATIO) -> dict[str, Any]:
    """What changed from ``before`` to ``after``; ``regressions`` says, a line each, what got worse."""
    matched, only_before, only_after = 0, 0, 0
    changed: list[dict[str, Any]] = []
    fixed_alone: list[dict[str, Any]] = []  # failing requests before with no counterpart after
    failing_alone: list[dict[str, Any]] = []  # failing requests after with no counterpart before
    with Attached(before, after) as both:
        for request, counterpart in both.pairs():
            if counterpart is None:
                only_before += 1
                if request.state == "failed":
                    fixed_alone.append(_one_side(request, "before"))
                continue
            matched += 1
            if _differ(request, counterpart):
                changed.append(_change(request, counterpart))
        for request in both.unmatched_after():
            only_after += 1
            if request.state == "failed":
                failing_alone.append(_one_side(request, "after"))
    new_failures = [c for c in changed if c["after"]["state"] == "failed"] + failing_alone
    needs_retry = [c for c in changed if c["after"]["state"] == "recovered" and c["before"]["state"] == "ok"]
    fixed = [c for c in changed if c["better"]] + fixed_alone
    latency = _latency(before, after, latency_ratio)
    retries = _counted_changes(before.retries, after.retries, lambda key: f"{key[0]}: {key[1]}")
    twice = _counted_changes(before.twice, after.twice, lambda key: f"{key[0]} (arguments {key[1][:10]}), {key[2]}")
    counted = {"ran more than once": twice}  # more retries: needs_retry, a line per request
    return {
        "calls": {
            "before": before.calls,
            "after": after.calls,
            "requests_before": before.requests,
            "requests_after": after.requests,
            "matched": matched,
        },
        "failures": {"before": before.failures, "after": after.failures},
        "changed": changed,
        "new_failures": new_failures,
        "needs_retry": needs_retry,
        "fixed": fixed,
        "only_before": only_before,
        "only_after": only_after,
        "retries": retries,
        "ran_more_than_once": twice,
        "latency": latency,
        "regressions": _regressions(new_failures, needs_retry, counted, latency),
    }


def _differ(before: Request, after: Request) -> bool:
    was = (before.state, before.call["outcome"], before.call["flags"])
    return was != (after.state, after.call["outcome"], after.call["flags"])


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


def _brief(request: Request) -> dict[str, Any]:
    """The request as its first attempt shows it, with how its chain ended."""
    call, chain = request
    return {
        "call_id": call["call_id"],
        "outcome": call["outcome"],
        "flags": call["flags"],
        "reason": call["reason"],
        "started_at": call["started_at"],
        "state": request.state,
        "attempts": chain["attempts"] if chain else 1,
        "final_outcome": chain["final_outcome"] if chain else call["outcome"],
    }


def _change(before: Request, after: Request) -> dict[str, Any]:
    was, now = STATES.index(before.state), STATES.index(after.state)
    return {
        "what": what(after.call),
        "before": _brief(before),
        "after": _brief(after),
        "worse": now < was,
        "better": now > was,
    }


def _one_side(request: Request, where: str) -> dict[str, Any]:
    """A request with no counterpart on the other side (``where``: the side it is on)."""
    other = "after" if where == "before" else "before"
    return {"what": what(request.call), where: _brief(request), other: None, "worse": where == "after",
            "better": where == "before"}  # fmt: skip


def _counted_changes(before: Counter[Any], after: Counter[Any], name: Any) -> list[dict[str, Any]]:
    return [
        {"what": name(key), "before": before[key], "after": after[key]}
        for key in sorted(set(before) | set(after), key=str)
        if before[key] != after[key]
    ]


def _latency(before: Side, after: Side, ratio: float) -> list[dict[str, Any]]:
    was, now = before.latency(), after.latency()
    rows = []
    for tool in sorted(set(was) | set(now)):
        b, a = was.get(tool, (0, None, None)), now.get(tool, (0, None, None))
        (calls_before, p50_before, p95_before), (calls_after, p50_after, p95_after) = b, a
        enough = calls_before >= MIN_LATENCY_CALLS and calls_after >= MIN_LATENCY_CALLS
        slower = (
            ratio > 0
            and enough
            and p95_before is not None
            and p95_after is not None
            and p95_after > ratio * max(p95_before, 1.0)  # below 1 ms, noise
        )
        rows.append({
            "tool": tool,
            "before": {"calls": calls_before, "p50": p50_before, "p95": p95_before},
            "after": {"calls": calls_after, "p50": p50_after, "p95": p95_after},
            "slower": slower,
        })  # fmt: skip
    return rows
