"""Capture arguments (analyzer/wire/inputs.py) and the `record` command line (cli/main.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.wire.inputs import expand_captures, passed_over
from mcp_blackbox.cli.main import build_parser, main, port_in_use, record_command
from tests.analyzer.flows import exchange, result, text_result, tool_call, write


def test_a_directory_is_its_flows_files_by_name(tmp_path: Path) -> None:
    for name in ["mcp-20261201T193500Z-0002.flows", "mcp-20261201T193000Z-0001.flows", "notes.txt", ".x.flows"]:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.flows").mkdir()
    assert expand_captures([tmp_path]) == [
        str(tmp_path / "mcp-20261201T193000Z-0001.flows"),
        str(tmp_path / "mcp-20261201T193500Z-0002.flows"),
    ]
    assert passed_over([tmp_path]) == [f"{tmp_path / 'notes.txt'}: not read: empty"]


def test_a_directory_is_read_by_content_whatever_mitmproxy_named_its_files(tmp_path: Path) -> None:
    """mitmdump -w writes any name it is given: a .mitm file and one with no suffix are flow files. Look-alikes:
    a HAR and a text file beside them are passed over, each said with its reason."""
    write(tmp_path, exchange(tool_call(1, "echo"), body=result(1, text_result()), at=1.0), name="a.mitm")
    write(tmp_path, exchange(tool_call(2, "add"), body=result(2, text_result()), at=2.0), name="dump")
    (tmp_path / "export.har").write_text('{"log": {"entries": []}}')
    (tmp_path / "README").write_text("12 notes: not a flow file")
    stdio = Path(__file__).resolve().parents[2] / "sample_captures" / "stdio-faults.stdio.jsonl"
    (tmp_path / "server-run-1.log").write_bytes(stdio.read_bytes())  # a stdio capture under another name
    expected = [str(tmp_path / name) for name in ("a.mitm", "dump", "server-run-1.log")]
    assert expand_captures([tmp_path]) == expected
    analysis = analyze([tmp_path])
    assert {"add", "echo"} <= {c["tool"] for c in analysis.calls} and not analysis.read_problems
    assert any(c["carrier"] == "stdio" for c in analysis.calls)
    said = [note for note in analysis.notes if ": not read: " in note]
    assert said == [
        f"{tmp_path / 'README'}: not read: not a flow file or a stdio capture",
        f"{tmp_path / 'export.har'}: not read: JSON, not a flow file or a stdio capture (a HAR file is read when "
        "it is named)",
    ]


def test_a_quoted_glob_is_its_matches_and_the_rest_is_left_for_the_loader(tmp_path: Path) -> None:
    for name in ["b.flows", "a.flows"]:
        (tmp_path / name).write_bytes(b"")
    assert expand_captures([f"{tmp_path}/*.flows"]) == [str(tmp_path / "a.flows"), str(tmp_path / "b.flows")]
    assert expand_captures([f"{tmp_path}/*.har", "missing.flows"]) == [f"{tmp_path}/*.har", "missing.flows"]
    once = expand_captures([tmp_path])
    assert expand_captures(once) == once


def test_an_answer_in_a_later_file_is_joined_to_its_call(tmp_path: Path) -> None:
    """A stream written when it ends (the later file) answers calls written in earlier files."""
    session = {"mcp-session-id": "s1"}
    accepted = [exchange(tool_call(n, "echo"), status=202, at=10.0 + n, request_headers=session) for n in range(1, 4)]
    answers = b"".join(
        b"event: message\ndata: " + json.dumps(result(n, text_result("ok"))).encode() + b"\n\n" for n in range(1, 4)
    )
    stream = exchange(
        None,
        method="GET",
        body=answers,
        content_type="text/event-stream",
        at=9.0,
        duration=20.0,
        request_headers=session,
    )
    write(tmp_path, accepted[0], name="mcp-20261201T193000Z-0001.flows")
    write(tmp_path, *accepted[1:], name="mcp-20261201T193010Z-0002.flows")
    write(tmp_path, stream, name="mcp-20261201T193020Z-0003.flows")
    analysis = analyze([tmp_path])
    outcomes = {c["jsonrpc_id"]: c["outcome"] for c in analysis.calls if c["method"] == "tools/call"}
    assert outcomes == {1: "TOOL_SUCCESS", 2: "TOOL_SUCCESS", 3: "TOOL_SUCCESS"}
    assert analysis.flows_read == 4 and not analysis.read_problems


def test_a_directory_without_captures_is_said(tmp_path: Path) -> None:
    analysis = analyze([tmp_path])
    assert [p["reason"] for p in analysis.read_problems] == ["a directory without a flow file or a stdio capture in it"]


def test_cli_commands_take_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, exchange(tool_call(1, "echo"), body=result(1, text_result())), name="mcp-a.flows")
    write(tmp_path, exchange(tool_call(2, "add"), body=result(2, text_result())), name="mcp-b.flows")
    assert main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 calls in 2 exchanges"), out


def record_args(*argv: str) -> list[str]:
    args = build_parser().parse_args(["record", "--upstream", "http://127.0.0.1:8000", "-w", "caps", *argv])
    if args.mitmdump_args[:1] == ["--"]:
        args.mitmdump_args = args.mitmdump_args[1:]
    return record_command(args)


def settings(command: list[str]) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--set"]


def test_record_writes_with_the_addon_and_connects_lazily() -> None:
    command = record_args()
    assert "--save-stream-file" not in command and "-w" not in command
    assert settings(command) == ["mcp_write=caps", "connection_strategy=lazy"]
    rotating = settings(record_args("--rotate-size", "64m", "--keep", "1g"))
    assert rotating[:3] == ["mcp_write=caps", "mcp_rotate_size=64m", "mcp_keep=1g"]


def test_record_leaves_the_users_connection_strategy_alone() -> None:
    command = record_args("--", "--set", "connection_strategy=eager")
    assert "connection_strategy=lazy" not in command and command[-1] == "connection_strategy=eager"


def test_port_in_use() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
    assert not port_in_use("127.0.0.1", port)


def test_a_clients_sessions_in_two_rotated_files_are_one_lineage_and_two_recordings_are_not(tmp_path: Path) -> None:
    """The sample's application retries its failed write in a fresh session. Cut into two rotated files of one
    recording, the retry is still linked; as two separate recordings (any other names), it is not: lineages
    never join clients of two recordings."""
    from mitmproxy import io as flow_io
    from mitmproxy.http import HTTPFlow

    from mcp_blackbox.analyzer.outputs.analysis import analyze

    sample = Path(__file__).resolve().parents[2] / "sample_captures" / "py-app-retry-after-503.flows"
    with sample.open("rb") as f:
        flows = [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]
    sessions = list(dict.fromkeys(f.response.headers.get("mcp-session-id") for f in flows if f.response))
    first = [f for f in flows if f.response is None or f.response.headers.get("mcp-session-id") != sessions[-1]]
    second = [f for f in flows if f not in first]
    assert first and second

    def write_pair(folder: Path, names: tuple[str, str]) -> Path:
        folder.mkdir()
        for name, part in zip(names, (first, second), strict=True):
            with (folder / name).open("wb") as out:
                writer = flow_io.FlowWriter(out)
                for flow in part:
                    writer.add(flow)
        return folder

    whole = analyze([str(sample)])
    rotated = analyze(
        [str(write_pair(tmp_path / "rotated", ("mcp-20261130T012645Z-0001.flows", "mcp-20261130T012646Z-0002.flows")))]
    )
    separate = analyze([str(write_pair(tmp_path / "separate", ("monday.flows", "tuesday.flows")))])
    assert [g.origin for g in whole.retry_groups] == ["app-retry"]
    assert [g.origin for g in rotated.retry_groups] == ["app-retry"]
    assert separate.retry_groups == []


def _split_sample(tmp_path: Path, names: tuple[str, str], recordings: tuple[str, str] | None) -> Path:
    """The 503 sample cut into two files at its second session, each file's first flow naming its recording
    (``recordings``, as the recorder writes it: analyzer/wire/recording.py), or none."""
    from mitmproxy import io as flow_io
    from mitmproxy.http import HTTPFlow

    from mcp_blackbox.analyzer.wire.recording import METADATA_KEY, marker

    sample = Path(__file__).resolve().parents[2] / "sample_captures" / "py-app-retry-after-503.flows"
    with sample.open("rb") as f:
        flows = [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]
    sessions = list(dict.fromkeys(f.response.headers.get("mcp-session-id") for f in flows if f.response))
    first = [f for f in flows if f.response is None or f.response.headers.get("mcp-session-id") != sessions[-1]]
    parts = (first, [f for f in flows if f not in first])
    folder = tmp_path / "-".join(names)
    folder.mkdir()
    for number, (name, part) in enumerate(zip(names, parts, strict=True), 1):
        if recordings is not None:
            part[0].metadata[METADATA_KEY] = marker(recordings[number - 1], number)
        with (folder / name).open("wb") as out:
            writer = flow_io.FlowWriter(out)
            for flow in part:
                writer.add(flow)
    return folder


ROTATED = ("mcp-20261130T012645Z-0001.flows", "mcp-20261130T012646Z-0002.flows")


def test_files_are_joined_by_the_recording_they_name_not_by_their_names(tmp_path: Path) -> None:
    """Two runs of a recorder into one directory write rotated names in both: the recording each file names
    keeps them apart; one recording's files join whatever their names (a renamed file, a copy)."""
    from mcp_blackbox.analyzer.outputs.analysis import analyze
    from mcp_blackbox.analyzer.wire.inputs import recording_of

    two_runs = _split_sample(tmp_path, ROTATED, ("a" * 32, "b" * 32))
    assert len({recording_of(str(p)) for p in two_runs.iterdir()}) == 2
    assert analyze([str(two_runs)]).retry_groups == []
    renamed = _split_sample(tmp_path, ("monday.flows", "tuesday.flows"), ("c" * 32, "c" * 32))
    assert len({recording_of(str(p)) for p in renamed.iterdir()}) == 1
    assert [g.origin for g in analyze([str(renamed)]).retry_groups] == ["app-retry"]


def test_a_malformed_recording_marker_is_no_recording(tmp_path: Path) -> None:
    """A capture is untrusted: a marker that is not {id: str, file: int} is ignored, the names decide."""
    from mcp_blackbox.analyzer.wire.inputs import recording_marker
    from mcp_blackbox.analyzer.wire.recording import read_marker

    assert read_marker({"id": 7, "file": 1}) is None and read_marker(["x"]) is None
    assert read_marker({"id": "", "file": 1}) is None and read_marker({"id": "x", "file": "1"}) is None
    folder = _split_sample(tmp_path, ROTATED, None)
    assert all(recording_marker(str(p)) is None for p in folder.iterdir())
    (folder / "garbage.flows").write_bytes(b"12:not a record")
    assert recording_marker(str(folder / "garbage.flows")) is None
