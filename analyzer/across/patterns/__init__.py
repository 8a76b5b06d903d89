"""Findings: named patterns across calls, each with its evidence (docs/ARCHITECTURE.md, "Findings").

One table, ``RULES``, lists every rule; each rule is a small class in a module of this package
(``engine.Rule``). ``Patterns`` runs them all over a stream of calls.
"""

from __future__ import annotations

from mcp_blackbox.analyzer.across.patterns.clients import (
    AuthRefreshLoop,
    LostSessionAffinity,
    StdioServerCrash,
    UnusableSseEndpoint,
    endpoint_event,
)
from mcp_blackbox.analyzer.across.patterns.engine import Context, Rule
from mcp_blackbox.analyzer.across.patterns.gateways import (
    DeadBackendIsError,
    GatewayTimeout,
    RateLimited,
    RetryStorm,
    UpstreamMarkedDown,
)
from mcp_blackbox.analyzer.calls.classify import CaptureFacts
from mcp_blackbox.analyzer.model.contract import FindingRecord
from mcp_blackbox.analyzer.model.records import Call

# The rule table: each entry makes a fresh rule for one analysis. Order is the order of equal-start findings.
RULES: tuple[type[Rule], ...] = (
    UpstreamMarkedDown,
    GatewayTimeout,
    RateLimited,
    RetryStorm,
    DeadBackendIsError,
    AuthRefreshLoop,
    UnusableSseEndpoint,
    LostSessionAffinity,
    StdioServerCrash,
)


class Patterns:
    """Every rule of ``RULES``, fed the same calls."""

    def __init__(self, facts: CaptureFacts) -> None:
        self.facts = facts
        self.rules = [rule() for rule in RULES]

    def add(self, call: Call) -> None:
        for rule in self.rules:
            rule.add(call)

    def finish(self, context: Context) -> list[FindingRecord]:
        """The findings of every rule, in the order their pattern began."""
        found = [record for rule in self.rules for record in rule.finish(context)]
        return sorted(found, key=lambda record: record["start"])


__all__ = ["RULES", "Context", "Patterns", "Rule", "endpoint_event"]
