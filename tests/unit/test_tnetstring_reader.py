"""The analyzer's own tnetstring decoder against mitmproxy's, on every record of the sample captures."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from mitmproxy.io import tnetstring

from mcp_blackbox.analyzer.read.load import ANALYSIS_FIELDS
from mcp_blackbox.analyzer.wire.tnetstring_reader import (
    ENCODED,
    FLOW_FIELDS,
    Encoded,
    RecordError,
    decode,
    read_record,
)

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))


def records(path: Path) -> list[bytes]:
    found = []
    with path.open("rb") as fo:
        handle = io.BufferedReader(fo)
        while (record := read_record(handle)) is not None:
            found.append(record)
    return found


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_whole_records_decode_as_mitmproxy_decodes_them(path: Path) -> None:
    for record in records(path):
        assert decode(record) == tnetstring.loads(record)


@pytest.mark.parametrize("want", [FLOW_FIELDS, ANALYSIS_FIELDS], ids=["report", "analysis"])
def test_selected_fields_are_those_of_the_whole_record(want: dict) -> None:
    def name(key: object) -> object:
        return key.decode() if isinstance(key, bytes) else key

    def selected(value: object, spec: object) -> object:
        if spec is True:
            return value
        assert isinstance(value, dict) and isinstance(spec, dict)
        kept = {k: v for k, v in value.items() if spec.get(name(k), False) not in (False, ENCODED)}
        return {k: selected(v, spec[name(k)]) for k, v in kept.items()}

    for path in SAMPLES:
        for record in records(path):
            assert selected(decode(record, want), want) == selected(tnetstring.loads(record), want)


def test_an_encoded_value_is_its_bytes_and_decodes_later() -> None:
    chunks = [[1.5, 81], [2.25, 286]]
    record = tnetstring.dumps({"stream": {"chunks": chunks, "ended": "complete"}})
    state = decode(record, {"stream": {"chunks": ENCODED, "ended": True}})
    kept = state["stream"]["chunks"]
    assert isinstance(kept, Encoded) and decode(kept) == chunks
    assert state["stream"]["ended"] == "complete"


@pytest.mark.parametrize(
    "bad",
    [b"5:ab,]", b"3:1:a]", b"9:3:abc,1:x]]", b"4:1:a,}", b"4:x:a,]", b"8:1:a,1:b?}", b"10:3:abc,1:x]]"],
    ids=["past-record", "item-past-list", "nested-past", "dict-missing-value", "bad-prefix", "bad-tag", "list-tail"],
)
def test_framing_errors_are_record_errors(bad: bytes) -> None:
    with pytest.raises(RecordError):
        decode(bad)
