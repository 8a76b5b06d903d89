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
    calls = analysis.call_objects
    start = min((c.request.t for c in calls), default=None)
    ends = [c.t_end or c.request.t for c in calls]
    agents = Counter(c.exchange.request_headers.get("user-agent") for c in calls)
    return {
        "captures": paths,
        "start": start,
        "end": max(ends, default=start),
        "clients": _client_infos(calls),
        "processes": client_processes(calls),
        "user_agents": [a for a, _ in agents.most_common(10) if a],
        "servers": sorted({server_name(s) for s in analysis.facts.servers}),
        "versions": _protocol_versions(calls, analysis.facts),
    }


def client_processes(calls: list[Call]) -> list[str]:
    """The ten local processes that sent the most calls, as the recorder measured them: "pid N (name)"."""
    senders = Counter(c.client.process for c in calls if c.client is not None and c.client.process is not None)
    return [f"pid {p.pid} ({p.name})" for p, _ in senders.most_common(10)]


def _client_infos(calls: list[Call]) -> list[str]:
    """The ten most frequent clientInfo (name/version) the requests gave."""
    infos = Counter(c.request.facts.client for c in calls if c.request.facts is not None and c.request.facts.client)
    return [name for name, _ in infos.most_common(10)]


def _protocol_versions(calls: list[Call], facts: CaptureFacts) -> list[str]:
    """The protocol versions the requests were made under, most frequent first."""
    versions = Counter(protocol_version(c, facts) for c in calls if c.request.kind == "request")
    return [v for v, _ in versions.most_common() if v]
