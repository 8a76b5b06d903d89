"""`run` and `record` given a capture they cannot write, or (`run`) a command that cannot start.

Through the real `mcp-blackbox run` and `record`, as users run them:

- `-w` (and `record --listen-file`) that cannot be written: one line on stderr, `mcp-blackbox <command>:
  cannot write <path>: <reason>`, exit 2, before mitmdump or the server is started (no traceback from
  mitmproxy's script loader, nothing created). The recorders make the directories they lack and take a
  directory for a file per run or rotation, so the look-alikes work: a missing directory, a directory.
- `run -- COMMAND` where COMMAND cannot start: `cannot start COMMAND: <reason>` and a shell's status (127
  not found, 126 not runnable), no capture made, and not the advice about clients that ignore the proxy,
  which is for a command that ran.

The tests run as root, where a mode does not stop a write: the paths that cannot be written are under a
regular file, which no user can write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import child_env, stop_process

pytestmark = pytest.mark.e2e

MCP_BLACKBOX = str(Path(sys.executable).with_name("mcp-blackbox"))
PROXY_ADVICE = "may ignore the proxy settings"
DEAD_UPSTREAM = "http://127.0.0.1:9"


def blackbox(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCP_BLACKBOX, *args], cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_text("a regular file\n")
    (tmp_path / "adir").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "-w", "afile/cap.flows", "--", "true"], "run: cannot write afile/cap.flows: Not a directory"),
        (
            ["record", "--upstream", DEAD_UPSTREAM, "-p", "0", "-w", "afile/cap.flows"],
            "record: cannot write afile/cap.flows: Not a directory",
        ),
        (
            ["record", "--upstream", DEAD_UPSTREAM, "-p", "0", "-w", "afile/deeper/cap.flows"],
            "record: cannot write afile/deeper/cap.flows: Not a directory",
        ),
        (
            ["record", "--upstream", DEAD_UPSTREAM, "-p", "0", "-w", "afile", "--rotate-size", "1m"],
            "record: cannot write afile: Not a directory (a directory is needed for the files of each run or rotation)",
        ),
        (
            ["record", "--upstream", DEAD_UPSTREAM, "-p", "0", "-w", "cap.flows", "--listen-file", "nowhere/l.json"],
            "record: cannot write nowhere/l.json: No such file or directory",
        ),
        (
            ["record", "--stdio", "-w", "afile/cap.stdio.jsonl", "--", sys.executable, "-c", "pass"],
            "record: cannot write afile/cap.stdio.jsonl: Not a directory",
        ),
    ],
    ids=["run", "record", "record-deeper", "record-rotating", "record-listen-file", "record-stdio"],
)
def test_a_capture_that_cannot_be_written_is_one_line_and_exit_2(workdir: Path, args: list[str], said: str) -> None:
    before = tree(workdir)
    done = blackbox(*args, cwd=workdir, timeout=60)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.splitlines() == [f"mcp-blackbox {said}"]
    assert done.stdout == ""
    assert tree(workdir) == before


@pytest.mark.parametrize(
    ("program", "status", "reason"),
    [
        ("/nonexistent-cmd", 127, "No such file or directory"),
        ("no-such-command-here", 127, "command not found"),
        ("./afile", 126, "Permission denied"),  # not executable (root too: no x bit at all)
        ("./adir", 126, "Is a directory"),
    ],
)
def test_a_command_that_cannot_start_is_said_and_has_a_shells_status(
    workdir: Path, program: str, status: int, reason: str
) -> None:
    before = tree(workdir)
    done = blackbox("run", "-w", "cap.flows", "--", program, cwd=workdir)
    assert done.returncode == status, done.stderr
    assert done.stderr.splitlines() == [f"mcp-blackbox run: cannot start {program}: {reason}"]
    assert tree(workdir) == before  # found out before the recorder was started: no capture


def test_a_command_exec_refuses_is_said_without_the_proxy_advice(workdir: Path) -> None:
    # Executable, but no format the system runs: only exec finds out, once the recorder is running.
    program = workdir / "not-a-program"
    program.write_bytes(b"\x7fELF but not really")
    program.chmod(0o755)
    done = blackbox("run", "-w", "cap.flows", "--", "./not-a-program", cwd=workdir)
    assert done.returncode == 126, done.stderr
    assert "mcp-blackbox run: cannot start ./not-a-program: Exec format error" in done.stderr.splitlines()
    assert PROXY_ADVICE not in done.stderr and "no MCP exchange was seen" not in done.stderr


def test_a_command_that_ran_and_sent_nothing_still_gets_the_proxy_advice(workdir: Path) -> None:
    # The look-alike of the above, and of a capture that cannot be written: the recorder makes the
    # directories it lacks.
    done = blackbox("run", "-w", "new/deeper/cap.flows", "--", sys.executable, "-c", "pass", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert PROXY_ADVICE in done.stderr
    assert (workdir / "new/deeper/cap.flows").is_file()


def test_record_stdio_into_a_directory_still_writes_a_file_per_run(workdir: Path) -> None:
    done = blackbox("record", "--stdio", "-w", "adir", "--", sys.executable, "-c", "pass", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert [p.name.endswith(".stdio.jsonl") for p in (workdir / "adir").iterdir()] == [True]


def test_record_into_a_missing_directory_still_records(workdir: Path) -> None:
    listen = workdir / "listen.json"
    argv = [MCP_BLACKBOX, "record", "--upstream", DEAD_UPSTREAM, "-p", "0", "-q", "-w", "new/deeper/cap.flows"]
    proc = subprocess.Popen(
        [*argv, "--listen-file", str(listen)],
        cwd=workdir,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not listen.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listen.exists(), proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        stop_process(proc)
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == 0
    assert (workdir / "new/deeper/cap.flows").is_file()
    assert os.stat(workdir / "new/deeper/cap.flows").st_mode & 0o777 == 0o600
