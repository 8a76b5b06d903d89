"""What a capture holds, as a review's header states it: the files, the time range, who talked to whom."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mcp_blackbox.analyzer.calls.classify import CaptureFacts, protocol_version
from mcp_blackbox.analyzer.model.records import Call
from mcp_blackbox.analyzer.outputs.analysis import Analysis


def server_name(name_and_version: str) -> str:
    """serverInfo as "name/version", or the name alone when the version is empty (not "holdout/")."""
    name, _, version = name_and_version.rpartition("/")
    return name_and_version if name and version.strip() else (name or name_and_version)


def captured_facts(analysis: Analysis, paths: list[str]) -> dict[str, Any]:
    """Who and what the header of a report or a summary names, most frequent first."""
    captured = Captured()
    for call in analysis.call_objects:
        captured.add(call, analysis.facts)
    return captured.facts(paths, analysis.facts)


class Captured:
    """``captured_facts`` gathered as the calls pass (a CallStream's calls are gone once read): counters of
    the few distinct names and the first and last times, never the calls.

    Counters rank ties in the order names were first seen, so calls fed in the order they started rank as
    the whole analysis's list did."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None
        self.agents: Counter[str | None] = Counter()
        self.senders: Counter[Any] = Counter()  # the recorder's PeerProcess (pid, name)
        self.infos: Counter[str] = Counter()
        self.versions: Counter[str | None] = Counter()

    def add(self, call: Call, facts: CaptureFacts) -> None:
        """One call; ``facts`` as they stand when it is final (its protocol version, as its record has it)."""
        t = call.request.t
        self.start = t if self.start is None else min(self.start, t)
        end = call.t_end or t
        self.end = end if self.end is None else max(self.end, end)
        self.agents[call.exchange.request_headers.get("user-agent")] += 1
        if call.client is not None and call.client.process is not None:
            self.senders[call.client.process] += 1
        if call.request.facts is not None and call.request.facts.client:
            self.infos[call.request.facts.client] += 1
        if call.request.kind == "request":
            self.versions[protocol_version(call, facts)] += 1

    def facts(self, paths: list[str], facts: CaptureFacts) -> dict[str, Any]:
        """The header's facts; ``facts``: the capture's, once every call is read (the servers it named)."""
        return {
            "captures": paths,
            "start": self.start,
            "end": self.end,
            "clients": [name for name, _ in self.infos.most_common(10)],  # the ten most frequent clientInfo
            # the ten local processes that sent the most calls, as the recorder measured them
            "processes": [f"pid {p.pid} ({p.name})" for p, _ in self.senders.most_common(10)],
            "user_agents": [a for a, _ in self.agents.most_common(10) if a],
            "servers": sorted({server_name(s) for s in facts.servers}),
            "versions": [v for v, _ in self.versions.most_common() if v],  # most frequent first
        }
