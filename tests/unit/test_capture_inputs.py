"""Capture arguments (analyzer/wire/inputs.py) and the `record` command line (cli/main.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.wire.inputs import expand_captures
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
    assert [p["reason"] for p in analysis.read_problems] == ["a directory without *.flows files"]


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
