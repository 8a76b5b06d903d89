"""What every findings rule is: fed each final call, asked at the end what it found.

A rule keeps only what its pattern needs (counts, a few call ids, the last times per server), so that the
findings of a long recording cost no more memory than its busiest minute: the stream feeds calls one at a
time and forgets them (analyzer/across/call_stream.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_blackbox.analyzer.calls.classify import CaptureFacts
from mcp_blackbox.analyzer.model.contract import FindingRecord
from mcp_blackbox.analyzer.model.records import Call

# A finding names at most this many calls; its evidence gives the full count.
CALLS_NAMED = 50


@dataclass(frozen=True, slots=True)
class Context:
    """What a rule may read besides the calls, once the whole capture has been read."""

    facts: CaptureFacts
    auth_steps: Sequence[dict[str, Any]]
    stream_events: Sequence[dict[str, Any]]
    notes: Sequence[str] = field(default_factory=tuple)
    # Each HTTP+SSE (2024-11-05) stream's `endpoint` event (patterns/clients.py, endpoint_event): such a stream
    # carries no call of its own when no request follows it.
    endpoints: Sequence[dict[str, Any]] = field(default_factory=tuple)


def duration_text(seconds: float) -> str:
    """A duration as a person reads it, in every finding: ms under a second, then seconds with fewer decimals
    as it grows."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    return f"{seconds:.1f} s" if seconds < 100 else f"{seconds:.0f} s"


def finding_record(
    rule: str, title: str, summary: str, evidence: list[str], calls: Iterable[str], start: float, end: float
) -> FindingRecord:
    """A finding as every rule returns it: its calls each once, in the order given, the first CALLS_NAMED."""
    return {
        "rule": rule,
        "title": title,
        "summary": summary,
        "evidence": evidence,
        "calls": list(dict.fromkeys(calls))[:CALLS_NAMED],
        "start": start,
        "end": end,
    }


class Rule(Protocol):
    """One named pattern. ``add`` sees every final call in the order the stream settles them (about the
    order they started); ``finish`` returns what was found, each record with the rule's ``name``."""

    name: str

    def add(self, call: Call) -> None: ...

    def finish(self, context: Context) -> list[FindingRecord]: ...
