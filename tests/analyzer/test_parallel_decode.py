"""Decoding in worker processes (analyzer/read/parallel.py) gives the sequential analysis, exactly.

With the size threshold forced to 0 and segments of a few kB, every input below is analyzed both ways
(MCP_BLACKBOX_WORKERS=1: sequential; =2: workers) and compared: the export records, retry groups,
duplicate executions, auth steps, stream events, notes, and the LoadReport (flows read, bytes read,
sources, skipped flows in order with their reasons and indices, read problems with their offsets).

Inputs: every sample capture together; a synthetic capture cut into several ranges; that capture
truncated inside a record, and with garbage after a record; a directory of rotated files (with an
empty one).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.across import call_stream as call_stream_module
from mcp_blackbox.analyzer.outputs.export import iter_records
from mcp_blackbox.analyzer.read import parallel
from tests.benchmarks import synthetic_capture

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "sample_captures").glob("*.flows"))
SEGMENT = 4_000  # bytes: every sample of more than two records' worth is cut


@pytest.fixture
def small_segments(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Parallel at any size, in segments of SEGMENT bytes; yields the segment counts of each parallel run."""
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "SEGMENT_BYTES", SEGMENT)
    runs: list[int] = []
    in_workers = parallel._in_workers

    def counted(segments: list[parallel.Segment], report: Any, workers: int) -> Iterator[parallel.Decoded]:
        runs.append(len(segments))
        yield from in_workers(segments, report, workers)

    monkeypatch.setattr(parallel, "_in_workers", counted)
    yield runs


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parallel") / "synthetic.flows"
    synthetic_capture.generate(path, 400, seed=7)
    return path


def outcome(paths: list[Path], monkeypatch: pytest.MonkeyPatch, workers: int) -> dict[str, Any]:
    monkeypatch.setenv(parallel.WORKERS_ENV, str(workers))
    result = analyze(paths)
    report = result.report
    facts = {
        "records": list(iter_records(result, redact=False)),
        "retry_groups": [group.record() for group in result.retry_groups],
        "duplicates": [duplicate.record() for duplicate in result.duplicate_executions],
        "auth_steps": result.auth_steps,
        "stream_events": result.stream_events,
        "notes": result.notes,
        "analyzed": [(e.source, e.index, e.flow_id, e.scope, e.error_text) for e in result.exchanges],
        "flows_read": report.flows_read,
        "bytes_read": report.bytes_read,
        "sources": report.sources,
        "skipped": report.skipped,
        "problems": report.problems,
    }
    return json.loads(json.dumps(facts, default=repr))  # what a consumer of the export would see


def same_both_ways(paths: list[Path], monkeypatch: pytest.MonkeyPatch, runs: list[int]) -> dict[str, Any]:
    sequential = outcome(paths, monkeypatch, 1)
    assert not runs, "MCP_BLACKBOX_WORKERS=1 reads in this process"
    in_workers = outcome(paths, monkeypatch, 2)
    assert runs and runs[0] > len(paths), "the input was cut into more segments than files"
    for key, value in sequential.items():
        assert in_workers[key] == value, key
    return sequential


def test_every_sample_capture_together(monkeypatch: pytest.MonkeyPatch, small_segments: list[int]) -> None:
    result = same_both_ways(SAMPLES, monkeypatch, small_segments)
    assert len(result["records"]) > 50 and result["retry_groups"]


def test_a_synthetic_capture_in_ranges(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch, small_segments: list[int]
) -> None:
    segments = parallel.plan_segments([str(synthetic)], 50_000)
    assert len(segments) >= 4
    assert [s.start for s in segments[1:]] == [s.end for s in segments[:-1]]
    assert segments[-1].end is None and sum(s.size for s in segments) == synthetic.stat().st_size
    monkeypatch.setattr(parallel, "SEGMENT_BYTES", 50_000)
    result = same_both_ways([synthetic], monkeypatch, small_segments)
    assert len(result["records"]) >= 400 and result["retry_groups"] and result["skipped"]
    assert not result["problems"]


def test_a_truncated_capture(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: list[int]
) -> None:
    data = synthetic.read_bytes()
    cut = tmp_path / "cut.flows"
    cut.write_bytes(data[: len(data) * 2 // 3])
    monkeypatch.setattr(parallel, "SEGMENT_BYTES", 50_000)
    result = same_both_ways([cut], monkeypatch, small_segments)
    (problem,) = result["problems"]
    assert "truncated" in problem["reason"] and 0 < problem["offset"] < cut.stat().st_size
    assert problem["flows_read"] == result["flows_read"] > 0


def test_garbage_after_a_record(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: list[int]
) -> None:
    data = synthetic.read_bytes()
    bounds = [s.start for s in parallel.plan_segments([str(synthetic)], 50_000)]
    middle = bounds[len(bounds) // 2]
    broken = tmp_path / "garbage.flows"
    broken.write_bytes(data[:middle] + b"not a record" + data[middle:])
    monkeypatch.setattr(parallel, "SEGMENT_BYTES", 50_000)
    result = same_both_ways([broken], monkeypatch, small_segments)
    (problem,) = result["problems"]
    assert problem["offset"] == middle


def test_a_directory_of_rotated_files(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_segments: list[int]
) -> None:
    data = synthetic.read_bytes()
    bounds = [s.start for s in parallel.plan_segments([str(synthetic)], 100_000)] + [len(data)]
    folder = tmp_path / "rotated"
    folder.mkdir()
    for n, (start, end) in enumerate(pairwise(bounds)):
        (folder / f"mcp-20260101T0000{n:02d}Z-{n:04d}.flows").write_bytes(data[start:end])
    (folder / f"mcp-20260101T0001{0:02d}Z-{99:04d}.flows").write_bytes(b"")  # the recorder stopped at once
    shutil.copy(SAMPLES[0], folder / "mcp-20260101T000200Z-0100.flows")
    monkeypatch.setattr(parallel, "SEGMENT_BYTES", 30_000)
    result = same_both_ways([folder], monkeypatch, small_segments)
    assert len(result["sources"]) == len(bounds) + 1
    assert [p["reason"] for p in result["problems"]] == ["empty file: no flows in it"]


def test_sequential_where_it_does_not_pay(synthetic: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below MIN_BYTES, with one worker, or keeping details: no worker processes."""
    monkeypatch.setattr(parallel, "_in_workers", None)  # would fail if called
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert analyze([synthetic]).calls  # far below MIN_BYTES
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "SEGMENT_BYTES", 50_000)
    assert analyze([synthetic], keep_details=True).calls
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    assert analyze([synthetic]).calls
    assert call_stream_module.decoded_exchanges is parallel.decoded_exchanges


def test_a_busy_machine_reads_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without MCP_BLACKBOX_WORKERS, only CPUs idle now count: more processes than free CPUs take turns."""
    assert 0 <= parallel._idle_cpus(2, 0.01) <= (parallel.os.cpu_count() or 2)
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    monkeypatch.setattr(parallel, "_idle_cpus", lambda cpus, interval=0.1: 1)
    assert parallel.worker_count() == 1
    monkeypatch.setattr(parallel, "_idle_cpus", lambda cpus, interval=0.1: cpus)
    assert parallel.worker_count() == len(parallel.os.sched_getaffinity(0))
