"""Wall-clock times as people quote them in an incident: UTC, to the millisecond."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(t: float | None) -> str | None:
    """Epoch seconds as ISO-8601 in UTC with milliseconds: ``2026-12-01T18:44:30.123Z``."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def clock_utc(t: float) -> str:
    """The time of day alone, for lines that already name the date: ``18:44:30.123``."""
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]
