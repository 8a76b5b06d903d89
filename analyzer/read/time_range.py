"""``--since`` / ``--until``: the part of a capture an incident needs, for every analysis command (issue 22).

One module holds the range (``TimeRange``), the parsing of its two values, the cheap bounds of a capture
file and the choice of the files to decode; ``CallStream`` (analyzer/across/call_stream.py) applies it
and every output says it (``TimeRange.describe``, ``CallStream.range_record``).

A call is in the range when it *started* in [since, until). The analysis still reads ``MARGIN`` seconds of
capture on each side, so that what decides a call at an edge is there: an attempt retried within the
range after a failure before it (RETRY_WINDOW, 300 s), the client it came from (idle within the retry
window), answers and later attempts that come after ``until``, and flows open across an edge (a window,
DEFAULT_WINDOW, 600 s). Files wholly outside the range and its margins are not decoded.

Values: an ISO-8601 time in UTC (``2026-12-01T19:30:00Z``, ``2026-12-01T19:30Z``; an explicit offset is
converted to UTC; no offset is read as UTC), or a UTC time of day (``19:30``, ``19:30:15``), which names
that time on the one UTC day the captures span, and is refused when they span more (or when a file's
times cannot be told cheaply).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer.wire.inputs import ROTATED_NAME
from mcp_blackbox.analyzer.wire.tnetstring_reader import RecordError, Want, decode, framed_records

# RETRY_WINDOW (analyzer/across/retries.py) + DEFAULT_WINDOW (analyzer/across/call_stream.py): a retry's
# earlier attempt, and a flow open across the edge. A lower layer cannot import them; test_time_range checks.
MARGIN = 900.0
TIME_OF_DAY = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
ROTATED_START = re.compile(r"^mcp-(\d{8}T\d{6}Z)-\d+\.flows$")
# What is decoded of a flow record to date it: when it ended (flows are written when they end).
_TIMES: Want = {
    "timestamp_created": True,
    "request": {"timestamp_start": True},
    "response": {"timestamp_end": True},
    "error": {"timestamp": True},
}


class RangeError(ValueError):
    """A --since/--until the command cannot use: said in one line, exit 2, before any analysis."""


@dataclass(frozen=True, slots=True)
class TimeRange:
    """[since, until) in epoch seconds; either end may be open (None)."""

    since: float | None = None
    until: float | None = None

    def contains(self, t: float) -> bool:
        return (self.since is None or t >= self.since) and (self.until is None or t < self.until)

    def edge_crossed(self, start: float, end: float | None) -> str | None:
        """The edge a call from ``start`` to ``end`` straddles ("since" or "until"), if any."""
        if end is None:
            return None
        if self.since is not None and start < self.since < end:
            return "since"
        if self.until is not None and self.contains(start) and end > self.until:
            return "until"
        return None

    def read_bounds(self) -> tuple[float, float]:
        """The capture time read: the range and MARGIN on each side."""
        low = float("-inf") if self.since is None else self.since - MARGIN
        high = float("inf") if self.until is None else self.until + MARGIN
        return low, high

    def describe(self) -> str:
        """``calls from 19:30:00 to 19:40:00 UTC on 2026-12-01 (--since/--until)``: what every output says."""
        since, until = _utc(self.since), _utc(self.until)
        options = "/".join(name for name, v in (("--since", since), ("--until", until)) if v is not None)
        if since is not None and until is not None:
            if since.date() == until.date() or until == datetime.combine(since.date() + timedelta(1), time(), UTC):
                span = f"from {since:%H:%M:%S} to {until:%H:%M:%S} UTC on {since:%Y-%m-%d}"
            else:
                span = f"from {since:%Y-%m-%d %H:%M:%S} to {until:%Y-%m-%d %H:%M:%S} UTC"
        elif since is not None:
            span = f"from {since:%Y-%m-%d %H:%M:%S} UTC on"
        else:
            assert until is not None
            span = f"before {until:%Y-%m-%d %H:%M:%S} UTC"
        return f"calls {span} ({options})"

    def record(self) -> dict[str, str | None]:
        """since and until as ISO-8601 UTC, to the millisecond (as the export's started_at)."""
        return {"since": _iso(self.since), "until": _iso(self.until)}


def _utc(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)


def _iso(t: float | None) -> str | None:
    found = _utc(t)
    return None if found is None else found.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------------- parsing


@dataclass(frozen=True, slots=True)
class TimeOfDay:
    """A time of day in UTC, as seconds after midnight: resolved on the captures' one day."""

    seconds: int


def parse_value(option: str, text: str) -> float | TimeOfDay:
    """An ISO-8601 time (epoch seconds) or a UTC time of day; RangeError says why neither."""
    match = TIME_OF_DAY.match(text.strip())
    if match:
        hours, minutes, seconds = (int(part or 0) for part in match.groups())
        if hours > 23 or minutes > 59 or seconds > 59:
            raise RangeError(f"{option} {text}: not a time of day (HH:MM or HH:MM:SS, UTC)")
        return TimeOfDay(hours * 3600 + minutes * 60 + seconds)
    try:
        # Python 3.11+ reads "Z", offsets and times without seconds.
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise RangeError(
            f"{option} {text}: not an ISO-8601 time (2026-12-01T19:30:00Z) or a UTC time of day (19:30)"
        ) from None
    if "T" not in text.upper() and " " not in text.strip():
        raise RangeError(f"{option} {text}: a date alone is not a time: give 2026-12-01T00:00Z")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # documented: no offset is UTC, as every output prints it
    return moment.timestamp()


def resolve(since: str | None, until: str | None, files: Sequence[str]) -> TimeRange | None:
    """The range the options name for these (expanded) capture files; None when neither is given.

    A time of day is placed on the one UTC day the files span; RangeError when they span more than one,
    when a file's span cannot be told without decoding it, or when until is not after since."""
    if since is None and until is None:
        return None
    values = [
        None if text is None else parse_value(option, text) for option, text in (("--since", since), ("--until", until))
    ]
    day = _capture_day(files) if any(isinstance(v, TimeOfDay) for v in values) else None
    start, end = (_on_day(v, day) for v in values)
    if start is not None and end is not None and end <= start:
        raise RangeError(f"--until {until} is not after --since {since}: the range holds no time")
    return TimeRange(start, end)


def _on_day(value: float | TimeOfDay | None, day: date | None) -> float | None:
    if isinstance(value, TimeOfDay):
        assert day is not None
        return datetime.combine(day, time(), UTC).timestamp() + value.seconds
    return value


def _capture_day(files: Sequence[str]) -> date:
    """The one UTC day the files span; RangeError otherwise."""
    days: set[date] = set()
    for path in files:
        span = file_span(path, _next_rotated(files, path))
        if span is None:
            raise RangeError(
                f"a time of day needs the captures' day, and {path}'s times cannot be read cheaply: "
                "give the date too (2026-12-01T19:30:00Z)"
            )
        days.update(datetime.fromtimestamp(t, UTC).date() for t in span)
    if len(days) != 1:
        listed = ", ".join(str(d) for d in sorted(days))
        raise RangeError(f"a time of day is ambiguous: the captures span {listed} (UTC): give the date too")
    return days.pop()


# ---------------------------------------------------------------------------- which files to decode


def files_to_read(files: Sequence[str], time_range: TimeRange) -> tuple[list[str], list[str]]:
    """(the files to decode, the files wholly outside the range and its margins), each in order.

    A file is left out only when its span is known cheaply (``file_span``) and ends before the read
    bounds or starts after them; a file whose span cannot be told (HAR, stdio, a damaged flow file) is
    read, and its calls cut like the others'."""
    low, high = time_range.read_bounds()
    kept: list[str] = []
    left_out: list[str] = []
    for path in files:
        span = file_span(path, _next_rotated(files, path))
        outside = span is not None and (span[1] < low or span[0] > high)
        (left_out if outside else kept).append(path)
    return kept, left_out


def _next_rotated(files: Sequence[str], path: str) -> str | None:
    """The rotated file that follows ``path`` in its directory among ``files`` (names sort by start)."""
    if not ROTATED_NAME.match(Path(path).name):
        return None
    directory = Path(path).parent
    later = [f for f in files if Path(f).parent == directory and ROTATED_NAME.match(Path(f).name) and f > path]
    return min(later, default=None)


def file_span(path: str, next_rotated: str | None = None) -> tuple[float, float] | None:
    """(first, last) time a capture file's flows ended, found without decoding the file; None: unknown.

    Chosen, cheapest first: a rotated file (mcp-<UTC start>-<n>.flows) is opened when its first flow
    ends, and the next rotated file when its last flow has ended, so two names bound it without opening
    it (one second added: the names keep whole seconds). Otherwise (the last rotated file, any other flow
    file) the first record and the last one are decoded, their times only; the last is found by walking
    the length prefixes (tnetstring_reader.framed_records, as parallel._record_cuts does), never by
    decoding the records between. Flows are written when they end, so those two bound the file."""
    start = _rotated_start(path)
    if start is not None and next_rotated is not None and (end := _rotated_start(next_rotated)) is not None:
        return start, end + 1.0
    found = _first_and_last_end(path)
    if found is None or start is None:
        return found
    return min(start, found[0]), found[1]


def _rotated_start(path: str) -> float | None:
    match = ROTATED_START.match(Path(path).name)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()


def _first_and_last_end(path: str) -> tuple[float, float] | None:
    """When the first and the last flow of a flow file ended; None where the framing or a time fails."""
    offsets = _record_offsets(path)
    if not offsets:
        return None
    with contextlib.suppress(OSError, RecordError, ValueError, TypeError, AttributeError, RecursionError):
        with open(path, "rb", buffering=0) as handle:
            first = _ended(handle.fileno(), *offsets[0])
            last = _ended(handle.fileno(), *offsets[-1])
        if first is not None and last is not None:
            return first, last
    return None


def _record_offsets(path: str) -> list[tuple[int, int]]:
    """(offset, length) of the payload of the file's first and last records; [] when the framing breaks
    anywhere (the file is then read whole, and its reader says where)."""
    try:
        with open(path, "rb", buffering=0) as handle:
            fd = handle.fileno()
            size = os.fstat(fd).st_size
            if size == 0 or not os.pread(fd, 1, 0).isdigit():
                return []  # HAR's JSON, a stdio capture, an empty file
            first: tuple[int, int] | None = None
            last, end = (0, 0), 0
            for offset, end in framed_records(fd, size):
                last = (offset, end - offset)
                first = first or last
            return [first, last] if first is not None and end == size else []
    except OSError:
        return []


def _ended(fd: int, offset: int, length: int) -> float | None:
    """When the flow of the record at ``offset`` ended (its response's end, its error, else its start)."""
    record = os.pread(fd, length, offset)
    state = decode(record, _TIMES)
    request, response, error = (state.get(k) or {} for k in ("request", "response", "error"))
    for value in (response.get("timestamp_end"), error.get("timestamp"), request.get("timestamp_start")):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    created = state.get("timestamp_created")
    return float(created) if isinstance(created, int | float) else None


def range_lines(time_range: TimeRange | None, record: dict[str, Any] | None) -> list[str]:
    """What a summary, the check line's log and export's stderr say of the range: the range, then the
    calls that straddle an edge and the files not decoded (each line only when there are any)."""
    if time_range is None or record is None:
        return []
    lines = [time_range.describe()]
    if record["straddling"]:
        named = ", ".join(f"{s['call_id']} ({s['edge']})" for s in record["straddling"][:20])
        more = f" and {len(record['straddling']) - 20} more" if len(record["straddling"]) > 20 else ""
        lines.append(f"straddling an edge (started before it, ended after): {named}{more}")
    if record["captures_not_read"]:
        lines.append(f"{len(record['captures_not_read'])} capture file(s) wholly outside the range: not read")
    return lines
