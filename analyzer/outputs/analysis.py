"""The pipeline end to end: files -> exchanges -> messages -> calls with verdicts, all of them at once
(``analyze``); ``CallStream`` (analyzer/across/call_stream.py) gives them one at a time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_blackbox.analyzer.across.call_stream import DEFAULT_WINDOW, CallStream
from mcp_blackbox.analyzer.across.executions import DuplicateExecution
from mcp_blackbox.analyzer.across.repeated_runs import RanMoreThanOnce
from mcp_blackbox.analyzer.across.retries import RetryGroup
from mcp_blackbox.analyzer.calls.classify import CaptureFacts, protocol_version
from mcp_blackbox.analyzer.model.contract import CallRecord, FindingRecord
from mcp_blackbox.analyzer.model.records import Call, Exchange
from mcp_blackbox.analyzer.outputs.call_record import call_record
from mcp_blackbox.analyzer.outputs.export import iter_records
from mcp_blackbox.analyzer.outputs.frames import calls_frame, retry_groups_frame
from mcp_blackbox.analyzer.read.load import LoadReport, ReadFigures
from mcp_blackbox.analyzer.read.time_range import TimeRange

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Analysis(ReadFigures):
    call_objects: list[Call]
    exchanges: list[Exchange]
    report: LoadReport
    facts: CaptureFacts
    retry_groups: list[RetryGroup] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the capture could not show
    duplicate_executions: list[DuplicateExecution] = field(default_factory=list)  # writes that ran again
    stream_events: list[dict[str, Any]] = field(default_factory=list)  # a GET or DELETE refused: no call
    auth_steps: list[dict[str, Any]] = field(default_factory=list)  # the OAuth flow around the calls
    # --since/--until: the calls above are those that started in it (CallStream.range_record says the rest)
    time_range: TimeRange | None = None
    range: dict[str, Any] | None = None
    findings: list[FindingRecord] = field(default_factory=list)  # named patterns across calls
    ran_more_than_once: list[RanMoreThanOnce] = field(default_factory=list)  # "did it run twice?"

    @cached_property
    def calls(self) -> list[CallRecord]:
        """The calls as the export contract has them, in the order they started."""
        return [call_record(c, protocol_version(c, self.facts)) for c in self.call_objects]

    def final_calls(self) -> list[Call]:
        """The calls, in the order they started (what an export reads: see ``outputs.export.Analyzed``)."""
        return self.call_objects

    def to_pandas(self, *, redact: bool = True) -> pd.DataFrame:
        """The calls as a frame with explicit dtypes (analyzer/outputs/frames.py); evidence and error
        messages redacted like the export's unless ``redact=False``."""
        return calls_frame(iter_records(self, redact=redact))

    def retry_groups_to_pandas(self) -> pd.DataFrame:
        """The retry groups as a frame with explicit dtypes, one row per group."""
        return retry_groups_frame(group.record() for group in self.retry_groups)

    @cached_property
    def calls_frame(self) -> pd.DataFrame:
        """``to_pandas()``, built once."""
        return self.to_pandas()

    @property
    def analyzed(self) -> int:
        return len(self.exchanges)

    def range_record(self) -> dict[str, Any] | None:
        return self.range


def analyze(
    paths: Iterable[str | Path],
    *,
    keep_details: bool = False,
    report: LoadReport | None = None,
    time_range: TimeRange | None = None,
) -> Analysis:
    """Analyze flow files (from the addon, plain mitmdump or HAR) into calls with verdicts.

    A directory stands for its ``*.flows`` files and a glob for its matches, by name (rotated files are
    named by their start time), read as one capture (``analyzer/wire/inputs.py``).

    ``keep_details`` keeps bodies, every header and the addon's per-chunk record (for a report);
    without it only what the verdicts need is held, so large captures fit in memory.
    ``report``: pass one to watch ``flows_read`` and ``bytes_read`` grow from another thread.
    ``time_range``: only the calls that started in it (``analyzer/read/time_range.py``).
    """
    stream = CallStream(paths, window=None, keep_details=keep_details, report=report, time_range=time_range)
    calls = list(stream)
    # A whole analysis keeps its groups and duplicates as lists (window=None), their calls with them.
    assert isinstance(stream.retry_groups, list) and isinstance(stream.duplicate_executions, list)
    return Analysis(
        calls,
        stream.exchanges,
        stream.report,
        stream.facts,
        stream.retry_groups,
        stream.notes,
        stream.duplicate_executions,
        stream.stream_events,
        stream.auth_steps,
        time_range,
        stream.range_record(),
        stream.findings,
        stream.ran_more_than_once,
    )


__all__ = ["DEFAULT_WINDOW", "Analysis", "CallStream", "analyze", "protocol_version"]
