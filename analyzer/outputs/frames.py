"""The export's records as pandas frames, with dtypes a notebook can rely on.

Ids stay Python objects (JSON-RPC 1 and "1" are different ids), counts and codes are
nullable integers, outcomes, layers, origins, confidences and safety verdicts are
categoricals over the whole vocabulary (so a frame without TOOL_ERROR still has the
category), and times are UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from mcp_blackbox.analyzer.model.vocabulary import Confidence, Layer, Outcome, RetryOrigin, Safety
from mcp_blackbox.analyzer.outputs.call_record import COLUMNS

if TYPE_CHECKING:
    import pandas as pd

RETRY_GROUP_COLUMNS = [
    "retry_group", "origin", "confidence", "members", "attempts", "failure_retry", "total_ms",
    "final_outcome", "safety", "may_have_run_twice", "evidence",
]  # fmt: skip

_CALL_INTEGERS = ("http_status", "error_code", "sse_events", "attempt")
_CALL_CATEGORIES: dict[str, type[StrEnum]] = {
    "outcome": Outcome,
    "layer": Layer,
    "retry_origin": RetryOrigin,
    "retry_confidence": Confidence,
}
_GROUP_CATEGORIES: dict[str, type[StrEnum]] = {
    "origin": RetryOrigin,
    "confidence": Confidence,
    "final_outcome": Outcome,
    "safety": Safety,
}


def calls_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per call (export records), columns in the export's order."""
    import pandas as pd  # here, not at the top: pandas alone would double the CLI's memory

    frame = pd.DataFrame(list(records), columns=COLUMNS, dtype=object)
    for name in _CALL_INTEGERS:
        frame[name] = frame[name].astype("Int64")
    _categorize(frame, _CALL_CATEGORIES)
    for name in ("t_start", "t_end"):
        seconds = pd.to_numeric(frame[name], errors="coerce").astype("float64")
        frame[name] = pd.to_datetime(seconds, unit="s", utc=True).astype("datetime64[ns, UTC]")
    frame["duration_ms"] = pd.to_numeric(frame["duration_ms"], errors="coerce").astype("float64")
    return frame


def retry_groups_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per retry group (the export's ``retry_groups``)."""
    import pandas as pd

    frame = pd.DataFrame(list(records), columns=RETRY_GROUP_COLUMNS, dtype=object)
    frame["attempts"] = frame["attempts"].astype("Int64")
    frame["total_ms"] = pd.to_numeric(frame["total_ms"], errors="coerce").astype("float64")
    for name in ("failure_retry", "may_have_run_twice"):
        frame[name] = frame[name].astype("bool")
    _categorize(frame, _GROUP_CATEGORIES)
    return frame


def _categorize(frame: pd.DataFrame, categories: dict[str, type[StrEnum]]) -> None:
    import pandas as pd

    for name, vocabulary in categories.items():
        values = frame[name].map(lambda v: None if v is None else str(v))
        frame[name] = values.astype(pd.CategoricalDtype([member.value for member in vocabulary]))
