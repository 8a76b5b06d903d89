"""The analysis as pandas frames: dtypes a notebook can rely on, values as the export has them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.model.vocabulary import Outcome, Safety
from tests.analyzer.flows import error, exchange, result, rpc, text_result, tool_call, write

SAMPLES = Path(__file__).resolve().parents[2] / "sample_captures"


def test_calls_frame_keeps_ids_as_sent_and_codes_as_nullable_integers(tmp_path: Path) -> None:
    capture = write(
        tmp_path,
        exchange(rpc(1, "tools/list"), body=result(1, {"tools": []}), at=100.0),
        exchange(rpc("1", "tools/list"), body=error("1", -32601, "no"), at=101.0),
        exchange(tool_call(2, "echo"), body=result(2, text_result()), at=102.5),
    )
    frame = analyze([capture]).to_pandas()
    assert frame["jsonrpc_id"].dtype == object
    assert frame["jsonrpc_id"].tolist() == [1, "1", 2], "1 and '1' are different JSON-RPC ids"
    assert str(frame["error_code"].dtype) == "Int64"
    assert frame["error_code"].isna().tolist() == [True, False, True]
    assert frame["error_code"].iloc[1] == -32601
    assert str(frame["http_status"].dtype) == "Int64" and frame["http_status"].tolist() == [200, 200, 200]
    assert str(frame["t_start"].dtype) == "datetime64[ns, UTC]"
    assert frame["t_start"].iloc[2] == pd.Timestamp(102.5, unit="s", tz="UTC")
    assert frame["outcome"].dtype == "category"
    assert list(frame["outcome"].cat.categories) == [o.value for o in Outcome], "every outcome is a category"
    assert frame["outcome"].tolist() == ["SUCCESS", "JSONRPC_ERROR", "TOOL_SUCCESS"]
    assert frame["layer"].tolist() == ["application", "protocol", "application"]


def test_calls_frame_is_built_once() -> None:
    analysis = analyze([SAMPLES / "py-auth-retry.flows"])
    assert analysis.calls_frame is analysis.calls_frame
    assert len(analysis.calls_frame) == len(analysis.calls)


def test_retry_groups_frame_has_one_typed_row_per_group() -> None:
    analysis = analyze([SAMPLES / "py-app-retry-after-503.flows"])
    frame = analysis.retry_groups_to_pandas()
    records = [group.record() for group in analysis.retry_groups]
    assert len(frame) == len(records) >= 1
    assert frame["retry_group"].tolist() == [r["retry_group"] for r in records]
    assert frame["members"].tolist() == [r["members"] for r in records]
    assert str(frame["attempts"].dtype) == "Int64" and frame["failure_retry"].dtype == bool
    assert frame["safety"].dtype == "category" and set(frame["safety"].cat.categories) == {s.value for s in Safety}
    assert frame["safety"].tolist() == ["safe"]  # the 503 ran nothing: sending the write again was safe


def test_frames_of_an_empty_analysis_have_the_columns(tmp_path: Path) -> None:
    capture = write(tmp_path, exchange(rpc(1, "ping"), body=result(1, {}), at=1.0))
    analysis = analyze([capture])
    assert list(analysis.retry_groups_to_pandas().columns)[:3] == ["retry_group", "origin", "confidence"]
    assert analysis.retry_groups_to_pandas().empty
    assert len(analysis.to_pandas()) == 1
