"""``mcp-blackbox diff`` on two real captures: the official Python SDK client against the test server through
mitmdump with the addon, once with a 500 on write_record (an error after which the write may have run; the
application's loop runs every step again, in a new session of the same process) and once after the fault
is removed. What the client saw labels the calls, not the analyzer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import run_py_client, start_server
from tests.support.proxy import start_mitmdump
from tests.support.raw_http import Control

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
WRITE = {"match": {"rpc_method": "tools/call", "tool": "write_record"}, "action": {"status": 500}, "times": 1}
STEPS = [
    {"op": "call", "tool": "echo", "args": {"text": "before write"}},
    {"op": "call", "tool": "write_record", "args": {"key": "order-1", "value": "paid"}},
]


def record(tmp_path: Path, name: str, *, fault: bool) -> tuple[Path, list[dict[str, Any]]]:
    """Run the application; its loop runs every step once more, in the same process, when its write failed.
    (A second process would be another client: the recorder names each process, and the analysis never
    chains two processes' calls.)"""
    runs = []
    with start_server("stateful") as server:
        control = Control(server.port)
        control.reset()
        if fault:
            control.faults(WRITE)
        proxy = start_mitmdump(f"reverse:http://127.0.0.1:{server.port}", tmp_path, name=name)
        try:
            run = run_py_client(
                f"{proxy.url}/mcp", STEPS, mode="legacy", timeout=30, step_timeout=10, rerun_on_failure=True
            )
            runs = [run["steps"][i : i + len(STEPS)] for i in range(0, len(run["steps"]), len(STEPS))]
        finally:
            time.sleep(0.3)
            proxy.stop()
    return proxy.flow_file, runs


def diff(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mcp_blackbox.cli.main", "diff", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    before, runs_before = record(tmp_path_factory.mktemp("before"), "before", fault=True)
    after, runs_after = record(tmp_path_factory.mktemp("after"), "after", fault=False)
    # What the application saw: a failed write then a second run that wrote; after the fix, one run that wrote.
    assert [[s["ok"] for s in run] for run in runs_before] == [[True, False], [True, True]]
    assert [[s["ok"] for s in run] for run in runs_after] == [[True, True]]
    return before, after


def test_the_fix_shows_as_a_fixed_write_and_no_regression(captures: tuple[Path, Path]) -> None:
    before, after = captures
    done = diff(str(before), str(after), "--format", "json", "--fail-on-regression")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["regressions"] == []
    assert result["new_failures"] == []
    (fixed,) = result["fixed"]
    assert fixed["what"] == "tools/call write_record"
    assert (fixed["before"]["outcome"], fixed["after"]["outcome"]) == ("HTTP_ERROR", "TOOL_SUCCESS")
    assert "500" in fixed["before"]["reason"] or "injected" in fixed["before"]["reason"]
    # One answer to "did it run twice?" (issue 22): the write answered 500 may have run, then ran again.
    assert [(r["before"], r["after"]) for r in result["ran_more_than_once"]] == [(1, 0)]
    assert re.fullmatch(r"write_record \(arguments \w{10}\), possible", result["ran_more_than_once"][0]["what"])
    assert [(r["before"], r["after"]) for r in result["retries"]] == [(1, 0)]
    assert result["retries"][0]["what"] == "app-retry: tools/call write_record"
    tools = {row["tool"]: row for row in result["latency"]}
    assert tools["write_record"]["before"]["calls"] == 2 and tools["write_record"]["after"]["calls"] == 1
    assert tools["echo"]["before"]["calls"] == 2 and tools["echo"]["after"]["calls"] == 1


def test_the_other_way_round_is_a_regression_in_every_format(captures: tuple[Path, Path]) -> None:
    before, after = captures
    done = diff(str(after), str(before), "--fail-on-regression")
    assert done.returncode == 1, done.stdout + done.stderr
    # The write failed and its retry succeeded: not a new failure, but it now needs a retry (issue 22).
    assert "WORSE" in done.stdout and "now needs a retry" in done.stdout and "write_record" in done.stdout
    assert "new failure: " not in done.stdout  # no such regression line ("new failures: 0" is the count)
    markdown = diff(str(after), str(before), "--format", "markdown")
    assert markdown.returncode == 0  # without --fail-on-regression the diff only reports
    assert "## Regressions" in markdown.stdout and "## Now needs a retry" in markdown.stdout
    as_json = json.loads(diff(str(after), str(before), "--format", "json").stdout)
    assert any(line.startswith("ran more than once: write_record") for line in as_json["regressions"])
    assert not any("unsafe replay" in line or "run twice" in line for line in as_json["regressions"])


def test_a_capture_against_itself_changes_nothing(captures: tuple[Path, Path]) -> None:
    before, _ = captures
    result = json.loads(diff(str(before), str(before), "--format", "json", "--fail-on-regression").stdout)
    # Requests are matched (a retry chain is one): every one of them, on both sides.
    assert result["calls"]["matched"] == result["calls"]["requests_before"] == result["calls"]["requests_after"]
    assert result["calls"]["before"] == result["calls"]["after"] > result["calls"]["matched"]
    assert result["changed"] == result["new_failures"] == result["fixed"] == result["regressions"] == []
