"""An output path the analysis commands cannot write, said before any analysis; and ``diff -o``.

Every command that writes a file (report, summary, export in each format, check in each format, redact,
diff) answers an ``-o`` that names a path under a regular file, a directory, or a file in a missing
directory with one line on stderr, ``mcp-blackbox <command>: cannot write <path>: <reason>``, exit 2 and
nothing created; before it reads a capture (a missing one is not even mentioned). Inputs that cannot be
read leave the output path as it was (export streams its header first: no empty JSON in place). The
look-alikes: a path that can be written still works, ``check`` failing its gate still exits 1, and
``check`` still writes its report for CI when nothing could be read (it says so).

Run as the installed console script, as users and CI run it. The tests run as root, where a mode does not
stop a write: the paths that cannot be written are ones no user can write.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_blackbox.cli.output_files import Output

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_captures"
CAPTURE = SAMPLES / "py-app-retry-after-503.flows"  # an HTTP 503 on a write: check's default gate fails
OTHER = SAMPLES / "py-2025-session-tools.flows"
MISSING = "missing.flows"

# Each command that writes a file, in each of its formats, without -o; {capture} is the (first) capture.
WRITERS: dict[str, list[str]] = {
    "report": ["report", "{capture}"],
    "summary-text": ["summary", "{capture}"],
    "summary-markdown": ["summary", "--format", "markdown", "{capture}"],
    "export-json": ["export", "--format", "json", "{capture}"],
    "export-csv": ["export", "--format", "csv", "{capture}"],
    "export-har": ["export", "--format", "har", "{capture}"],
    "export-otlp": ["export", "--format", "otlp", "{capture}"],
    "check-text": ["check", "{capture}"],
    "check-junit": ["check", "--format", "junit", "{capture}"],
    "check-github": ["check", "--format", "github", "{capture}"],
    "check-json": ["check", "--format", "json", "{capture}"],
    "redact": ["redact", "{capture}"],
    "diff-text": ["diff", "{capture}", str(OTHER)],
    "diff-markdown": ["diff", "--format", "markdown", "{capture}", str(OTHER)],
    "diff-json": ["diff", "--format", "json", "{capture}", str(OTHER)],
}
# The exit status with a path that can be written: check's gate fails on the 503.
SUCCESS = {name: 1 if name.startswith("check") else 0 for name in WRITERS}
# What the system says of each path that cannot be written (made by ``workdir``).
UNWRITABLE = {
    "afile/out": "Not a directory",  # under a regular file
    "adir": "Is a directory",
    "nowhere/out": "No such file or directory",
}


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    console_script = Path(sys.executable).with_name("mcp-blackbox")
    command = [str(console_script)] if console_script.exists() else [sys.executable, "-m", "mcp_blackbox.cli"]
    env = {**os.environ, "GITHUB_STEP_SUMMARY": ""}  # check --format github appends there when set
    return subprocess.run(
        [*command, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def writer(name: str, capture: str | Path = CAPTURE) -> list[str]:
    return [arg.format(capture=capture) for arg in WRITERS[name]]


def command_of(name: str) -> str:
    return WRITERS[name][0]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``, with a file's bytes: what a command created or changed shows."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_text("a regular file\n")
    (tmp_path / "adir").mkdir()
    return tmp_path


@pytest.mark.parametrize("path", UNWRITABLE)
@pytest.mark.parametrize("name", WRITERS)
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(workdir: Path, name: str, path: str) -> None:
    before = tree(workdir)
    done = cli(*writer(name), "-o", path, cwd=workdir)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.splitlines() == [f"mcp-blackbox {command_of(name)}: cannot write {path}: {UNWRITABLE[path]}"]
    assert done.stdout == ""
    assert tree(workdir) == before


@pytest.mark.parametrize("name", WRITERS)
def test_the_output_is_checked_before_any_capture_is_read(workdir: Path, name: str) -> None:
    # A missing capture would be said ("cannot open") if it were read first: only the output is said.
    done = cli(*writer(name, MISSING), "-o", "afile/out", cwd=workdir)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.splitlines() == [f"mcp-blackbox {command_of(name)}: cannot write afile/out: Not a directory"]


@pytest.mark.parametrize("name", WRITERS)
def test_a_path_that_can_be_written_still_is(workdir: Path, name: str) -> None:
    # The look-alike: a new file in an existing directory, and an existing file replaced.
    for path in ("adir/new.out", "afile"):
        done = cli(*writer(name), "-o", path, cwd=workdir)
        assert done.returncode == SUCCESS[name], (path, done.returncode, done.stderr)
        assert (workdir / path).is_file() and (workdir / path).read_bytes() != b"a regular file\n"
    # Written beside and renamed: no temporary file is left behind.
    assert sorted(p.name for p in workdir.rglob("*")) == ["adir", "afile", "new.out"]


@pytest.mark.parametrize(
    "name", ["export-json", "export-csv", "export-har", "export-otlp", "summary-text", "summary-markdown", "report"]
)
def test_inputs_that_cannot_be_read_leave_the_output_as_it_was(workdir: Path, name: str) -> None:
    (workdir / "old.out").write_text("an earlier good output\n")
    before = tree(workdir)
    for path in ("old.out", "new.out"):
        done = cli(*writer(name, MISSING), "-o", path, cwd=workdir)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert f"{MISSING}: cannot open: No such file or directory" in done.stderr, done.stderr
        assert "cannot write" not in done.stderr
    assert tree(workdir) == before


def test_a_diff_against_an_unreadable_capture_writes_nothing(workdir: Path) -> None:
    done = cli("diff", CAPTURE, MISSING, "-o", "new.out", cwd=workdir)
    assert done.returncode == 2 and MISSING in done.stderr, done.stderr
    assert not (workdir / "new.out").exists()


def test_check_still_exits_1_only_for_its_gate(workdir: Path) -> None:
    failed = cli("check", CAPTURE, "--format", "junit", "-o", "adir/check.xml", cwd=workdir)
    assert failed.returncode == 1, failed.stderr
    assert "<failure" in (workdir / "adir/check.xml").read_text()
    assert failed.stdout.splitlines()[-1].startswith("FAIL:")  # the plain text still goes to the log
    refused = cli("check", CAPTURE, "--format", "junit", "-o", "adir", cwd=workdir)
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr


def test_check_still_writes_its_report_when_nothing_could_be_read(workdir: Path) -> None:
    # CI keeps the report, which says why (exit 2): unlike an export, it is not an empty output.
    done = cli("check", MISSING, "--format", "json", "-o", "check.json", cwd=workdir)
    assert done.returncode == 2, done.stderr
    assert MISSING in (workdir / "check.json").read_text()


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_diff_writes_to_output_what_it_prints(workdir: Path, fmt: str) -> None:
    printed = cli("diff", "--format", fmt, CAPTURE, OTHER, cwd=workdir)
    written = cli("diff", "--format", fmt, CAPTURE, OTHER, "--output", "adir/diff.out", cwd=workdir)
    assert printed.returncode == written.returncode == 0, written.stderr
    assert printed.stdout and written.stdout == ""
    assert (workdir / "adir/diff.out").read_text() == printed.stdout
    # The regression gate is the same whether the diff goes to a file or to stdout.
    gated = cli("diff", "--format", fmt, "--fail-on-regression", CAPTURE, OTHER, "-o", "-", cwd=workdir)
    gated_file = cli("diff", "--format", fmt, "--fail-on-regression", CAPTURE, OTHER, "-o", "g.out", cwd=workdir)
    assert gated.returncode == gated_file.returncode
    assert gated.stdout == (workdir / "g.out").read_text()


def test_a_replaced_file_keeps_its_mode_and_a_link_is_written_through(workdir: Path) -> None:
    target = workdir / "adir" / "summary.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    (workdir / "link.txt").symlink_to(target)
    done = cli("summary", CAPTURE, "-o", "link.txt", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert (workdir / "link.txt").is_symlink()
    assert target.read_text().startswith("10 calls")
    assert target.stat().st_mode & 0o777 == 0o640


def test_an_output_can_be_made_with_a_mode_of_its_own(tmp_path: Path) -> None:
    # For outputs that hold secrets (--no-redact): the mode asked for, new or replacing, whatever the umask.
    replaced = tmp_path / "replaced.out"
    replaced.write_text("older\n")
    replaced.chmod(0o644)
    for path in (tmp_path / "new.out", replaced):
        with Output(str(path), mode=0o600) as output:
            output.stream.write("secret\n")
        assert path.read_text() == "secret\n"
        assert path.stat().st_mode & 0o777 == 0o600
    with Output(str(tmp_path / "discarded.out"), mode=0o600) as output:
        output.stream.write("half\n")
        output.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.out", "replaced.out"]
