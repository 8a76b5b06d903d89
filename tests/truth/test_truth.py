"""The truth corpus: the scorer's matching on hand-built calls, and the corpus recorded and scored end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mitmproxy import io as flow_io
from mitmproxy.test import tflow

from tests.truth import record_corpus, score
from tests.truth.labels import Kind, Label
from tests.truth.score import Ratio, ScoredCall, predicted_pairs, true_pairs


def scored(
    key: str,
    kind: Kind = "first",
    *,
    group: str | None = None,
    attempt: int | None = None,
    origin: str | None = None,
    confidence: str | None = None,
    want_origin: str | None = None,
    reexecutes: bool = False,
    duplicate: bool = False,
    capture: str = "x.flows",
) -> ScoredCall:
    """A call labelled `key` ("request#attempt") and what the analyzer said of it."""
    request, number = key.split("#")
    label = Label(request, int(number), kind, origin=want_origin, reexecutes=reexecutes)
    return ScoredCall(
        capture=capture,
        call_id=f"c-{key}",
        label=label,
        retry_group=group,
        attempt=attempt,
        origin=origin,
        confidence=confidence,
        flags=("DUPLICATE_EXECUTION",) if duplicate else (),
    )


# A right link with the right origin, a right link with the wrong origin, a look-alike linked,
# a retry missed; one duplicate flagged rightly, one wrongly, one missed.
EXAMPLE = [
    scored("x1#1", group="r1", attempt=1),
    scored("x1#2", "retry", group="r1", attempt=2, origin="app-retry", confidence="high", want_origin="app-retry"),
    scored("x2#1", group="r2", attempt=1),
    scored("x2#2", "retry", group="r2", attempt=2, origin="app-retry", confidence="medium", want_origin="agent-retry"),
    scored("y1#1", group="r3", attempt=1),
    scored("y2#1", "independent", group="r3", attempt=2, origin="app-retry", confidence="medium", duplicate=True),
    scored("z1#1"),
    scored("z1#2", "retry", want_origin="app-retry", reexecutes=True),
    scored("w1#1"),
    scored("w1#2", "rerun", reexecutes=True, duplicate=True),
]


def test_pairs_come_from_labels_and_from_groups() -> None:
    def pairs(*keys: tuple[str, str]) -> set[tuple[str, str]]:
        return {(f"x.flows:{a}", f"x.flows:{b}") for a, b in keys}

    assert true_pairs(EXAMPLE) == pairs(("x1#1", "x1#2"), ("x2#1", "x2#2"), ("z1#1", "z1#2"))
    assert set(predicted_pairs(EXAMPLE)) == pairs(("x1#1", "x1#2"), ("x2#1", "x2#2"), ("y1#1", "y2#1"))


def test_the_same_label_in_front_of_a_gateway_and_behind_it_is_two_calls() -> None:
    """In front of a gateway the client's request is one call; behind it, each copy is one."""
    front = scored("g1#1", capture="g-front.flows")
    behind = [scored("g1#1", group="r1", attempt=1, capture="g-behind.flows"),
              scored("g1#2", "retry", group="r1", attempt=2, origin="proxy", confidence="high", want_origin="proxy",
                     capture="g-behind.flows")]  # fmt: skip
    result = score.score([front, *behind])
    assert result.retry_precision == Ratio(1, 1) and result.origin_accuracy == Ratio(1, 1)
    with pytest.raises(score.CorpusMismatch):
        score.score([front, scored("g1#1", capture="g-front.flows")])


def test_figures_on_the_example() -> None:
    result = score.score(EXAMPLE)
    assert result.retry_precision == Ratio(2, 3)
    assert result.retry_recall == Ratio(2, 3)
    assert result.origin_accuracy == Ratio(1, 2)
    assert result.high_right == Ratio(1, 1)
    assert result.by_confidence == {"high": Ratio(1, 1), "medium": Ratio(1, 2), "low": Ratio(0, 0)}
    assert result.duplicate_precision == Ratio(1, 2)
    assert result.duplicate_recall == Ratio(1, 2)
    mistakes = "\n".join(result.mistakes)
    assert "linked, not a retry: x.flows:c-y1#1" in mistakes
    assert "retry not linked: x.flows:c-z1#1" in mistakes
    assert "origin app-retry, truth agent-retry" in mistakes
    assert "re-execution not flagged DUPLICATE_EXECUTION: x.flows:c-z1#2" in mistakes
    assert "DUPLICATE_EXECUTION on a call that re-executes nothing: x.flows:c-y2#1" in mistakes


def test_groups_are_per_capture_and_chains_give_consecutive_pairs() -> None:
    calls = [
        scored("p#1", group="r1", attempt=1, capture="a.flows"),
        scored("p#2", "retry", group="r1", attempt=2, capture="a.flows"),
        scored("p#3", "retry", group="r1", attempt=3, capture="a.flows"),
        scored("q#1", group="r1", attempt=1, capture="b.flows"),  # same group id, another capture
    ]
    assert set(predicted_pairs(calls)) == {("a.flows:p#1", "a.flows:p#2"), ("a.flows:p#2", "a.flows:p#3")}
    assert true_pairs(calls) == {("a.flows:p#1", "a.flows:p#2"), ("a.flows:p#2", "a.flows:p#3")}


def test_a_figure_over_nothing_fails() -> None:
    assert not Ratio(0, 0).passes()
    assert not Ratio(94, 100).passes()
    assert Ratio(19, 20).passes()
    result = score.score([scored("only#1")])
    assert result.failures()  # no retries, no duplicates: nothing is proven


def test_label_round_trip_and_checks() -> None:
    label = Label("b/r1/progress", 2, "retry", origin="app-retry", reexecutes=True)
    assert Label.from_params({"name": "progress", "_meta": label.meta()}) == label
    assert Label.from_params({"name": "progress", "_meta": {"progressToken": 1}}) is None
    with pytest.raises(ValueError):
        Label("x", 1, "retry")  # a retry is never the first attempt
    with pytest.raises(ValueError):
        Label("x", 2, "first")


def test_labels_are_read_from_request_bodies(tmp_path: Path) -> None:
    label = Label("t/r1/one", 1, "first")
    flow = tflow.tflow(resp=True)
    flow.request.method = "POST"
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": label.meta()}
    flow.request.content = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    other = tflow.tflow(resp=True)  # no label: not read
    path = tmp_path / "t.flows"
    with path.open("wb") as stream:
        writer = flow_io.FlowWriter(stream)
        writer.add(flow)
        writer.add(other)
    assert score.read_labels(path) == {flow.id: label}


@pytest.mark.e2e
def test_the_corpus_scores_at_least_095(tmp_path: Path) -> None:
    """`make truth` as a test: record every family through the real peers, mitmdump and nginx; score it as
    recorded and with the identity the recorder measured removed (what a plain mitmdump file gives)."""
    assert record_corpus.main(["--out", str(tmp_path)]) == 0
    captures = {p.name.split("-")[0].removesuffix(".flows") for p in score.corpus_captures(tmp_path)}
    assert captures == set(record_corpus.FAMILIES)
    for identity in (True, False):
        result = score.score_directory(tmp_path, identity=identity)
        print(f"== identity {'as recorded' if identity else 'removed'}\n{score.render(result)}")  # whole, on failure
        figures = result.figures()
        assert all(ratio.total for ratio in figures.values()), score.render(result)
        assert all(ratio.passes() for ratio in figures.values()), (identity, score.render(result))


def test_without_identity_strips_the_measured_process_and_keeps_the_recording(tmp_path: Path) -> None:
    """The identity-removed copy is a capture as an older recorder wrote it: no process, same flows."""
    flow = tflow.tflow(resp=True)
    flow.metadata["mcp_blackbox"] = {"version": 1, "client_process": {"pid": 1, "name": "x", "started_at": 1.0}}
    flow.metadata["mcp_blackbox_recording"] = {"id": "r" * 32, "file": 1}
    path = tmp_path / "t.flows"
    with path.open("wb") as stream:
        flow_io.FlowWriter(stream).add(flow)
    (tmp_path / "copy").mkdir()
    copy = score.without_identity(path, tmp_path / "copy")
    with copy.open("rb") as stream:
        (read,) = list(flow_io.FlowReader(stream).stream())
    assert "client_process" not in read.metadata["mcp_blackbox"]
    assert read.metadata["mcp_blackbox_recording"] == {"id": "r" * 32, "file": 1}
    assert read.id == flow.id
