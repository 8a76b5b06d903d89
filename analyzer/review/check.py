"""The CI gate: which calls have an outcome, flag or failing layer named in ``--fail-on``, which of
those a test expects (``--allow``, and the 401 that starts MCP authorization), and whether the
evidence was complete and large enough to judge at all.

Names are case-insensitive. An outcome or a flag matches the calls that have it. A layer
stands for the layer that failed: it matches the calls whose outcome is in that layer and is
not a success, so ``--fail-on transport`` does not fail on every accepted notification.

The gate's verdict (``judge``) is one ``Gate``; ``check_formats`` renders it as text, JUnit XML,
GitHub workflow commands or JSON. Exit codes: 0 pass, 1 calls fail (or fewer calls than
``--min-calls``), 2 an input could not be read completely (unless ``--allow-partial``).
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp_blackbox.analyzer.across.spool import Spool
from mcp_blackbox.analyzer.calls.classify import protocol_version
from mcp_blackbox.analyzer.model.contract import CallRecord, RetryGroupRecord
from mcp_blackbox.analyzer.model.vocabulary import Flag, Layer, Outcome, RetryOrigin, is_failure
from mcp_blackbox.analyzer.outputs.call_record import call_record
from mcp_blackbox.analyzer.redaction.redactor import REDACTED
from mcp_blackbox.analyzer.wire.inputs import capture_names, expand_captures

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.across.call_stream import CallStream
    from mcp_blackbox.analyzer.model.records import Call
    from mcp_blackbox.analyzer.outputs.analysis import Analysis

OUTCOMES = tuple(Outcome)
LAYERS = tuple(Layer)
FLAGS = tuple(Flag)
DEFAULT_FAIL_ON = (*(o for o in Outcome if o.is_failure), Flag.UNSAFE_RETRY, Flag.DUPLICATE_EXECUTION)
SELECTOR_KEYS = ("tool", "method", "call", "capture")
AUTH_HANDSHAKE = "answered by authorization"
NEGOTIATION = "negotiation"
REASON_WIDTH = 200  # characters of a reason on a text line; the other formats carry it whole


def canonical_name(name: str) -> str:
    """The name as outcomes, flags and layers are spelled; ValueError naming the valid ones."""
    spelled = name.strip()
    if spelled.upper() in OUTCOMES or spelled.upper() in FLAGS:
        return spelled.upper()
    if spelled.lower() in LAYERS:
        return spelled.lower()
    raise ValueError(f"unknown name {spelled!r}\n{valid_names()}")


def valid_names(width: int = 80) -> str:
    def listed(title: str, names: Iterable[str]) -> str:
        return textwrap.fill(f"{title}: {', '.join(names)}", width, subsequent_indent="  ", break_on_hyphens=False)

    return "\n".join((listed("outcomes", OUTCOMES), listed("flags", FLAGS), listed("layers", LAYERS)))


def parse_fail_on(text: str) -> list[str]:
    """``"http_error, UNSAFE_RETRY"`` -> ``["HTTP_ERROR", "UNSAFE_RETRY"]``; ValueError if a name is unknown."""
    names = [canonical_name(part) for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError(f"names nothing\n{valid_names()}")
    return names


def failed_on(call: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """What makes the call match ``names``: its outcome (named, or its layer named and failed), then its
    named flags, in the call's order. Empty when it does not match."""
    wanted = {canonical_name(name) for name in names}
    hits = []
    if call["outcome"] in wanted or (call["layer"] in wanted and is_failure(call["outcome"])):
        hits.append(str(call["outcome"]))
    return hits + [str(flag) for flag in call["flags"] if flag in wanted]


def matching_calls(calls: Iterable[CallRecord], fail_on: Iterable[str]) -> list[CallRecord]:
    """The calls (export records) that have a named outcome or flag, or failed in a named layer."""
    names = [canonical_name(name) for name in fail_on]
    return [call for call in calls if failed_on(call, names)]


# ---------------------------------------------------------------- --allow


def allow_grammar() -> str:
    return textwrap.dedent(
        """\
        an allowance is [SELECTOR[+SELECTOR...]:]NAME, several separated by commas:
          SELECTOR is tool=NAME, method=METHOD, call=CALL_ID or capture=FILE (its
          file name or its path as given); every selector given must match;
          NAME is one outcome, flag or layer as in --fail-on; alone, it allows
          that name on every call"""
    )


@dataclass(frozen=True)
class Allowance:
    """One ``--allow`` spec: calls its selectors match may have ``name`` without failing the gate."""

    spec: str  # as written, with the name canonical: what the output says allowed a call
    name: str
    selectors: tuple[tuple[str, str], ...] = ()

    def selects(self, call: Mapping[str, Any], capture: str, path: str = "") -> bool:
        """``capture``: the call's capture as the outputs name it; ``path``: the file as it was read."""
        for key, value in self.selectors:
            if key == "capture":
                if value not in (call["source"], os.path.basename(call["source"]), capture, path):
                    return False
            elif str(call[{"call": "call_id"}.get(key, key)]) != value:
                return False
        return True

    def covers(self, call: Mapping[str, Any], hit: str, capture: str, path: str = "") -> bool:
        """Whether this allowance excuses ``hit`` (a name from ``failed_on``) on this call."""
        if not self.selects(call, capture, path):
            return False
        if hit == call["outcome"]:
            return self.name in (hit, call["layer"])
        return self.name == hit


def parse_allowance(spec: str) -> Allowance:
    """``"tool=nope:tool_error"`` -> an Allowance; ValueError saying what is wrong and what is valid."""
    where, colon, name = spec.strip().rpartition(":")
    try:
        canonical = canonical_name(name)
    except ValueError as e:
        raise ValueError(f"--allow {spec.strip()!r}: {e}") from None
    selectors: list[tuple[str, str]] = []
    if colon:
        for part in where.split("+"):
            key, eq, value = (piece.strip() for piece in part.partition("="))
            if not eq or key.lower() not in SELECTOR_KEYS or not value:
                raise ValueError(
                    f"--allow {spec.strip()!r}: {part.strip()!r} is no selector; "
                    f"selectors: {', '.join(k + '=' for k in SELECTOR_KEYS)}\n{allow_grammar()}"
                )
            if key.lower() in dict(selectors):
                raise ValueError(f"--allow {spec.strip()!r}: {key.lower()}= given twice\n{allow_grammar()}")
            selectors.append((key.lower(), value))
    written = "+".join(f"{k}={v}" for k, v in selectors)
    return Allowance(f"{written}:{canonical}" if written else canonical, canonical, tuple(selectors))


def parse_allow(text: str) -> list[Allowance]:
    """A comma-separated list of allowances; ValueError if any is malformed or names nothing."""
    allowances = [parse_allowance(part) for part in text.split(",") if part.strip()]
    if not allowances:
        raise ValueError(f"--allow names nothing\n{allow_grammar()}")
    return allowances


# ---------------------------------------------------------------- the auth handshake


def answered_by_authorization(call: Mapping[str, Any], group: Mapping[str, Any] | None) -> bool:
    """A 401 that MCP authorization answered: the normal start of MCP OAuth, not a failure for the gate.

    ``call`` is an export record, ``group`` the record of its retry group (or None). True when the call
    failed with HTTP 401, its group is an ``auth-retry`` chain (its first link: credentials added or
    changed after the refusal), the call is not the chain's last attempt, and the chain ended in no
    failure. A 401 the client never got past, or a chain that failed in the end, stays a failure.
    """
    return (
        group is not None
        and call.get("http_status") == 401
        and is_failure(call["outcome"])
        and call.get("retry_group") == group["retry_group"]
        and group["origin"] == RetryOrigin.AUTH_RETRY
        and call["call_id"] in group["members"][:-1]
        and not is_failure(group["final_outcome"])
    )


def negotiated(call: Mapping[str, Any], group: Mapping[str, Any] | None) -> bool:
    """A refused probe that the client negotiated past (a ``server/discover`` refused, then ``initialize``
    that worked): the chain's origin retries no failure (vocabulary ``RetryOrigin.retries_a_failure``), the
    call is not its last attempt, and the chain ended in no failure. A probe nothing came after still fails.
    """
    return (
        group is not None
        and is_failure(call["outcome"])
        and call.get("retry_group") == group["retry_group"]
        and not RetryOrigin(group["origin"]).retries_a_failure
        and call["call_id"] in group["members"][:-1]
        and not is_failure(group["final_outcome"])
    )


def expected_by_protocol(call: Mapping[str, Any], group: Mapping[str, Any] | None) -> str | None:
    """Why a failing call is how the protocol begins (the gate allows it unless --strict), or None."""
    if group is None:
        return None
    ended = f"{group['retry_group']} {group['origin']} ended {group['final_outcome']}"
    if answered_by_authorization(call, group):
        return f"{AUTH_HANDSHAKE}: {ended}"
    if negotiated(call, group):
        return f"{NEGOTIATION}: {ended}"
    return None


# ---------------------------------------------------------------- the verdict


_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Captured text safe for a terminal or a CI log: control characters (an ANSI escape that would colour
    or hide the log, a NUL) shown as ``\\xNN``; newlines and tabs kept."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def verdict_reason(call: Mapping[str, Any]) -> str:
    """Why the call has its verdict (the export's ``reason``), redacted like the export's, printable."""
    return printable(REDACTED.text(str(call["reason"])))


@dataclass
class Judged:
    """A call the outputs list: one that fails, or one that would have failed and was allowed. Its whole
    export record is kept; a call that does neither is only counted (or kept as a ``Passed``, for JUnit)."""

    call: CallRecord
    capture: str  # the capture's short name (short_sources)
    server: str  # host:port the call went to, "" when unknown
    reason: str  # verdict_reason, redacted
    failed_on: list[str]  # what still fails it after the allowances (empty: it does not fail)
    allowed_by: list[str]  # the allowances (or AUTH_HANDSHAKE ...) that excused what would have failed it

    @property
    def fails(self) -> bool:
        return bool(self.failed_on)

    @property
    def allowed(self) -> bool:
        return not self.failed_on and bool(self.allowed_by)

    @property
    def name(self) -> str:
        return testcase_name(self.call)

    @property
    def classname(self) -> str:
        return testcase_classname(self.call, self.server)

    @property
    def duration_ms(self) -> float | None:
        return _duration_ms(self.call)

    def evidence(self) -> list[str]:
        return [printable(REDACTED.text(str(line))) for line in self.call.get("evidence") or []]


@dataclass(frozen=True, slots=True)
class Passed:
    """A call that neither fails nor was allowed, as much of it as its JUnit testcase shows: the other
    formats only count such calls, so a long capture's passing calls cost nothing there, and this in JUnit."""

    capture: str
    name: str  # testcase_name
    classname: str  # testcase_classname
    duration_ms: float | None

    @property
    def fails(self) -> bool:
        return False

    @property
    def allowed(self) -> bool:
        return False


def testcase_name(call: Mapping[str, Any]) -> str:
    """A call's JUnit testcase name: its id, method and tool."""
    return " ".join(str(part) for part in (call["call_id"], call["method"] or "(response)", call["tool"]) if part)


def testcase_classname(call: Mapping[str, Any], server: str) -> str:
    """A call's JUnit testcase class: host:port/tool (or method), as test reports group them."""
    what = call["tool"] or call["method"] or "(response)"
    return f"{server}/{what}" if server else str(what)


def _duration_ms(call: Mapping[str, Any]) -> float | None:
    duration = call.get("duration_ms")
    return duration if isinstance(duration, int | float) else None


@dataclass
class Gate:
    """The gate's verdict on an analysis: the calls it lists in full, and how many it judged in all."""

    failing: Sequence[Judged]  # as judge() lists them: on disk (across/spool.py), read back in order
    allowed: Sequence[Judged]
    calls: int  # every call judged, listed or not
    captures: list[str]  # as given on the command line
    flows_read: int
    read_problems: list[dict[str, Any]]
    min_calls: int = 1
    allow_partial: bool = False
    unused_allowances: list[str] = field(default_factory=list)
    cut: str | None = None  # --since/--until, as TimeRange.describe says it: the verdict line names it
    # Every call in the order judged, for JUnit's testcase per call (judge(..., testcases=True)); else None.
    testcases: Sequence[Judged | Passed] | None = None

    @property
    def too_few_calls(self) -> bool:
        return self.calls < self.min_calls

    @property
    def incomplete(self) -> bool:
        """An input was not read completely and --allow-partial was not given, or nothing could be read."""
        return bool(self.read_problems) and (not self.allow_partial or self.flows_read == 0)

    @property
    def exit_code(self) -> int:
        if self.incomplete:
            return 2
        return 1 if self.failing or self.too_few_calls else 0

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def capture_name(self, source: str) -> str:
        """The capture as the outputs name it (``short_sources``)."""
        return short_sources(self.captures).get(source, source)

    def counts(self) -> str:
        """``14 flows, 1 capture[, 1 not fully read]``."""
        captures = len(self.captures)
        counts = f"{self.flows_read} flows, {captures} capture{'s' if captures != 1 else ''}"
        if self.read_problems:
            counts += f", {len(self.read_problems)} not fully read"
        return counts

    def summary(self) -> str:
        """The last line: OK, FAIL or ERROR, and the counts; then the range judged, with --since/--until."""
        verdict = self._verdict()
        return verdict if self.cut is None else f"{verdict}; {self.cut}"

    def _verdict(self) -> str:
        matched = len(self.failing)
        allowed = f", {len(self.allowed)} allowed" if self.allowed else ""
        if self.incomplete and self.flows_read == 0:
            return f"ERROR: no capture could be read ({self.counts()})"
        if self.incomplete:
            head = "ERROR: not every capture was read completely (--allow-partial judges what was read);"
            return f"{head} {matched} of {self.calls} calls match{allowed} ({self.counts()})"
        if matched:
            return f"FAIL: {matched} of {self.calls} calls match{allowed} ({self.counts()})"
        if self.too_few_calls:
            few = f"fewer than --min-calls {self.min_calls}"
            return f"FAIL: none of {self.calls} calls match, but that is {few} ({self.counts()})"
        return f"OK: none of {self.calls} calls match{allowed} ({self.counts()})"

    def too_few_line(self) -> str:
        return (
            f"too few calls: {self.calls} analyzed, --min-calls wants {self.min_calls}: no evidence is not success "
            "(was the client pointed at the recorder?)"
        )


def judge(
    analysis: Analysis | CallStream,
    captures: Iterable[str],
    fail_on: Iterable[str] = DEFAULT_FAIL_ON,
    allowances: Iterable[Allowance] = (),
    *,
    min_calls: int = 1,
    allow_partial: bool = False,
    strict: bool = False,
    testcases: bool = False,
) -> Gate:
    """Every call judged, in the order the analysis makes it final: a ``CallStream`` is read through here,
    each call judged as it comes and kept only if the outputs list it (``Judged``). ``testcases``: keep a
    ``Passed`` of every other call too, in order, for JUnit's testcase per call."""
    judge_call = _CallJudge(analysis, list(captures), fail_on, list(allowances), strict)
    # Written to disk as they come (each Judged holds the call's whole record): the gate's memory does not
    # grow with the failures of a long recording.
    failing: Spool[Judged] = Spool()
    allowed: Spool[Judged] = Spool()
    every: Spool[Judged | Passed] | None = Spool() if testcases else None
    calls = 0
    for call in analysis.final_calls():
        calls += 1
        judged = judge_call(call)
        if isinstance(judged, Judged):
            (failing if judged.fails else allowed).append(judged)
        if every is not None:
            every.append(judged)
    return Gate(
        failing=failing,
        allowed=allowed,
        calls=calls,
        captures=judge_call.captures,
        flows_read=analysis.flows_read,
        read_problems=list(analysis.read_problems),
        min_calls=min_calls,
        allow_partial=allow_partial,
        unused_allowances=[a.spec for a in judge_call.allowances if a.spec not in judge_call.used],
        cut=None if analysis.time_range is None else analysis.time_range.describe(),
        testcases=every,
    )


class _CallJudge:
    """One call at a time, as the analysis makes it final: what fails it, what excuses it."""

    def __init__(
        self,
        analysis: Analysis | CallStream,
        captures: list[str],
        fail_on: Iterable[str],
        allowances: list[Allowance],
        strict: bool,
    ) -> None:
        self.facts = analysis.facts
        self.captures = captures
        self.names = [canonical_name(name) for name in fail_on]
        self.allowances = allowances
        self.strict = strict
        self.used: set[str] = set()  # the specs of the allowances that excused something
        # The export's "source" is the file's name (analyzer/wire/inputs.py capture_names): the gate reads the
        # path. Every file a call can come from is named before the first call, so no call's name changes later.
        self.short = short_sources([*captures, *expand_captures(captures)])
        self.groups = _SettledGroups(analysis)
        self.shared: dict[str, str] = {}  # one string per capture and per testcase class, however many calls

    def __call__(self, call: Call) -> Judged | Passed:
        record = call_record(call, protocol_version(call, self.facts))
        path = call.exchange.source
        capture = self._capture_of(path)
        server = _host_port(call.exchange.server or "")
        group = None if self.strict else self.groups.of(record)  # every call: a group goes with its last attempt
        hits = failed_on(record, self.names)
        if not hits:
            classname = testcase_classname(record, server)
            classname = self.shared.setdefault(classname, classname)
            return Passed(capture, testcase_name(record), classname, _duration_ms(record))
        protocol = None if self.strict else expected_by_protocol(record, group)
        remaining, allowed_by = _excuse(record, hits, protocol, self.allowances, (capture, path), self.used)
        return Judged(record, capture, server, verdict_reason(record), remaining, allowed_by)

    def _capture_of(self, path: str) -> str:
        if path not in self.short:  # not one of the files the captures name: named among them all
            self.short = short_sources([*self.short, path])
        name = self.short[path]
        return self.shared.setdefault(name, name)


class _SettledGroups:
    """The records of the retry groups that can excuse a failing attempt (expected_by_protocol), looked up
    as the analysis settles them. A stream yields a call only once its retry group is settled (the groups
    settle before the calls they hold in ``CallStream._settle``), so a call's group is among those settled
    before it is judged."""

    def __init__(self, analysis: Analysis | CallStream) -> None:
        self.settled = analysis.retry_groups  # grows as the stream is read
        self.seen = 0
        # Each kept with the attempts still to be judged: it goes with the last of them.
        self.records: dict[str, tuple[RetryGroupRecord, set[str]]] = {}

    def of(self, call: CallRecord) -> RetryGroupRecord | None:
        if not call["retry_group"]:
            return None
        for group in self.settled[self.seen :]:
            record = group.record()
            # Only a chain that ended in no failure excuses an attempt (answered_by_authorization, negotiated):
            # the others need not be kept.
            if not is_failure(record["final_outcome"]):
                self.records[record["retry_group"]] = (record, set(record["members"]))
        self.seen = len(self.settled)
        kept = self.records.get(call["retry_group"])
        if kept is None:
            return None
        record, waiting = kept
        waiting.discard(call["call_id"])
        if not waiting:
            del self.records[call["retry_group"]]
        return record


def _host_port(server: str) -> str:
    """host:port of a server URL ("" when unknown); a server with no scheme as it is."""
    return server.partition("://")[2] or server


def _excuse(
    call: CallRecord,
    hits: list[str],
    protocol: str | None,
    allowances: list[Allowance],
    capture: tuple[str, str],  # its name in the outputs, its file as read
    used: set[str],
) -> tuple[list[str], list[str]]:
    """Which of ``hits`` still fail the call, and what excused the others: for its outcome, the protocol's own
    start (``protocol``, from expected_by_protocol), else the allowances that cover the hit, each named once
    (their specs are added to ``used``)."""
    remaining: list[str] = []
    allowed_by: list[str] = []
    for hit in hits:
        if protocol is not None and hit == call["outcome"]:
            allowed_by.append(protocol)
            continue
        by = [a.spec for a in allowances if a.covers(call, hit, *capture)]
        if by:
            used.update(by)
            allowed_by.extend(f"--allow {spec}" for spec in by if f"--allow {spec}" not in allowed_by)
        else:
            remaining.append(hit)
    return remaining, allowed_by


# ---------------------------------------------------------------- text


def call_head(call: Mapping[str, Any], source: str) -> str:
    """Call id, method, tool, JSON-RPC id, outcome, flags, capture."""
    parts = [call["call_id"], call["method"] or "(response)"]
    if call["tool"]:
        parts.append(call["tool"])
    parts += [f"id={call['jsonrpc_id']}", call["outcome"]]
    if call["flags"]:
        parts.append(f"[{','.join(call['flags'])}]")
    parts.append(source)
    return " ".join(str(part) for part in parts)


def shortened(text: str, width: int = REASON_WIDTH) -> str:
    """One line of at most ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def call_line(judged: Judged) -> str:
    """One line per call, so that grep finds the whole of it: the head, then ``— reason``.

    An allowed call's line starts with ``allowed`` and ends with what allowed it, in parentheses.
    """
    head = call_head(judged.call, judged.capture)
    if judged.fails:
        return f"{head} — {shortened(judged.reason)}"
    return f"allowed {head} — {shortened(judged.reason)} ({'; '.join(judged.allowed_by)})"


def short_sources(sources: Iterable[str]) -> dict[str, str]:
    """Each capture by its file name, or by as few of its directories as tell two of one name apart
    (analyzer/wire/inputs.py ``capture_names``: every output names captures so)."""
    return capture_names(sources)
