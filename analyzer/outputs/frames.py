"""The export's records as pandas frames, with dtypes a notebook can rely on.

The dtypes are read off the records' types (analyzer/model/contract.py), so a field added there gets its
column and its dtype here: ids stay Python objects (JSON-RPC 1 and "1" are different ids), counts and
codes (``int``) are nullable integers, vocabulary fields (a ``StrEnum``) are categoricals over the whole
vocabulary (so a frame without TOOL_ERROR still has the category), epoch seconds (``EpochSeconds``) are
UTC datetimes, other floats float64, flags bool, anything else a Python object.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Final

from mcp_blackbox.analyzer.model import contract
from mcp_blackbox.analyzer.model.contract import CALL_COLUMNS, RETRY_GROUP_COLUMNS, CallRecord, RetryGroupRecord

if TYPE_CHECKING:
    import pandas as pd

# The kinds of column a frame has, by the field's type (``column_kinds``).
INTEGER: Final = "Int64"
FLOAT: Final = "float64"
TIME: Final = "datetime64[ns, UTC]"
BOOLEAN: Final = "bool"
OBJECT: Final = "object"


def column_kinds(record_type: type) -> dict[str, str | type[StrEnum]]:
    """Each field of a record type -> its column's kind: one of the names above, or the vocabulary
    (a ``StrEnum``) whose members are the column's categories."""
    hints = typing.get_type_hints(record_type, include_extras=True)  # resolved in the type's own module
    return {name: _kind(hint) for name, hint in hints.items()}


def _kind(hint: Any) -> str | type[StrEnum]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None: X's column, with missing values
        present = [arm for arm in typing.get_args(hint) if arm is not type(None)]
        return _kind(present[0]) if len(present) == 1 else OBJECT
    if typing.get_origin(hint) is Annotated:
        base, *marks = typing.get_args(hint)
        return TIME if contract.EpochSeconds in marks else _kind(base)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return hint
    # bool before int: a bool is an int to issubclass, not to a frame.
    return {bool: BOOLEAN, int: INTEGER, float: FLOAT}.get(hint, OBJECT) if isinstance(hint, type) else OBJECT


CALL_KINDS = column_kinds(CallRecord)
RETRY_GROUP_KINDS = column_kinds(RetryGroupRecord)


def calls_frame(records: Iterable[CallRecord]) -> pd.DataFrame:
    """One row per call (export records), columns in the export's order."""
    return _frame(records, CALL_COLUMNS, CALL_KINDS)


def retry_groups_frame(records: Iterable[RetryGroupRecord]) -> pd.DataFrame:
    """One row per retry group (the export's ``retry_groups``)."""
    return _frame(records, RETRY_GROUP_COLUMNS, RETRY_GROUP_KINDS)


def _frame(records: Iterable[Any], columns: tuple[str, ...], kinds: dict[str, str | type[StrEnum]]) -> pd.DataFrame:
    import pandas as pd  # here, not at the top: pandas alone would double the CLI's memory

    frame = pd.DataFrame(list(records), columns=list(columns), dtype=object)
    for name, kind in kinds.items():
        if isinstance(kind, type):
            values = frame[name].map(lambda v: None if v is None else str(v))
            frame[name] = values.astype(pd.CategoricalDtype([member.value for member in kind]))
        elif kind == TIME:
            seconds = pd.to_numeric(frame[name], errors="coerce").astype("float64")
            frame[name] = pd.to_datetime(seconds, unit="s", utc=True).astype(TIME)
        elif kind == FLOAT:
            frame[name] = pd.to_numeric(frame[name], errors="coerce").astype(FLOAT)
        elif kind == INTEGER:
            frame[name] = frame[name].astype(INTEGER)
        elif kind == BOOLEAN:
            frame[name] = frame[name].astype(BOOLEAN)
    return frame
