"""Wall-clock times as people quote them in an incident: UTC, to the millisecond."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(t: float | None) -> str | None:
    """Epoch seconds as ISO-8601 in UTC with milliseconds: ``2026-12-01T18:44:30.123Z``.

    None for no time, and for a time outside years 1 to 9999 (a broken clock or a forged capture:
    the loader accepts any finite time, ISO-8601 does not)."""
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (ValueError, OverflowError, OSError):
        return None
