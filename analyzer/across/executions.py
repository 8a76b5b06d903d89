"""Did a tool run, and did a write run twice?

Whether a ``tools/call`` executed is read from its verdict: a result or an answer of the wrong shape
means the server ran it, but an isError saying the tool is unknown; a cut stream, a cancel, a 5xx other
than 503 or a request that got no response leaves it unknown (it may have run); a refusal (4xx, 429 among
them, a 503, a JSON-RPC error such as -32601 or -32602) means it did not run, and so do a gateway's 502
with no live upstream and a connection the proxy never made to the server.

DUPLICATE_EXECUTION is a fact about side effects, whether or not the second call was a retry: the same
client lineage executed, again, a tool not marked ``readOnlyHint`` or ``idempotentHint`` in
``tools/list``, with identical arguments, after an earlier execution that completed or may have, where
something failed on the way: the earlier execution's answer, or any call of the lineage since (an
application that starts its job over after a failure runs its writes again). A client that got the
write's result and sent it again with nothing failed in between did it on purpose (a user saving twice):
the call's evidence names the earlier run, and it is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from mcp_blackbox.analyzer.calls.classify import CaptureFacts, replayable
from mcp_blackbox.analyzer.model.contract import DuplicateRecord
from mcp_blackbox.analyzer.model.records import Call, Finding, Stage
from mcp_blackbox.analyzer.model.vocabulary import ANSWERED_WRONGLY, EFFECTS_UNKNOWN, Flag, Outcome, is_failure


class Execution(Enum):
    RAN = "ran"
    MAYBE = "may have run"
    NOT_RUN = "did not run"


def execution(call: Call) -> Execution:
    outcome = call.outcome
    if outcome is Outcome.TOOL_ERROR and unknown_tool(call):
        return Execution.NOT_RUN
    if outcome in (Outcome.TOOL_SUCCESS, Outcome.TOOL_ERROR) or outcome in ANSWERED_WRONGLY:
        return Execution.RAN
    if Flag.ANSWERED_AFTER_CANCEL in call.flags:
        return Execution.RAN
    if outcome is Outcome.NO_RESPONSE and _never_reached_the_server(call):
        return Execution.NOT_RUN
    status = call.exchange.status
    if outcome is Outcome.HTTP_ERROR and status is not None and status >= 500:
        return Execution.NOT_RUN if _not_processed(call, status) else Execution.MAYBE
    return Execution.MAYBE if outcome in EFFECTS_UNKNOWN else Execution.NOT_RUN


def unknown_tool(call: Call) -> bool:
    """isError saying the server has no such tool (the Python SDK: "Unknown tool: x"): nothing ran."""
    return "unknown tool" in (call.error_message or "").lower()


def _not_processed(call: Call, status: int) -> bool:
    """A 5xx that says the request went nowhere: a 503 (RFC 9110 15.6.4: the server is unable to handle
    it now; MCP servers and gateways send it before anything runs: overload, a rate limit, no live upstream),
    unless a gateway says its upstream reset after receiving it (Envoy: "reset before headers"); a
    gateway's 502 with no upstream to send it to."""
    if status == 503:
        return "reset" not in (call.exchange.error_text or "").lower()
    return _no_upstream(call, status)


def _no_upstream(call: Call, status: int) -> bool:
    """A gateway's own 502 with no upstream to send the request to (nginx: "no live upstreams"): it went
    nowhere."""
    return status == 502 and "no live upstream" in (call.exchange.error_text or "").lower()


def _never_reached_the_server(call: Call) -> bool:
    """mitmproxy could not connect upstream: the request never left the proxy."""
    error = (call.exchange.error or "").lower()
    return "connect" in error and ("failed" in error or "refused" in error)


def _ran_again(before: Call, call: Call, facts: CaptureFacts) -> str:
    how = "ran" if execution(before) is Execution.RAN else "may have run"
    if before.exchange.server != call.exchange.server:
        how += f" on {before.exchange.server}, a replica behind the same gateway,"
    marked = "it is not marked" if call.tool in facts.tools else "no tools/list of the capture marks it"
    return (
        f"{call.tool!r} with the same arguments {how} before in {before.call_id} "
        f"({before.outcome}, {call.request.t - before.request.t:.2f} s earlier) by the same client: "
        f"it executed again, and {marked} readOnlyHint or idempotentHint"
    )


def _ran_in_another_run(before: Call, call: Call) -> str:
    how = "ran" if execution(before) is Execution.RAN else "may have run"
    return (
        f"{call.tool!r} with the same arguments {how} before in {before.call_id} ({before.outcome}, "
        f"{call.request.t - before.request.t:.2f} s earlier) from the same software and address, in what may "
        "have been an earlier run of the application (no process was recorded to tell): not counted as run twice"
    )


def _on_purpose(before: Call, call: Call) -> str:
    return (
        f"{call.tool!r} with the same arguments ran before in {before.call_id} ({before.outcome}, "
        f"{call.request.t - before.request.t:.2f} s earlier) by the same client, which got its result, and "
        "nothing of that client failed in between: sent again on purpose, not counted as run twice"
    )


def _one_run(before: Call, call: Call) -> bool:
    """The two executions are the same run's, as far as the capture tells: a lineage's units that may be two
    runs of the application (ClientIdentity.run) ran it again only if one retry chain holds both, which is
    what the chain shows (its confidence says how sure)."""
    assert before.client is not None and call.client is not None
    if before.client.run == call.client.run:
        return True
    return before.link is not None and call.link is not None and before.link.group == call.link.group


@dataclass(frozen=True, slots=True)
class DuplicateExecution:
    tool: str
    arguments_digest: str
    lineage: str
    calls: tuple[Call, ...]  # every execution that ran or may have, in order

    def record(self) -> DuplicateRecord:
        return {
            "tool": self.tool,
            "arguments_digest": self.arguments_digest,
            "lineage": self.lineage,
            "calls": [c.call_id for c in self.calls],
            "executions": [execution(c).value for c in self.calls],
        }


class Duplicates:
    """Repeated executions found one call at a time, in the order they started.

    The last execution per (lineage, server, tool, arguments) is kept, and the whole run only once it
    repeats: a capture of 100,000 calls holds few repeats, and the index must not double the analysis'
    memory. ``settle(before)`` closes the runs whose last execution started before ``before``: a windowed
    analysis finds a write run twice within its window, the whole-capture analysis anywhere in it.
    """

    def __init__(self, facts: CaptureFacts) -> None:
        self.facts = facts
        self.last: dict[tuple[str, str, str, str], Call] = {}
        self.repeated: dict[tuple[str, str, str, str], list[Call]] = {}
        self.failed_at: dict[str, float] = {}  # lineage -> when its latest failed call started

    def check(self, call: Call, services: Mapping[str, str]) -> Finding | None:
        """DUPLICATE_EXECUTION, and why, when ``call`` ran a write that the same client ran before."""
        found = self._repeat(call, services)
        if call.client is not None and is_failure(call.outcome):
            self.failed_at[call.client.lineage] = call.request.t
        return found

    def _repeat(self, call: Call, services: Mapping[str, str]) -> Finding | None:
        facts = self.facts
        if call.method != "tools/call" or call.request.facts is None or call.client is None:
            return None
        if replayable(call.tool, facts) or execution(call) is Execution.NOT_RUN:
            return None
        server = services.get(call.exchange.server, call.exchange.server)
        key = (call.client.lineage, server, call.tool or "", call.request.facts.digest)
        before, found = self.last.get(key), None
        if before is not None and self._on_purpose(before, call.client.lineage):
            found = Finding(Stage.EXECUTIONS, _on_purpose(before, call))
        elif before is not None and _one_run(before, call):
            found = Finding(Stage.EXECUTIONS, _ran_again(before, call, facts), Flag.DUPLICATE_EXECUTION)
            self.repeated.setdefault(key, [before]).append(call)
        elif before is not None:
            found = Finding(Stage.EXECUTIONS, _ran_in_another_run(before, call))
        self.last[key] = call
        return found

    def _on_purpose(self, before: Call, lineage: str) -> bool:
        """The earlier execution ran and answered, and nothing of the lineage failed since it began."""
        succeeded = execution(before) is Execution.RAN and not is_failure(before.outcome)
        return succeeded and self.failed_at.get(lineage, float("-inf")) <= before.request.t

    def open_calls(self) -> set[str]:
        """The ids of the executions a later call may still repeat, or a run not yet settled holds."""
        held = {call.call_id for call in self.last.values()}
        return held.union(call.call_id for calls in self.repeated.values() for call in calls)

    def settle(self, before: float) -> list[DuplicateExecution]:
        """The runs that no later call can extend, in the order they were found."""
        for key in [k for k, call in self.last.items() if call.request.t < before]:
            del self.last[key]
        for lineage in [k for k, t in self.failed_at.items() if t < before]:
            del self.failed_at[lineage]  # older than every execution still kept: it cannot be between
        done = [key for key in self.repeated if key not in self.last]
        return [DuplicateExecution(key[2], key[3], key[0], tuple(self.repeated.pop(key))) for key in done]
