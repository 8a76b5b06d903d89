"""README.md stays true: its analysis commands run as written on the bundled samples, and its notebook
recipes run. (Commands that need a server or a capture of your own, such as `record` or
`report capture.flows`, are exercised by the end-to-end tests instead.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
# check's example (shown with its output) has a test of its own, in tests/analyzer/test_check_and_summary.py.
COMMAND = re.compile(
    r"^    (\.venv/bin/mcp-blackbox (?:summary|export|diff|report) .*sample_captures/.*)$", re.MULTILINE
)
RUNNABLE = [c for c in COMMAND.findall(README) if not re.search(r"\b(?:before|after|capture)\.flows\b", c)]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh directory with the README's relative paths: .venv and sample_captures."""
    os.symlink(REPO / "sample_captures", tmp_path / "sample_captures")
    os.symlink(Path(sys.executable).parents[1], tmp_path / ".venv")
    return tmp_path


def test_the_readme_shows_the_analysis_commands() -> None:
    subcommands = {command.split()[1] for command in RUNNABLE}
    assert {"summary", "export", "diff"} <= subcommands, RUNNABLE


@pytest.mark.parametrize("command", RUNNABLE)
def test_a_readme_command_runs_as_written(command: str, workdir: Path) -> None:
    done = subprocess.run(["bash", "-c", command], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for output in re.findall(r"-o (\S+)", command):
        assert (workdir / output).stat().st_size > 0, output


def test_the_notebook_recipes_run(workdir: Path) -> None:
    start = README.index("    import pandas as pd\n")
    block = README[start : README.index("\n\n", README.index("p95_ms=(", start))]
    code = "\n".join(line[4:] for line in block.splitlines())
    done = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "write_record" in done.stdout and "app-retry" in done.stdout
