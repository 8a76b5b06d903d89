"""An output written with ``--no-redact`` holds the capture's secrets, as the flow file does: it is created
readable and writable by its owner only (0600), whatever the umask, a file it replaces too (issue 22, item 7).

The Redactor says how (``Redactor.file_mode``: None, as open() creates a file; 0600 for ``AS_CAPTURED``); the
writer of the commands' files (cli/output_files.py's ``Output``, used by cli/main.py) asks it. Look-alike: the
same command without ``--no-redact`` creates its file as open() does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_blackbox.analyzer.redaction.redactor import AS_CAPTURED, REDACTED, Redactor
from mcp_blackbox.cli.main import main

SAMPLE = Path(__file__).resolve().parents[2] / "sample_captures" / "py-2025-session-tools.flows"


def test_the_redactor_says_how_a_file_of_its_output_is_made() -> None:
    assert AS_CAPTURED.file_mode == 0o600 and Redactor.of(False).file_mode == 0o600
    assert REDACTED.file_mode is None and Redactor.of(True).file_mode is None


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


COMMANDS = {
    "report": ["report", str(SAMPLE)],
    "export-json": ["export", str(SAMPLE)],
    "export-csv": ["export", str(SAMPLE), "--format", "csv"],
    "export-har": ["export", str(SAMPLE), "--format", "har"],
    "summary-markdown": ["summary", str(SAMPLE), "--format", "markdown"],
    "diff": ["diff", str(SAMPLE), str(SAMPLE)],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.usefixtures("umask_022")
def test_an_output_written_with_no_redact_is_0600_new_or_replaced(command: str, tmp_path: Path) -> None:
    new, replaced = tmp_path / "new.out", tmp_path / "replaced.out"
    replaced.write_text("older\n")
    replaced.chmod(0o644)
    for path in (new, replaced):
        assert main([*COMMANDS[command], "--no-redact", "-o", str(path)]) == 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{command} -o {path.name}"


@pytest.mark.usefixtures("umask_022")
def test_a_redacted_output_is_made_as_open_makes_it(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    assert main(["report", str(SAMPLE), "-o", str(path)]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
