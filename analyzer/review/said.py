"""How the summaries say the cross-call answers, in words, once: a write that ran more than once, each of
its attempts, and a finding. ``escape`` makes captured text safe for the output (Markdown escapes it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mcp_blackbox.analyzer.model.contract import AttemptRecord, FindingRecord, RanMoreThanOnceRecord

Escape = Callable[[str], str]


def plain(value: str) -> str:
    return value


def ran_twice_counts(counts: Mapping[str, int]) -> str:
    """``1 certain, 2 possible``."""
    return ", ".join(f"{count} {certainty}" for certainty, count in counts.items())


def ran_twice_head(entry: RanMoreThanOnceRecord, escape: Escape = plain) -> str:
    """``write_record (arguments 9c0d48889f, client k1): certain, 2 runs in 3 attempts``."""
    attempts = len(entry["attempts"])
    return (
        f"{escape(entry['tool'])} (arguments {entry['arguments_digest'][:10]}, client {escape(entry['lineage'])}): "
        f"{entry['certainty']}, {entry['runs']} runs in {attempts} attempts"
    )


def attempt_said(attempt: AttemptRecord) -> str:
    """``c895bf01b4cfe HTTP_ERROR (HTTP 500): may have run; retry chain r1``."""
    status = f" (HTTP {attempt['http_status']})" if attempt["http_status"] is not None else ""
    chain = f"; retry chain {attempt['retry_group']}" if attempt["retry_group"] else "; not in a retry chain"
    return f"{attempt['call_id']} {attempt['outcome'] or 'no verdict'}{status}: {attempt['ran']}{chain}"


def finding_head(finding: FindingRecord, escape: Escape = plain) -> str:
    """``title: summary``."""
    return f"{escape(finding['title'])}: {escape(finding['summary'])}"
