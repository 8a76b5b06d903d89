"""The compiled flow-record decoder (setup.py builds it with mypyc) decodes exactly as its Python source does.

``make test`` installs the package where a C compiler is, so the compiled decoder must be there; each record of
every sample capture and of a synthetic one, whole and field-selected, and damaged records too, must come out
the same from both: the same values of the same types (an ``Encoded`` where the source keeps one), the same
error with the same words. The reader uses a build only beside the source it was built from.
"""

from __future__ import annotations

import importlib
import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcp_blackbox.analyzer.read.load import ANALYSIS_FIELDS
from mcp_blackbox.analyzer.wire import tnetstring_decoder, tnetstring_reader
from mcp_blackbox.analyzer.wire.tnetstring_reader import FLOW_FIELDS, FLOW_ID
from tests.benchmarks import synthetic_capture
from tests.unit.test_tnetstring_reader import records

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))
WANTS = {"whole": True, "report": FLOW_FIELDS, "analysis": ANALYSIS_FIELDS, "id": FLOW_ID}


@pytest.fixture(scope="module")
def compiled() -> ModuleType:
    module = tnetstring_reader.compiled_decoder()
    assert module is not None, (
        "no compiled decoder beside analyzer/wire/tnetstring_decoder.py: make test installs the package with "
        "mypyc and a C compiler (pip install -e . builds it; MCP_BLACKBOX_PURE or MCP_BLACKBOX_PURE_READER unset)"
    )
    return module


@pytest.fixture(scope="module")
def all_records(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    synthetic = tmp_path_factory.mktemp("compiled") / "synthetic.flows"
    synthetic_capture.generate(synthetic, 300, seed=4)
    return [record for path in [*SAMPLES, synthetic] for record in records(path)]


def typed(value: Any) -> Any:
    """The value with every part's type beside it: 1 and 1.0 and True, bytes and Encoded, told apart."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    return (type(value).__name__, value)


def outcome(decode: Any, record: bytes, want: Any) -> Any:
    try:
        return typed(decode(record, want))
    except Exception as e:  # the same error class and words from both
        return ("raised", type(e).__module__, type(e).__qualname__, str(e))


def test_the_reader_uses_the_compiled_decoder(compiled: ModuleType) -> None:
    assert tnetstring_reader.COMPILED and tnetstring_reader.decode is compiled.decode
    assert compiled.decode is not tnetstring_decoder.decode


@pytest.mark.parametrize("want", WANTS.values(), ids=list(WANTS))
def test_every_record_decodes_alike(compiled: ModuleType, all_records: list[bytes], want: Any) -> None:
    assert len(all_records) > 400
    for record in all_records:
        assert outcome(compiled.decode, record, want) == outcome(tnetstring_decoder.decode, record, want)


def test_damaged_records_fail_alike(compiled: ModuleType, all_records: list[bytes]) -> None:
    """Cut short, a byte changed, a length prefix changed: the same value or the same error."""
    chosen = random.Random(7)
    failed = 0
    for record in chosen.sample(all_records, 60):
        damaged = [record[: chosen.randrange(len(record))], b"9" + record[1:], record + b"x"]
        spot = chosen.randrange(len(record))
        damaged.append(record[:spot] + bytes([chosen.randrange(256)]) + record[spot + 1 :])
        for bad in damaged:
            for want in WANTS.values():
                expected = outcome(tnetstring_decoder.decode, bad, want)
                assert outcome(compiled.decode, bad, want) == expected
                failed += expected[0] == "raised"
    assert failed > 100, "the damage made errors to compare"


def test_a_build_from_another_source_is_not_used(
    compiled: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editable checkout whose decoder was edited after its build runs the edited source."""
    edited = tmp_path / "tnetstring_decoder.py"
    edited.write_bytes(Path(tnetstring_decoder.__file__).read_bytes() + b"\n# edited\n")
    monkeypatch.setattr(tnetstring_decoder, "__file__", str(edited))
    assert tnetstring_reader.compiled_decoder() is None
    monkeypatch.undo()
    assert tnetstring_reader.compiled_decoder() is compiled


def test_the_source_can_be_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tnetstring_reader.PURE_ENV, "1")
    assert tnetstring_reader.compiled_decoder() is None
    reloaded = importlib.reload(tnetstring_reader)
    try:
        assert not reloaded.COMPILED and reloaded.decode is tnetstring_decoder.decode
    finally:
        monkeypatch.delenv(tnetstring_reader.PURE_ENV)
        importlib.reload(tnetstring_reader)
