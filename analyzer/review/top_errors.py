"""The top errors: failed calls grouped by what went wrong, once for every output that lists them (the report's
"Top errors", the Markdown summary's).

Two calls fail with the same error when their outcome is the same and their reasons (``call_record.reason``)
read the same once the figures that differ from one call to the next are set aside: a duration ("after 58 ms"
and "after 54 ms"), an id (a UUID, a long hex or decimal number), a port, an IP address, a timestamp. What
names the error stays as it is: an HTTP status ("HTTP 503"), a JSON-RPC error code ("-32602"), a word with
digits in it (a tool called ``v2_write``), a small number in a server's text ("injected 503").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# The placeholders are words in angle brackets: what a reader sees where figures were set aside.
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "<ip>"),
    (re.compile(r"(?<=[\w\]>]):\d{2,5}\b"), ":<port>"),
    (re.compile(r"\bport \d{2,5}\b", re.IGNORECASE), "port <port>"),
    (
        re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?=\s?(?:ms|µs|us|ns|s|sec|secs|seconds?|min|mins|minutes?|h|hours?)\b)"),
        "<n>",
    ),
    (re.compile(r"(?<![\w.-])\d{4,}(?![\w.])"), "<n>"),  # a long number: an id, a byte count, a sequence
]
# "HTTP 503" and "JSON-RPC error -32602" name the error: kept before the rules run on the rest.
_NAMED = re.compile(r"^(?:HTTP \d{3}|JSON-RPC error -?\d+)")


def error_key(reason: str) -> str:
    """``reason`` with the figures that differ between calls of one error set aside (the module's docstring)."""
    named = _NAMED.match(reason)
    head, rest = (named.group(), reason[named.end() :]) if named else ("", reason)
    for pattern, placeholder in _RULES:
        rest = pattern.sub(placeholder, rest)
    return head + rest


@dataclass
class TopError:
    """One error: its outcome, its reason with the figures set aside, how many calls, the first call, and, when
    the tally keeps them, every call in order."""

    outcome: str
    error: str
    first: str
    count: int = 0
    calls: list[str] = field(default_factory=list)  # empty unless the tally keeps them (the report's filter)


class ErrorTally:
    """The errors of failed calls fed one at a time, in the order they started: grouped by outcome and reason
    (``error_key``), ranked most calls first, then the error that came first. Each keeps a count and its first
    call, and every call's id only with ``keep_calls`` (the report filters by them; the Markdown summary needs
    a size that does not grow with the capture)."""

    def __init__(self, *, keep_calls: bool = False) -> None:
        self.keep_calls = keep_calls
        self._found: dict[tuple[str, str], TopError] = {}

    def add(self, call_id: str, outcome: str, reason: str) -> None:
        key = (outcome, error_key(reason))
        error = self._found.get(key)
        if error is None:
            error = self._found[key] = TopError(outcome, key[1], call_id)
        error.count += 1
        if self.keep_calls:
            error.calls.append(call_id)

    def ranked(self) -> list[TopError]:
        return sorted(self._found.values(), key=lambda e: -e.count)  # stable: ties keep the order they came in


def top_errors(failed: Iterable[tuple[str, str, str]]) -> list[TopError]:
    """The errors of the ``failed`` calls, given as (call id, outcome, reason) in the order they started, each
    with its calls (``ErrorTally.ranked``)."""
    tally = ErrorTally(keep_calls=True)
    for call_id, outcome, reason in failed:
        tally.add(call_id, outcome, reason)
    return tally.ranked()
