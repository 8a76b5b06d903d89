"""Which calls a reader must be able to see on their own: one predicate for the report's rows and its
details, the terminal summary's calls to look at, and the Markdown summary."""

from __future__ import annotations

from collections.abc import Collection

from mcp_blackbox.analyzer.model.vocabulary import is_failure


def noteworthy(outcome: str | None, flags: Collection[str], retry_group: str | None, ran_again: bool) -> bool:
    """A failure, a flagged call, an attempt of a retry chain, or a run of a write executed more than once
    (``ran_again``: its call id is in a duplicate execution). Every other call went as planned: a huge
    capture's report may fold it into an aggregate, and no summary lists it."""
    return bool(is_failure(outcome) or flags or retry_group or ran_again)
