"""Did it run more than once? One answer, with every attempt that it counts.

Two stages see a write repeated. ``executions.Duplicates`` finds a client that ran a write again with the
same arguments (DUPLICATE_EXECUTION); ``retries`` finds a chain whose attempt may have run (its effects are
unknown) and was sent again to a server that took it (``RetryGroup.may_have_run_twice``). Both are kept as
they were (their flags and records are the export's); this module joins them into one list, so that
a page or a summary gives one count for one question:

- an entry holds every attempt of the runs it counts, and every attempt of each retry chain that holds one
  of them, in the order they started, each with how it ended and its chain: a chain and the count that
  includes it list the same attempts;
- ``certain``: two or more attempts ran (their results were seen); ``possible``: fewer, but an attempt whose
  effects are unknown was followed by another that reached the server.

Only writes count: a tool the capture's ``tools/list`` marks readOnlyHint or idempotentHint changes nothing
when it runs again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from mcp_blackbox.analyzer.across.executions import DuplicateExecution, Execution, execution
from mcp_blackbox.analyzer.across.retries import RetryGroup
from mcp_blackbox.analyzer.calls.classify import CaptureFacts, replayable
from mcp_blackbox.analyzer.model.contract import AttemptRecord, RanMoreThanOnceRecord
from mcp_blackbox.analyzer.model.records import Call
from mcp_blackbox.analyzer.model.vocabulary import Certainty, Outcome


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt as the answer lists it; its call may be gone (a windowed analysis forgets calls)."""

    call_id: str
    t: float
    outcome: Outcome | None
    http_status: int | None
    ran: Execution
    retry_group: str | None

    @classmethod
    def of(cls, call: Call) -> Attempt:
        group = call.link.group if call.link is not None else None
        return cls(call.call_id, call.request.t, call.outcome, call.exchange.status, execution(call), group)

    def record(self) -> AttemptRecord:
        return {
            "call_id": self.call_id,
            "outcome": self.outcome,
            "http_status": self.http_status,
            "ran": self.ran.value,
            "retry_group": self.retry_group,
        }


@dataclass(frozen=True, slots=True)
class RanMoreThanOnce:
    tool: str
    arguments_digest: str
    lineage: str
    attempts: tuple[Attempt, ...]  # in the order they started

    @property
    def runs(self) -> int:
        """The attempts that ran or may have."""
        return sum(1 for a in self.attempts if a.ran is not Execution.NOT_RUN)

    @property
    def certainty(self) -> Certainty:
        ran = sum(1 for a in self.attempts if a.ran is Execution.RAN)
        return Certainty.CERTAIN if ran >= 2 else Certainty.POSSIBLE

    @property
    def call_ids(self) -> frozenset[str]:
        return frozenset(a.call_id for a in self.attempts)

    def record(self) -> RanMoreThanOnceRecord:
        return {
            "tool": self.tool,
            "arguments_digest": self.arguments_digest,
            "lineage": self.lineage,
            "certainty": self.certainty,
            "runs": self.runs,
            "attempts": [a.record() for a in self.attempts],
        }


def _attempts(calls: Iterable[Call]) -> tuple[Attempt, ...]:
    return tuple(Attempt.of(c) for c in calls)


def _merged(*parts: Iterable[Attempt]) -> tuple[Attempt, ...]:
    """The attempts of every part, each once, in the order they started."""
    by_id = {a.call_id: a for part in parts for a in part}
    return tuple(sorted(by_id.values(), key=lambda a: (a.t, a.call_id)))


class RepeatedRuns:
    """The writes that ran more than once, from the settled retry chains and repeated executions.

    What is kept is small: the attempts (ids, times, endings) of the retry chains of writes, and the
    entries found. A chain is kept whole while an execution found later may still name one of its attempts
    (``forget``): a recording's length does not make it grow.
    """

    def __init__(self, facts: CaptureFacts) -> None:
        self.facts = facts
        self._chains: dict[str, tuple[Attempt, ...]] = {}  # a write's retry chain -> its attempts
        self._from_chains: list[RanMoreThanOnce] = []
        self._from_executions: list[RanMoreThanOnce] = []

    def chain_settled(self, group: RetryGroup) -> None:
        first = group.members[0]
        if first.method != "tools/call" or replayable(first.tool, self.facts):
            return
        attempts = _attempts(group.members)
        self._chains[group.group_id] = attempts
        if group.may_have_run_twice:
            self._from_chains.append(_entry(first, attempts))

    def executions_settled(self, found: DuplicateExecution) -> None:
        """An entry, with the chains of its attempts known now (``entries`` adds any settled since)."""
        attempts = _attempts(found.calls)
        entry = RanMoreThanOnce(found.tool, found.arguments_digest, found.lineage, attempts)
        self._from_executions.append(self._with_chains(entry))

    def forget(self, before: float, still_open: Collection[str]) -> None:
        """The chains no execution can name any more: each attempt started before ``before`` (older than
        every execution ``Duplicates`` still holds) and none of them in a run it holds (``still_open``)."""
        for group, attempts in list(self._chains.items()):
            if attempts[-1].t < before and not any(a.call_id in still_open for a in attempts):
                del self._chains[group]

    def entries(self) -> list[RanMoreThanOnce]:
        """Every entry, in the order its first attempt started: each repeated execution with the whole of
        the chains its attempts are in, then each chain that no execution covers."""
        entries = [self._with_chains(e) for e in self._from_executions]
        covered = frozenset().union(*(e.call_ids for e in entries))
        entries += [e for e in self._from_chains if not e.call_ids & covered]
        return sorted(entries, key=lambda e: (e.attempts[0].t, e.attempts[0].call_id))

    def _with_chains(self, entry: RanMoreThanOnce) -> RanMoreThanOnce:
        chains = {a.retry_group for a in entry.attempts if a.retry_group is not None}
        attempts = _merged(entry.attempts, *(self._chains.get(g, ()) for g in sorted(chains)))
        return RanMoreThanOnce(entry.tool, entry.arguments_digest, entry.lineage, attempts)


def _entry(first: Call, attempts: tuple[Attempt, ...]) -> RanMoreThanOnce:
    digest = first.request.facts.digest if first.request.facts is not None else ""
    lineage = first.client.lineage if first.client is not None else ""
    return RanMoreThanOnce(first.tool or "", digest, lineage, attempts)
