"""README.md and the manual in docs/ stay true: their analysis commands run as written on the bundled samples,
the notebook recipes of docs/analysis.md run, and the README's quick starts are the manual's own commands.
(Commands that need a server or a capture of your own, such as `record` or `report capture.flows`, are
exercised by the end-to-end tests instead.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
# The manual's pages; docs/ARCHITECTURE.md is the design, not a page of commands.
DOCS = {
    path.name: path.read_text(encoding="utf-8")
    for path in sorted((REPO / "docs").glob("*.md"))
    if path.name != "ARCHITECTURE.md"
}
ANALYSIS = DOCS["analysis.md"]
# check's example (shown with its output) has a test of its own, in tests/analyzer/test_check_and_summary.py.
COMMAND = re.compile(
    r"^    (\.venv/bin/mcp-blackbox (?:summary|export|diff|report) .*sample_captures/.*)$", re.MULTILINE
)


def runnable(text: str) -> list[str]:
    return [c for c in COMMAND.findall(text) if not re.search(r"\b(?:before|after|capture)\.flows\b", c)]


# Each command once, though the README's quick starts repeat some of the manual's.
RUNNABLE = list(dict.fromkeys(c for text in [README, *DOCS.values()] for c in runnable(text)))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh directory with the pages' relative paths: .venv and sample_captures."""
    os.symlink(REPO / "sample_captures", tmp_path / "sample_captures")
    os.symlink(Path(sys.executable).parents[1], tmp_path / ".venv")
    return tmp_path


def test_the_manual_shows_the_analysis_commands() -> None:
    subcommands = {command.split()[1] for command in runnable(ANALYSIS)}
    assert {"summary", "export", "diff"} <= subcommands, runnable(ANALYSIS)


def test_the_readme_quick_starts_are_the_manuals_commands() -> None:
    """Every command the README shows is one of the manual's, word for word: the tests that read the manual's
    recipes (here and in tests/analyzer and tests/e2e) hold the README to them."""
    shown = re.findall(r"^    (\$ )?(\.venv/bin/.*)$", README, re.MULTILINE)
    assert len(shown) >= 5, shown
    manual = "\n".join(DOCS.values())
    for prompt, command in shown:
        assert re.search(rf"^    {re.escape(prompt + command)}$", manual, re.MULTILINE), command


@pytest.mark.parametrize("command", RUNNABLE)
def test_a_documented_command_runs_as_written(command: str, workdir: Path) -> None:
    done = subprocess.run(["bash", "-c", command], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for output in re.findall(r"-o (\S+)", command):
        assert (workdir / output).stat().st_size > 0, output


def test_the_notebook_recipes_run(workdir: Path) -> None:
    start = ANALYSIS.index("    import pandas as pd\n")
    block = ANALYSIS[start : ANALYSIS.index("\n\n", ANALYSIS.index("p95_ms=(", start))]
    code = "\n".join(line[4:] for line in block.splitlines())
    done = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "write_record" in done.stdout and "app-retry" in done.stdout
