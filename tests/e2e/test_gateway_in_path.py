"""A gateway between the recorder and the MCP server is named (issue 21, part 5): recorded in front of a
real nginx, the analysis says that nginx is in the path and that what it did behind the recorder is not in
the capture; recorded behind it (the server's own answers), it names none."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.processes import run_py_client, start_server
from tests.support.proxy import free_port, start_mitmdump
from tests.truth.family_gateway import nginx

pytestmark = pytest.mark.e2e

STEPS = [{"op": "call", "tool": "echo", "args": {"text": "through the gateway"}}]


def test_a_gateway_in_front_of_the_server_is_named_and_the_server_alone_names_none(tmp_path: Path) -> None:
    with start_server("stateful") as server:
        port, workdir = free_port(), tmp_path / "nginx"
        workdir.mkdir()
        with nginx(port, server.port, server.port, workdir):
            in_front = start_mitmdump(f"reverse:http://127.0.0.1:{port}", tmp_path, name="front")
            behind = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp_path, name="behind")
            try:
                through = run_py_client(f"{in_front.url}/mcp", STEPS)
                direct = run_py_client(f"{behind.url}/mcp", STEPS)
            finally:
                in_front.stop()
                behind.stop()
    assert through["fatal"] is None and direct["fatal"] is None
    front = analyze([in_front.flow_file])
    (note,) = [note for note in front.notes if "gateway" in note]
    assert note.startswith("a gateway is in the path: nginx (Server: nginx/"), note
    assert not [note for note in analyze([behind.flow_file]).notes if "gateway" in note]
