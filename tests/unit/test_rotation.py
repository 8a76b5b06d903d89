"""The addon's writer (addon/rotation.py): owner-only files, flow by flow, size rotation, retention."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest
from mitmproxy import exceptions
from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow
from mitmproxy.io import tnetstring
from mitmproxy.test import taddons, tflow

from mcp_blackbox.addon.rotation import (
    CaptureWriter,
    FlowFiles,
    Retention,
    parse_keep,
    parse_rotate_size,
    rotated_files,
    rotated_name,
)
from mcp_blackbox.analyzer.wire.recording import ENV as RECORDING_ENV
from mcp_blackbox.analyzer.wire.recording import METADATA_KEY as RECORDING_KEY
from tests.analyzer.flows import exchange, result, text_result, tool_call

START = 1_796_153_400.0  # 2026-12-01T19:30:00Z


def record(flow: HTTPFlow) -> bytes:
    return tnetstring.dumps(flow.get_state())


def read(path: Path) -> list[HTTPFlow]:
    with path.open("rb") as f:
        return [f for f in flow_io.FlowReader(f).stream() if isinstance(f, HTTPFlow)]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def call_flow(number: int) -> HTTPFlow:
    return exchange(tool_call(number, "echo"), body=result(number, text_result("x" * 200)))


def ticking(step: float = 1.0) -> object:
    counter = itertools.count()
    return lambda: START + step * next(counter)


def test_parse_keep_and_rotate_size() -> None:
    assert parse_keep("24") == Retention(files=24)
    assert parse_keep("1g") == Retention(budget=1024**3)
    assert parse_keep("500m") == Retention(budget=500 * 1024**2)
    assert parse_rotate_size("64m") == 64 * 1024**2
    for bad in ("0", "lots", "", "0m"):
        with pytest.raises(ValueError):
            parse_keep(bad)
    for bad in ("big", "0", ""):
        with pytest.raises(ValueError):
            parse_rotate_size(bad)


def test_rotated_names_carry_the_utc_start_and_sort_in_time_order() -> None:
    assert rotated_name(START, 1) == "mcp-20261201T193000Z-0001.flows"
    names = [rotated_name(START + t, n) for t, n in [(0, 1), (0, 2), (59, 3), (3600, 4), (86400 * 40, 10000)]]
    assert names == sorted(names)


def test_size_rotation_writes_whole_readable_owner_only_files(tmp_path: Path) -> None:
    files = FlowFiles(str(tmp_path / "caps"), directory=True, rotate_size=2000, clock=ticking())
    flows = [call_flow(n) for n in range(20)]
    for flow in flows:
        files.write(record(flow))
    files.close()
    written = rotated_files(tmp_path / "caps")
    assert len(written) > 3
    assert [p.name for p in written] == sorted(p.name for p in written)
    assert written[0].name == "mcp-20261201T193000Z-0001.flows"
    read_back = []
    for path in written:
        assert mode(path) == 0o600, path
        in_file = read(path)
        assert in_file, f"{path} is empty"
        read_back += in_file
        # Rotated once past the size: no file but the last holds more than one flow beyond it.
        assert path == written[-1] or path.stat().st_size - len(record(in_file[-1])) < 2000
    assert [f.id for f in read_back] == [f.id for f in flows]
    assert mode(tmp_path / "caps") == 0o700


def test_retention_keeps_the_newest_n_files(tmp_path: Path) -> None:
    files = FlowFiles(str(tmp_path), directory=True, rotate_size=1, keep=Retention(files=3), clock=ticking())
    flows = [call_flow(n) for n in range(10)]
    for flow in flows:
        files.write(record(flow))  # one flow per file
    kept = rotated_files(tmp_path)
    assert [p.name.rsplit("-", 1)[1] for p in kept] == ["0008.flows", "0009.flows", "0010.flows"]
    assert [read(p)[0].id for p in kept] == [f.id for f in flows[-3:]]


def test_retention_by_budget_deletes_oldest_first_and_never_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a capture")
    (tmp_path / "capture.flows").write_bytes(b"")
    # Records differ by a few bytes (their timestamps' digits): the budget fits exactly the last three.
    records = [record(call_flow(n)) for n in range(8)]
    budget = sum(len(r) for r in records[-3:]) + 10
    files = FlowFiles(str(tmp_path), directory=True, rotate_size=1, keep=Retention(budget=budget))
    files.clock = ticking()
    for one in records:
        files.write(one)
    kept = rotated_files(tmp_path)
    assert len(kept) == 3 and sum(p.stat().st_size for p in kept) <= budget
    assert kept[-1].name.endswith("-0008.flows")
    assert (tmp_path / "notes.txt").exists() and (tmp_path / "capture.flows").exists()


def test_retention_counts_files_left_by_an_earlier_run(tmp_path: Path) -> None:
    for n in range(5):
        (tmp_path / rotated_name(START - 3600, n + 1)).write_bytes(b"")
    files = FlowFiles(str(tmp_path), directory=True, keep=Retention(files=2), clock=ticking())
    files.write(record(call_flow(0)))
    kept = rotated_files(tmp_path)
    assert [p.name for p in kept] == [rotated_name(START - 3600, 5), rotated_name(START, 1)]


def test_a_name_taken_in_the_same_second_gets_the_next_number(tmp_path: Path) -> None:
    (tmp_path / rotated_name(START, 1)).write_bytes(b"earlier run")
    files = FlowFiles(str(tmp_path), directory=True, clock=lambda: START)
    files.write(record(call_flow(0)))
    files.close()
    assert (tmp_path / rotated_name(START, 1)).read_bytes() == b"earlier run"
    assert len(read(tmp_path / rotated_name(START, 2))) == 1


def test_single_file_is_made_owner_only_even_when_it_existed(tmp_path: Path) -> None:
    path = tmp_path / "capture.flows"
    path.write_bytes(b"old capture")
    path.chmod(0o644)
    files = FlowFiles(str(path), directory=False)
    files.open_now()
    files.write(record(call_flow(0)))
    files.close()
    assert mode(path) == 0o600 and len(read(path)) == 1


def test_a_reloaded_writer_appends_to_the_file_this_process_was_writing(tmp_path: Path) -> None:
    path, opened = tmp_path / "capture.flows", set[str]()
    first = FlowFiles(str(path), directory=False, reopen=opened)
    first.write(record(call_flow(0)))
    first.close()
    second = FlowFiles(str(path), directory=False, reopen=opened)  # mitmproxy reloaded the script
    second.write(record(call_flow(1)))
    second.close()
    assert len(read(path)) == 2


def test_strftime_fields_start_a_new_file_when_the_name_changes(tmp_path: Path) -> None:
    clock = iter([START, START + 1, START + 3600, START + 3601])
    files = FlowFiles(str(tmp_path / "mcp-%Y%m%d%H.flows"), directory=False, clock=lambda: next(clock))
    for n in range(4):
        files.write(record(call_flow(n)))
    files.close()
    written = sorted(tmp_path.glob("mcp-*.flows"))
    assert [len(read(p)) for p in written] == [2, 2] and all(mode(p) == 0o600 for p in written)


def test_a_failed_write_leaves_no_half_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "capture.flows"
    files = FlowFiles(str(path), directory=False)
    files.write(record(call_flow(0)))
    real_write = os.write
    calls = iter([True, False])

    def disk_fills(fd: int, data: memoryview) -> int:
        if next(calls):
            return real_write(fd, data[:10])  # a short write, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("mcp_blackbox.addon.rotation.os.write", disk_fills)
    with pytest.raises(OSError):
        files.write(record(call_flow(1)))
    monkeypatch.undo()
    files.write(record(call_flow(2)))
    files.close()
    assert len(read(path)) == 2


# ---------------------------------------------------------------- the addon


def test_writer_addon_writes_each_flow_as_it_ends_and_open_ones_at_done(tmp_path: Path) -> None:
    writer = CaptureWriter()
    path = tmp_path / "capture.flows"
    with taddons.context(writer) as tctx:
        tctx.configure(writer, mcp_write=str(path))
        assert not path.exists(), "nothing is created before the proxy listens"
        writer.running()
        assert path.exists() and mode(path) == 0o600
        done, still_open = call_flow(0), tflow.tflow()
        writer.request(done)
        writer.request(still_open)
        writer.response(done)
        assert [f.id for f in read(path)] == [done.id], "written when it ended, before mitmdump stops"
        failed = tflow.tflow(err=True)
        writer.error(failed)
        writer.done()
    assert [f.id for f in read(path)] == [done.id, failed.id, still_open.id]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mcp_rotate_size": "64m"}, "mcp_rotate_size needs mcp_write"),
        ({"mcp_write": "DIR", "mcp_rotate_size": "huge"}, "mcp_rotate_size: 'huge' is not a size"),
        ({"mcp_write": "DIR", "mcp_keep": "-1"}, "mcp_keep: "),
        ({"mcp_write": "DIR", "mcp_rotate_size": "64m", "mcp_keep": "1m"}, "no closed file would be kept"),
        ({"mcp_write": "DIR/%H", "mcp_keep": "3"}, "no strftime fields"),
        ({"mcp_write": "FILE", "mcp_keep": "3"}, "is a file; rotated files need a directory"),
    ],
)
def test_writer_options_are_checked_at_start_up(tmp_path: Path, options: dict[str, str], message: str) -> None:
    (tmp_path / "file").write_bytes(b"")
    given = {
        k: v.replace("DIR", str(tmp_path / "caps")).replace("FILE", str(tmp_path / "file")) for k, v in options.items()
    }
    writer = CaptureWriter()
    with taddons.context(writer) as tctx, pytest.raises(exceptions.OptionsError, match=message):
        tctx.configure(writer, **given)


def test_writer_addon_rotates_into_a_directory(tmp_path: Path) -> None:
    writer = CaptureWriter()
    with taddons.context(writer) as tctx:
        tctx.configure(writer, mcp_write=str(tmp_path / "caps"), mcp_rotate_size="1k", mcp_keep="100")
        writer.running()
        assert not (tmp_path / "caps").exists() or not rotated_files(tmp_path / "caps"), "no empty file at start"
        flows = [call_flow(n) for n in range(12)]
        for flow in flows:
            writer.request(flow)
            writer.response(flow)
        writer.done()
    written = rotated_files(tmp_path / "caps")
    assert len(written) > 1
    assert [f.id for p in written for f in read(p)] == [f.id for f in flows]


def write_rotated(directory: Path, count: int) -> list[HTTPFlow]:
    """One run of the writer addon rotating ``count`` flows into ``directory``."""
    writer = CaptureWriter()
    flows = [call_flow(n) for n in range(count)]
    with taddons.context(writer) as tctx:
        tctx.configure(writer, mcp_write=str(directory), mcp_rotate_size="1k", mcp_keep="100")
        writer.running()
        for flow in flows:
            writer.request(flow)
            writer.response(flow)
        writer.done()
    return flows


def test_the_first_flow_of_each_file_names_the_recording_and_its_number(tmp_path: Path) -> None:
    """Two runs into one directory: each file's first flow carries its run's id and its number in the run;
    the other flows carry nothing, and the live flows are left as they were."""
    flows = write_rotated(tmp_path / "caps", 6)
    first_run = rotated_files(tmp_path / "caps")
    write_rotated(tmp_path / "caps", 4)
    second_run = [p for p in rotated_files(tmp_path / "caps") if p not in first_run]
    assert len(first_run) > 1 and len(second_run) > 1
    assert all(RECORDING_KEY not in flow.metadata for flow in flows), "the live flow is not touched"

    def markers(paths: list[Path]) -> list[tuple[str, int]]:
        found = []
        for path in paths:
            head, *rest = read(path)
            assert all(RECORDING_KEY not in flow.metadata for flow in rest)
            found.append((head.metadata[RECORDING_KEY]["id"], head.metadata[RECORDING_KEY]["file"]))
        return found

    first, second = markers(first_run), markers(second_run)
    assert [n for _, n in first] == list(range(1, len(first_run) + 1))
    assert [n for _, n in second] == list(range(1, len(second_run) + 1))
    assert len({i for i, _ in first}) == 1 and len({i for i, _ in second}) == 1
    assert first[0][0] != second[0][0], "two runs of the recorder are two recordings"


def test_a_recording_handed_down_by_run_names_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RECORDING_ENV, "f" * 32)
    write_rotated(tmp_path / "caps", 3)
    heads = [read(path)[0] for path in rotated_files(tmp_path / "caps")]
    assert {h.metadata[RECORDING_KEY]["id"] for h in heads} == {"f" * 32}
