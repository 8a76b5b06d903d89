"""Lost session affinity is diagnosed (issue 21, part 6): real nginx balancing two stateful MCP servers
without stickiness. A session created on one instance whose next request lands on the other gets 404; the
analysis names the sessions and calls it hurt and the usual cause. The same clients against one server
name nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from tests.support.processes import run_py_client, start_server
from tests.support.proxy import free_port, start_mitmdump
from tests.truth.family_gateway import running_nginx
from tests.truth.family_process import BALANCER_CONF  # round robin, weighted 3:1, no stickiness

pytestmark = pytest.mark.e2e

STEPS = [{"op": "list_tools"}, {"op": "call", "tool": "echo", "args": {"text": "hi"}}]


def affinity_notes(flows: Path) -> list[str]:
    return [note for note in analyze([flows]).notes if "lost session affinity" in note]


def test_a_balancer_without_stickiness_is_diagnosed_and_one_server_is_not(tmp_path: Path) -> None:
    with start_server("stateful") as a, start_server("stateful") as b:
        port, workdir = free_port(), tmp_path / "nginx"
        workdir.mkdir()
        with running_nginx(BALANCER_CONF.format(tmp=workdir, port=port, a=a.port, b=b.port), port, workdir):
            balanced = start_mitmdump(f"reverse:http://127.0.0.1:{port}", tmp_path, name="balanced")
            single = start_mitmdump(f"reverse:http://127.0.0.1:{a.port}", tmp_path, name="single")
            try:
                for _ in range(6):
                    run_py_client(f"{balanced.url}/mcp", STEPS, mode="legacy", timeout=20)
                    run_py_client(f"{single.url}/mcp", STEPS, mode="legacy", timeout=20)
            finally:
                balanced.stop()
                single.stop()
    (note,) = affinity_notes(balanced.flow_file)
    calls = {c["call_id"]: c for c in analyze([balanced.flow_file]).calls}
    named = [call_id for call_id in calls if call_id in note]
    assert named and all(calls[c]["http_status"] == 404 for c in named), note
    assert "load balancer without stickiness" in note
    assert affinity_notes(single.flow_file) == []
