"""One answer to "did it run twice?" (issue 22, item 1): the writes that ran more than once, certain (two
results seen) or possible (an attempt's effects unknown), each entry with every attempt it counts and every
attempt of the retry chains that hold them; a chain and the count agree. Look-alikes: a read-only tool
retried, a write refused and sent again, a user saving twice on purpose."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.across.executions import Execution
from mcp_blackbox.analyzer.across.repeated_runs import Attempt, RepeatedRuns
from mcp_blackbox.analyzer.calls.classify import CaptureFacts
from mcp_blackbox.analyzer.model.vocabulary import Outcome
from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream
from mcp_blackbox.analyzer.outputs.export import write_json
from tests.analyzer.flows import write
from tests.analyzer.test_duplicate_execution import app_loop_re_run, start, tool
from tests.benchmarks import synthetic_capture


def entries(tmp_path: Path, *flows: Any) -> tuple[Any, list[dict[str, Any]]]:
    analysis = analyze([write(tmp_path, *flows)])
    return analysis, [entry.record() for entry in analysis.ran_more_than_once]


def ids(analysis: Any, tool_name: str) -> list[str]:
    return [c["call_id"] for c in analysis.calls if c["tool"] == tool_name]


def test_a_chain_with_a_refusal_between_two_runs_is_one_entry_with_every_attempt(tmp_path: Path) -> None:
    """500 (may have run), 503 (refused: did not run), result (ran): the tool may have run twice. Before,
    the chain said it could not have (its pairs were 500->503 and 503->result) while the duplicate said it
    did; now the chain, the entry and its attempts say the same thing."""
    analysis, found = entries(
        tmp_path, *start("A", 100.0),
        tool(2, "write_record", "A", 100.1, body=b"boom", status=500, content_type="text/plain"),
        tool(3, "write_record", "A", 100.6, body=b"busy", status=503, content_type="text/plain"),
        tool(4, "write_record", "A", 101.1),
    )  # fmt: skip
    (group,) = [g.record() for g in analysis.retry_groups]
    (entry,) = found
    assert group["may_have_run_twice"] is True
    assert [a["call_id"] for a in entry["attempts"]] == group["members"] == ids(analysis, "write_record")
    assert [(a["http_status"], a["ran"], a["retry_group"]) for a in entry["attempts"]] == [
        (500, "may have run", group["retry_group"]),
        (503, "did not run", group["retry_group"]),
        (200, "ran", group["retry_group"]),
    ]
    assert (entry["certainty"], entry["runs"], entry["tool"]) == ("possible", 2, "write_record")


def test_two_results_are_certain_and_an_attempt_outside_any_chain_is_listed_as_such(tmp_path: Path) -> None:
    """An application loop re-ran its whole sequence after a cut stream: its write, which had succeeded, ran
    again on a new session. Two results: certain; the re-run is no retry of the write."""
    analysis = app_loop_re_run(tmp_path)
    (entry,) = [e.record() for e in analysis.ran_more_than_once]
    assert entry["certainty"] == "certain" and entry["runs"] == 2
    assert [a["call_id"] for a in entry["attempts"]] == ids(analysis, "write_record")
    assert [(a["ran"], a["retry_group"]) for a in entry["attempts"]] == [("ran", None), ("ran", None)]


def test_look_alikes_run_once(tmp_path: Path) -> None:
    """A read-only tool retried after a 500 changes nothing when it runs again; a write refused with 503 and
    sent again ran once; a write that succeeded and was sent again with nothing failed is a user's choice."""
    analysis, found = entries(
        tmp_path, *start("A", 100.0),
        tool(2, "lookup", "A", 100.1, body=b"boom", status=500, content_type="text/plain"),
        tool(3, "lookup", "A", 100.6),
        tool(4, "write_record", "A", 101.0, {"key": "b"}, body=b"busy", status=503, content_type="text/plain"),
        tool(5, "write_record", "A", 101.5, {"key": "b"}),
        tool(6, "write_record", "A", 102.0, {"key": "c"}),
        tool(7, "write_record", "A", 110.0, {"key": "c"}),
    )  # fmt: skip
    assert found == []
    assert len(analysis.retry_groups) == 2  # the lookup's and the refused write's: retried, but run once


def test_the_export_carries_the_entries_and_their_counts_by_certainty(tmp_path: Path) -> None:
    analysis, found = entries(
        tmp_path, *start("A", 100.0),
        tool(2, "write_record", "A", 100.1, body=b"boom", status=500, content_type="text/plain"),
        tool(3, "write_record", "A", 100.6),
    )  # fmt: skip
    out = tmp_path / "export.json"
    with out.open("w", encoding="utf-8") as stream:
        write_json(analysis, stream)
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["ran_more_than_once"] == found and len(found) == 1
    assert document["summary"]["ran_more_than_once"] == {"certain": 0, "possible": 1}
    # The per-call facts stay, as the export has always had them.
    flags = [c["flags"] for c in document["calls"] if c["tool"] == "write_record"]
    assert flags == [[], ["UNSAFE_RETRY", "DUPLICATE_EXECUTION"]] or flags == [
        [],
        ["DUPLICATE_EXECUTION", "UNSAFE_RETRY"],
    ]


def test_no_evidence_claims_a_backoff_schedule() -> None:
    """A delay near 1, 2 or 4 s shows no backoff schedule: the evidence gives the delay and nothing more. The
    503 sample's application re-sent its write 1.03 s later, which the evidence called "a 1 s backoff step"."""
    analysis = analyze([str(Path(__file__).resolve().parents[2] / "sample_captures" / "py-app-retry-after-503.flows")])
    (group,) = [g.record() for g in analysis.retry_groups if g.record()["failure_retry"]]
    assert "1.03 s later" in group["evidence"][0]
    lines = [line for call in analysis.calls for line in call["evidence"]] + group["evidence"]
    assert not [line for line in lines if "backoff" in line]


def test_a_windowed_stream_gives_the_same_answer_as_the_whole_analysis(tmp_path: Path) -> None:
    """The export's windowed stream, which forgets a write's chain once no execution can name it, lists the
    same entries as the whole analysis."""
    path = tmp_path / "synthetic.flows"
    synthetic_capture.generate(path, 3000, 5)
    whole = [entry.record() for entry in analyze([str(path)]).ran_more_than_once]
    stream = CallStream([str(path)], window=DEFAULT_WINDOW)
    assert sum(1 for _ in stream) > 3000
    assert whole and [entry.record() for entry in stream.ran_more_than_once] == whole


def test_a_chain_is_forgotten_once_no_execution_can_name_it() -> None:
    """Issue 23: memory bounded by the work in flight. A chain all of whose attempts are older than every
    execution still held, and none in a run still open, goes; the others stay."""
    runs = RepeatedRuns(CaptureFacts())

    def attempt(call_id: str, t: float) -> Attempt:
        return Attempt(call_id, t, Outcome.HTTP_ERROR, 500, Execution.MAYBE, "r")

    runs._chains = {
        "old": (attempt("c1", 10.0), attempt("c2", 11.0)),
        "old-but-open": (attempt("c3", 12.0),),
        "recent": (attempt("c4", 90.0), attempt("c5", 120.0)),
    }
    runs.forget(100.0, {"c3"})
    assert sorted(runs._chains) == ["old-but-open", "recent"]
