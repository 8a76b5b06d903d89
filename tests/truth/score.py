"""Score the analyzer against the labelled truth corpus recorded by tests/truth/record_corpus.py.

    .venv/bin/python tests/truth/score.py DIR        (every DIR/*.flows, and each DIR/*/ as one capture)
    make truth

Each capture is scored twice: as recorded, and with the identity the recorder measured removed (each
flow's client_process and earlier_connections, each stdio header's client_process), which is what a
plain mitmdump file, a HAR or an older capture gives: the analyzer must stay right on both.

The truth comes from the captures themselves: each tools/call request body carries its label in
params._meta.truth (tests/truth/labels.py), read here with mitmproxy's FlowReader. The analyzer's
calls are matched to labels by their first exchange (the request's flow id). A copy that a gateway or
bridge made carries the client's label; its own label comes from <capture>.relabel.json (tests/truth/harness.py).
Figures, over every
labelled tools/call:

- retry linking, as pairs (earlier attempt, later attempt): true pairs are each retry and the
  attempt before it; predicted pairs are consecutive members of each analyzer retry group;
- origin accuracy over correctly linked retries whose label names an origin;
- "high" links: of the pairs linked with confidence high, how many are true (the goal: >= 95 %);
- duplicate execution: calls flagged DUPLICATE_EXECUTION against calls labelled as re-executing.

A directory in DIR is one recording of several files (tests/truth/family_process.py: the stdio captures of
a client that restarted its server); its stdio calls are matched by capture file and JSON-RPC id, read
from the stdin lines the wrapper recorded.

The held-out family (HELD_OUT: tests/truth/family_holdout.py, written without tuning the analyzer to it)
is also scored on its own, both ways, in a block of its own after the whole corpus's.

Exit status: 0 if every figure of the whole corpus is >= 0.95 and has cases, 1 if not (the held-out block
does not change it), 2 if the corpus and the analysis do not line up (an unlabelled tools/call, a label
on no call, a label used twice).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.truth, when run as a script


from mitmproxy import io as flow_io  # noqa: E402

from mcp_blackbox.analyzer import analyze  # noqa: E402
from mcp_blackbox.analyzer.model.contract import CallRecord  # noqa: E402
from mcp_blackbox.analyzer.wire import stdio_capture  # noqa: E402
from tests.truth.harness import read_flows, read_relabels, tools_call  # noqa: E402
from tests.truth.labels import Label  # noqa: E402

THRESHOLD = 0.95
# The family the analyzer's rules were not written against (tests/truth/family_holdout.py). Its first score
# (2026-12-07): links precision 1.00 (4/4), recall 0.67 (4/6), origin 1.00, high 1.00, DUPLICATE_EXECUTION
# precision 0.50 (2/4), recall 1.00, both with and without the recorded identity. The rule that a write sent
# again after its result with nothing failed in between is meant (analyzer/across/executions.py) came after
# it: q is held out for linking and origin, no longer for DUPLICATE_EXECUTION.
HELD_OUT = "q"
DUPLICATE_FLAG = "DUPLICATE_EXECUTION"
HIGH = "high"

Pair = tuple[str, str]  # (earlier attempt, later attempt), as ScoredCall.key


# ---------------------------------------------------------------- the calls, with their truth


@dataclass(frozen=True)
class ScoredCall:
    """One labelled tools/call: its truth label beside what the analyzer said about it."""

    capture: str
    call_id: str
    label: Label
    retry_group: str | None = None
    attempt: int | None = None
    origin: str | None = None
    confidence: str | None = None
    flags: tuple[str, ...] = ()
    link_evidence: tuple[str, ...] = ()  # the analyzer's reasons for the retry group the call is in

    @property
    def group(self) -> tuple[str, str] | None:
        """Group ids are per analysis: qualified by the capture."""
        return (self.capture, self.retry_group) if self.retry_group else None

    @property
    def key(self) -> str:
        """A label is unique within its capture; the same request is seen in front of a gateway and behind it."""
        return f"{self.capture}:{self.label.key}"

    @property
    def previous_key(self) -> str:
        return f"{self.capture}:{self.label.previous_key}"

    @property
    def duplicate(self) -> bool:
        return DUPLICATE_FLAG in self.flags

    def describe(self) -> str:
        return f"{self.capture}:{self.call_id} {self.label.key} ({self.label.kind})"


class CorpusMismatch(RuntimeError):
    """The captures and the analysis do not line up: the harness, not the analyzer, is at fault."""


def read_labels(path: Path) -> dict[str, Label]:
    """flow id -> the truth label its request body carries (JSON bodies; a batch is searched too); for a
    stdio capture, "<file name>#<JSON-RPC id>" -> the label of the tools/call the client wrote."""
    if stdio_capture.is_stdio_capture(path):
        return _stdio_labels(path)
    labels = {flow.id: found[1] for flow in read_flows(path) if (found := tools_call(flow)) and found[1]}
    return labels | read_relabels(path)  # a gateway's or bridge's copies, labelled from its own log


def _stdio_labels(path: Path) -> dict[str, Label]:
    labels: dict[str, Label] = {}
    for record in stdio_capture.read_capture(path):
        if record["type"] != "line" or record["stream"] != "stdin":
            continue
        try:
            message = json.loads(stdio_capture.line_payload(record))
        except ValueError:
            continue
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        if (label := Label.from_params(message.get("params"))) is not None:
            labels[_stdio_key(path.name, message.get("id"))] = label
    return labels


def _stdio_key(file_name: str, jsonrpc_id: object) -> str:
    return f"{file_name}#{json.dumps(jsonrpc_id)}"


def capture_files(capture: Path) -> list[Path]:
    """A capture: one flow file, or a directory holding one recording's files."""
    return sorted(p for p in capture.iterdir() if p.is_file()) if capture.is_dir() else [capture]


def scored_calls(path: Path, analyzed: Path | None = None) -> list[ScoredCall]:
    """Analyze one capture (``analyzed``: a copy of it to analyze instead) and pair each tools/call with
    the label of the request that carried it."""
    labels = {key: label for file in capture_files(path) for key, label in read_labels(file).items()}
    analysis = analyze([analyzed or path])
    group_evidence = {group.group_id: tuple(group.evidence) for group in analysis.retry_groups}
    out: list[ScoredCall] = []
    for record in analysis.calls:
        if record["method"] != "tools/call" or record["direction"] != "client->server":
            continue
        key = _call_key(record)
        label = labels.pop(key, None) if key else None
        if label is None:
            raise CorpusMismatch(f"{path.name}:{record['call_id']} ({key}) is a tools/call without a label")
        out.append(_scored(path.name, record, label, group_evidence.get(record["retry_group"] or "", ())))
    if labels:
        keys = sorted(label.key for label in labels.values())
        raise CorpusMismatch(f"{path.name}: labelled requests that are the first exchange of no call: {keys}")
    return out


def _call_key(record: CallRecord) -> str | None:
    """What the capture's labels are keyed by: the request's flow id, or a stdio call's file and id."""
    if record["carrier"] == "stdio":
        return _stdio_key(Path(record["source"]).name, record["jsonrpc_id"])
    return record["exchanges"][0] if record["exchanges"] else None


# ---------------------------------------------------------------- without the measured identity

IDENTITY_KEYS = ("client_process", "earlier_connections")


def without_identity(capture: Path, into: Path) -> Path:
    """A copy of the capture (a file or a recording's directory) as a recorder that measured no process
    would have written it: the same flows and lines, with no client_process or earlier_connections."""
    target = into / capture.name
    if capture.is_dir():
        target.mkdir()
    for file in capture_files(capture):
        copy = target / file.name if capture.is_dir() else target
        if stdio_capture.is_stdio_capture(file):
            _strip_stdio(file, copy)
        else:
            _strip_flows(file, copy)
    return target


def _strip_flows(source: Path, target: Path) -> None:
    with source.open("rb") as reading, target.open("wb") as writing:
        writer = flow_io.FlowWriter(writing)
        for flow in flow_io.FlowReader(reading).stream():
            record = flow.metadata.get("mcp_blackbox")
            if isinstance(record, dict):
                for key in IDENTITY_KEYS:
                    record.pop(key, None)
            writer.add(flow)


def _strip_stdio(source: Path, target: Path) -> None:
    first, _, rest = source.read_bytes().partition(b"\n")
    header = json.loads(first)
    header.pop("client_process", None)
    target.write_bytes(json.dumps(header).encode() + b"\n" + rest)
    shutil.copymode(source, target)


def _scored(capture: str, record: CallRecord, label: Label, link_evidence: tuple[str, ...]) -> ScoredCall:
    return ScoredCall(
        capture=capture,
        call_id=record["call_id"],
        label=label,
        retry_group=record["retry_group"],
        attempt=record["attempt"],
        origin=record["retry_origin"],
        confidence=record["retry_confidence"],
        flags=tuple(str(flag) for flag in record["flags"]),
        link_evidence=link_evidence,
    )


# ---------------------------------------------------------------- matching


def true_pairs(calls: Iterable[ScoredCall]) -> set[Pair]:
    """Each retry with the attempt just before it: what the clients did."""
    return {(c.previous_key, c.key) for c in calls if c.label.kind == "retry"}


def predicted_pairs(calls: Iterable[ScoredCall]) -> dict[Pair, ScoredCall]:
    """Consecutive members of each analyzer retry group -> the later call (which carries origin and confidence)."""
    groups: dict[tuple[str, str], list[ScoredCall]] = defaultdict(list)
    for call in calls:
        if call.group is not None:
            groups[call.group].append(call)
    pairs: dict[Pair, ScoredCall] = {}
    for members in groups.values():
        members.sort(key=lambda c: c.attempt or 0)
        for before, after in itertools.pairwise(members):
            pairs[(before.key, after.key)] = after
    return pairs


@dataclass(frozen=True)
class Ratio:
    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hits / self.total if self.total else None

    def passes(self) -> bool:
        """A figure over nothing proves nothing: no cases fails too."""
        return self.value is not None and self.value >= THRESHOLD

    def __str__(self) -> str:
        shown = "n/a" if self.value is None else f"{self.value:.2f}"
        return f"{shown} ({self.hits}/{self.total})"


@dataclass
class Score:
    calls: int
    retry_precision: Ratio
    retry_recall: Ratio
    origin_accuracy: Ratio
    high_right: Ratio
    duplicate_precision: Ratio
    duplicate_recall: Ratio
    by_confidence: dict[str, Ratio] = field(default_factory=dict)
    mistakes: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Ratio]:
        return {
            "retry linking precision": self.retry_precision,
            "retry linking recall": self.retry_recall,
            "retry origin accuracy": self.origin_accuracy,
            '"high" links right': self.high_right,
            "duplicate execution precision": self.duplicate_precision,
            "duplicate execution recall": self.duplicate_recall,
        }

    def failures(self) -> list[str]:
        return [f"{name} {ratio}" for name, ratio in self.figures().items() if not ratio.passes()]


def score(calls: list[ScoredCall]) -> Score:
    by_key = _index(calls)
    truth, predicted = true_pairs(calls), predicted_pairs(calls)
    linked = truth & predicted.keys()
    with_origin = [pair for pair in linked if by_key[pair[1]].label.origin]
    origin_right = [pair for pair in with_origin if predicted[pair].origin == by_key[pair[1]].label.origin]
    flagged = {c.key for c in calls if c.duplicate}
    reexecuted = {c.key for c in calls if c.label.reexecutes}
    result = Score(
        calls=len(calls),
        retry_precision=Ratio(len(linked), len(predicted)),
        retry_recall=Ratio(len(linked), len(truth)),
        origin_accuracy=Ratio(len(origin_right), len(with_origin)),
        high_right=_right_at(HIGH, predicted, truth),
        duplicate_precision=Ratio(len(flagged & reexecuted), len(flagged)),
        duplicate_recall=Ratio(len(flagged & reexecuted), len(reexecuted)),
        by_confidence={level: _right_at(level, predicted, truth) for level in ("high", "medium", "low")},
    )
    result.mistakes = list(_mistakes(by_key, truth, predicted, flagged, reexecuted, with_origin))
    return result


def _index(calls: list[ScoredCall]) -> dict[str, ScoredCall]:
    by_key: dict[str, ScoredCall] = {}
    for call in calls:
        if (seen := by_key.setdefault(call.key, call)) is not call:
            raise CorpusMismatch(f"label {call.key} on two calls: {seen.describe()} and {call.describe()}")
    return by_key


def _right_at(level: str, predicted: dict[Pair, ScoredCall], truth: set[Pair]) -> Ratio:
    at_level = [pair for pair, later in predicted.items() if later.confidence == level]
    return Ratio(sum(pair in truth for pair in at_level), len(at_level))


def _mistakes(
    by_key: dict[str, ScoredCall],
    truth: set[Pair],
    predicted: dict[Pair, ScoredCall],
    flagged: set[str],
    reexecuted: set[str],
    with_origin: list[Pair],
) -> Iterator[str]:
    def pair_text(pair: Pair) -> str:
        return " -> ".join(by_key[key].describe() if key in by_key else f"{key} (no call)" for key in pair)

    for pair in sorted(predicted.keys() - truth):
        later = predicted[pair]
        why = " | ".join(later.link_evidence)
        yield f"linked, not a retry: {pair_text(pair)}: {later.origin} {later.confidence}; {why}"
    for pair in sorted(truth - predicted.keys()):
        yield f"retry not linked: {pair_text(pair)}"
    for pair in sorted(with_origin):
        if (said := predicted[pair].origin) != (want := by_key[pair[1]].label.origin):
            yield f"origin {said}, truth {want}: {pair_text(pair)}"
    for key in sorted(flagged - reexecuted):
        yield f"{DUPLICATE_FLAG} on a call that re-executes nothing: {by_key[key].describe()}"
    for key in sorted(reexecuted - flagged):
        yield f"re-execution not flagged {DUPLICATE_FLAG}: {by_key[key].describe()}"


# ---------------------------------------------------------------- the command


def corpus_captures(directory: Path) -> list[Path]:
    """Every flow file of the corpus, and each subdirectory (one recording of several files)."""
    captures = sorted([*directory.glob("*.flows"), *(p for p in directory.iterdir() if p.is_dir())])
    if not captures:
        raise CorpusMismatch(f"no *.flows and no recording directory in {directory}")
    return captures


def family_of(capture: str) -> str:
    """The family a capture belongs to: "p" for p-runs.flows and p-stdio, "a" for a.flows."""
    return capture.split("-")[0].removesuffix(".flows")


def directory_calls(directory: Path, *, identity: bool = True) -> list[ScoredCall]:
    """Every labelled tools/call of the corpus, analyzed as recorded or (identity=False) with the measured
    identity removed."""
    captures = corpus_captures(directory)
    if identity:
        return [call for capture in captures for call in scored_calls(capture)]
    with tempfile.TemporaryDirectory(prefix="mcp-truth-anonymous-") as tmp:
        copies = [(capture, without_identity(capture, Path(tmp))) for capture in captures]
        return [call for capture, copy in copies for call in scored_calls(capture, copy)]


def score_directory(directory: Path, *, identity: bool = True) -> Score:
    """The corpus scored as recorded, or (identity=False) with the measured identity removed."""
    return score(directory_calls(directory, identity=identity))


def held_out(calls: list[ScoredCall], family: str = HELD_OUT) -> list[ScoredCall]:
    """The calls of one family's captures (each capture is analyzed on its own: nothing else changes)."""
    return [call for call in calls if family_of(call.capture) == family]


def render(result: Score, title: str = "truth corpus") -> str:
    lines = [
        f"{title}: {result.calls} labelled tools/call",
        f"  retry linking      precision {result.retry_precision}  recall {result.retry_recall}",
        f"  retry origin       accuracy  {result.origin_accuracy}",
        f'  "high" links       right     {result.high_right}',
        f"  duplicate exec.    precision {result.duplicate_precision}  recall {result.duplicate_recall}",
        "  links right, by confidence: " + ", ".join(f"{k} {v}" for k, v in result.by_confidence.items()),
    ]
    lines += [f"  mistake: {text}" for text in result.mistakes]
    failures = result.failures()
    lines.append(f"FAIL (below {THRESHOLD} or no cases): " + "; ".join(failures) if failures else "PASS")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="score.py", description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=Path, help="the corpus: DIR/*.flows (and DIR/*/) from record_corpus.py")
    args = parser.parse_args(argv)
    failed = False
    blocks: list[str] = []
    for identity, title in ((True, "as recorded"), (False, "with the recorded identity removed")):
        try:
            calls = directory_calls(args.directory, identity=identity)
            result = score(calls)
            own = held_out(calls)
            result_held_out = score(own) if own else None
        except CorpusMismatch as exc:
            print(f"corpus and analysis do not line up: {exc}", file=sys.stderr)
            return 2
        print(f"== {title}\n{render(result)}")
        if result_held_out is not None:
            heading = f"== held-out ({HELD_OUT}), {title} (not in the exit status)"
            blocks.append(f"{heading}\n{render(result_held_out, f'held-out family {HELD_OUT}')}")
        failed = failed or bool(result.failures())
    for block in blocks:  # after the whole corpus's figures; the exit status is the whole corpus's
        print(block)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
