"""Decoding flow files in worker processes: the per-exchange part of the analysis on every core.

Reading a record, decoding it and extracting its JSON-RPC messages depend on that record alone, and
are most of an analysis's time. The input is cut into segments (each file of a rotated directory; a
large flow file into byte ranges at record boundaries, found by reading the records' length prefixes
and seeking over their payloads), each segment is decoded and extracted in a worker process, and the
main process takes the results back segment by segment, in the input's order. Everything that spans
exchanges (which endpoints speak MCP, legacy SSE sessions, scopes, auth steps, pairing and everything
after it) stays in the main process, in the same order as a sequential reading: the analysis is the
same, and so are the LoadReport's counts, skipped flows (with their order) and read problems.

A worker sends back what the main process reads of each exchange and no more: without
``keep_details`` the bodies are dropped (an HTTP error's text is cut from its body first), the SSE
events are not sent, and the stream record is cut to what the analysis keeps.

It goes parallel only when that pays: more than one idle CPU, at least ``MIN_BYTES`` of input, and no
``keep_details`` (whole bodies would cost more to send than to decode). ``MCP_BLACKBOX_WORKERS=1``
forces the sequential reading (``MCP_BLACKBOX_WORKERS=N``: N worker processes).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from mcp_blackbox.analyzer.model.records import Exchange
from mcp_blackbox.analyzer.read.decode import Decoded, decode_exchange
from mcp_blackbox.analyzer.read.load import LoadReport, _read_file, read_exchanges
from mcp_blackbox.analyzer.read.stdio_load import is_stdio_capture, stdio_decoded
from mcp_blackbox.analyzer.wire.tnetstring_reader import framed_records

WORKERS_ENV = "MCP_BLACKBOX_WORKERS"
MIN_BYTES = 32_000_000  # input below which one process is quick enough (forking and sending cost)
SEGMENT_BYTES = 16_000_000  # a flow file larger than two of these is cut into ranges of about this size


def decoded_exchanges(files: Sequence[str], report: LoadReport, *, keep_details: bool = False) -> Iterator[Decoded]:
    """Every exchange of the files (already expanded: analyzer/wire/inputs.py), in order, decoded; in worker
    processes when that pays, with the same results and the same ``report``."""
    if any(is_stdio_capture(path) for path in files):  # stdio captures (analyzer/read/stdio_load.py) among them
        yield from _with_stdio(files, report, keep_details)
        return
    segments, workers = None, 1
    # The size first: counting idle CPUs takes a tenth of a second.
    if not keep_details and _total_size(files) >= MIN_BYTES and (workers := worker_count()) > 1:
        segments = plan_segments(files, SEGMENT_BYTES)
    if segments is None or len(segments) < 2:
        for exchange in read_exchanges(files, report, keep_all=keep_details):
            yield decode_exchange(exchange, keep_details)
        return
    yield from _in_workers(segments, report, min(workers, len(segments)))


def _with_stdio(files: Sequence[str], report: LoadReport, keep_details: bool) -> Iterator[Decoded]:
    """Each stdio capture through its own reader, the flow files between them as before, in the files' order."""
    flows: list[str] = []
    for path in [*files, None]:
        if path is not None and not is_stdio_capture(path):
            flows.append(path)
            continue
        if flows:
            yield from decoded_exchanges(flows, report, keep_details=keep_details)
            flows = []
        if path is not None:
            yield from stdio_decoded(path, report, keep_details=keep_details)


def worker_count() -> int:
    """``MCP_BLACKBOX_WORKERS`` if set (1: sequential), else the CPUs this process may run on that are idle
    now: on a machine already busy, more processes than free CPUs only take turns, and lose time."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
    return min(cpus, _idle_cpus(cpus))


def _idle_cpus(cpus: int, interval: float = 0.1) -> int:
    """How many CPUs were idle over ``interval`` (from /proc/stat), rounded; ``cpus`` where that is unknown."""
    try:
        first = _cpu_times()
        time.sleep(interval)
        second = _cpu_times()
    except (OSError, ValueError, IndexError):
        return cpus
    total = sum(second) - sum(first)
    idle = (second[3] + second[4]) - (first[3] + first[4])  # idle and iowait
    if total <= 0:
        return cpus
    return round((os.cpu_count() or cpus) * idle / total)  # /proc/stat's first line sums every CPU


def _cpu_times() -> list[int]:
    with open("/proc/stat", encoding="ascii") as stat:
        return [int(n) for n in stat.readline().split()[1:]]


def _total_size(files: Sequence[str]) -> int:
    size = 0
    for path in files:
        with contextlib.suppress(OSError):  # the reading says why it cannot be read
            if os.path.isfile(path):
                size += os.path.getsize(path)
    return size


@dataclass(frozen=True, slots=True)
class Segment:
    """A file read whole (``end`` None and ``start`` 0: through read_exchanges, whatever the file is), or
    the records of a flow file from the one at ``start`` (the file's ``index``th) to the one at ``end``."""

    source: str
    start: int = 0
    end: int | None = None
    index: int = 0
    size: int = 0  # bytes it adds to LoadReport.bytes_read (a range's; a whole file's is its reader's)


def plan_segments(files: Sequence[str], segment_bytes: int) -> list[Segment]:
    """The files as segments, in order: a flow file of more than two ``segment_bytes`` cut at record
    boundaries about ``segment_bytes`` apart; every other file (HAR, small, unreadable) whole."""
    segments: list[Segment] = []
    for source in files:
        cuts = _record_cuts(source, segment_bytes) if os.path.isfile(source) else []
        if len(cuts) < 2:
            segments.append(Segment(source))
            continue
        size = os.path.getsize(source)
        ends = [start for start, _ in cuts[1:]] + [None]
        for (start, index), end in zip(cuts, ends, strict=True):
            segments.append(Segment(source, start, end, index, (size if end is None else end) - start))
    return segments


def _record_cuts(source: str, segment_bytes: int) -> list[tuple[int, int]]:
    """(offset, index) of records about ``segment_bytes`` apart, the first at (0, 0); [] for a file not
    worth cutting. Only length prefixes and type tags are read: the reader of a segment must pass
    through each cut as the whole file's reader would, so cutting stops where the framing does (a
    bad prefix, a record cut short or not a dict); the last segment reads on from there as before."""
    try:
        with open(source, "rb", buffering=0) as handle:
            fd = handle.fileno()
            size = os.fstat(fd).st_size
            if size < 2 * segment_bytes or not os.pread(fd, 1, 0).isdigit():  # HAR's JSON is read whole
                return []
            cuts = [(0, 0)]
            target = segment_bytes
            for index, (_, offset) in enumerate(framed_records(fd, size), start=1):
                if offset >= target and size - offset >= segment_bytes // 2:
                    cuts.append((offset, index))
                    target = offset + segment_bytes
            return cuts
    except OSError:
        return []


# ---------------------------------------------------------------------------- the workers


@dataclass(slots=True)
class SegmentResult:
    decoded: list[Decoded]
    marks: list[tuple[int, int]]  # per exchange: (skipped before it, flows read up to it) in the segment
    report: LoadReport


def decode_segment(segment: Segment) -> SegmentResult:
    """A worker's task: the segment's exchanges decoded, and what reading it reported."""
    report = LoadReport()
    decoded: list[Decoded] = []
    marks: list[tuple[int, int]] = []
    if segment.end is None and segment.start == 0:
        exchanges: Iterator[Exchange] = read_exchanges([segment.source], report)
    else:
        exchanges = _read_range(segment, report)
    for exchange in exchanges:
        marks.append((len(report.skipped), report.flows_read))
        decoded.append(decode_exchange(exchange, False))
    return SegmentResult(decoded, marks, report)


def _read_range(segment: Segment, report: LoadReport) -> Iterator[Exchange]:
    with open(segment.source, "rb") as handle:
        handle.seek(segment.start)
        yield from _read_file(handle, segment.source, report, False, end=segment.end, index=segment.index)


def _in_workers(segments: list[Segment], report: LoadReport, workers: int) -> Iterator[Decoded]:
    """The segments decoded by ``workers`` processes, taken back in order; a few segments ahead at most,
    so that results waiting for the main process do not pile up in memory."""
    # fork: the workers start with the modules already imported (a fresh interpreter takes a second
    # to import mitmproxy); elsewhere, the platform's default.
    method = "fork" if sys.platform.startswith("linux") else None
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))
    try:
        ahead: deque[tuple[Segment, Future[SegmentResult]]] = deque()
        waiting = iter(segments)
        for segment in waiting:
            ahead.append((segment, pool.submit(decode_segment, segment)))
            if len(ahead) >= 2 * workers:
                break
        while ahead:
            segment, future = ahead.popleft()
            result = future.result()
            following = next(waiting, None)
            if following is not None:
                ahead.append((following, pool.submit(decode_segment, following)))
            yield from _taken_back(segment, result, report)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _taken_back(segment: Segment, result: SegmentResult, report: LoadReport) -> Iterator[Decoded]:
    """The segment's exchanges, with its skipped flows, counts and problems added to ``report`` where a
    sequential reading adds them (a flow's skip before the exchanges that follow it)."""
    part = result.report
    if segment.start == 0:
        report.sources.append(segment.source)
    flows_before, done = report.flows_read, 0
    for decoded, (skipped, flows) in zip(result.decoded, result.marks, strict=True):
        report.skipped.extend(part.skipped[done:skipped])
        done = skipped
        report.flows_read = flows_before + flows
        yield decoded
    report.skipped.extend(part.skipped[done:])
    report.flows_read = flows_before + part.flows_read
    report.problems.extend(part.problems)
    report.bytes_read += part.bytes_read if segment.end is None and segment.start == 0 else segment.size
