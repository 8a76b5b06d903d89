"""What a capture holds, as a review's header states it: the files, the time range, who talked to whom."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mcp_blackbox.analyzer.calls.classify import protocol_version
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
    infos = Counter(c.request.facts.client for c in calls if c.request.facts is not None and c.request.facts.client)
    agents = Counter(c.exchange.request_headers.get("user-agent") for c in calls)
    versions = Counter(protocol_version(c, analysis.facts) for c in calls if c.request.kind == "request")
    return {
        "captures": paths,
        "start": start,
        "end": max(ends, default=start),
        "clients": [name for name, _ in infos.most_common(10)],  # clientInfo name/version
        "user_agents": [a for a, _ in agents.most_common(10) if a],
        "servers": sorted({server_name(s) for s in analysis.facts.servers}),
        "versions": [v for v, _ in versions.most_common() if v],
    }
