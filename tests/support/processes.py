"""Child-process helpers for end-to-end tests: start the test MCP server, run client runners.

Every child gets its stderr in a temp file (a pipe could fill up and stall it) so failures can
quote it; every child is killed on the way out, whatever happened.

    with start_server("stateful") as server:      # or: yield from a pytest fixture
        result = run_py_client(server.url("/mcp"), [{"op": "list_tools"}])
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.support.proxy import accepts_connections

REPO_ROOT = Path(__file__).resolve().parents[2]
STDERR_TAIL = 4000  # characters of a child's stderr quoted in an error


class ProcessFailure(RuntimeError):
    """A child did not start, answer or exit as expected; the message quotes its stderr."""


def _tail(stream: IO[bytes]) -> str:
    stream.flush()
    stream.seek(0)
    text = stream.read().decode("utf-8", errors="replace")
    return text[-STDERR_TAIL:]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    # The repo root on the path so `-m tests....` works from any cwd.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if it does not exit in time. Safe to call twice."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    stderr: IO[bytes]
    mode: str

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def mcp_url(self) -> str:
        return self.url("/sse" if self.mode == "legacy-sse" else "/mcp")

    def stderr_text(self) -> str:
        return _tail(self.stderr)

    def stderr_lines(self) -> list[str]:
        """Everything the server wrote on stderr so far (its execution log, for truth labels)."""
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", errors="replace").splitlines()

    def assert_alive(self) -> None:
        if self.proc.poll() is not None:
            raise ProcessFailure(f"test MCP server exited with {self.proc.returncode}; stderr:\n{self.stderr_text()}")


def wait_for_port_file(path: Path, proc: subprocess.Popen[bytes], stderr: IO[bytes], timeout: float) -> int:
    """Poll for the port file the server writes (atomically) once it accepts connections."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return int(path.read_text())
        if proc.poll() is not None:
            raise ProcessFailure(f"server exited with {proc.returncode} before listening; stderr:\n{_tail(stderr)}")
        time.sleep(0.02)
    raise ProcessFailure(f"server did not write {path} within {timeout}s; stderr:\n{_tail(stderr)}")


def wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float, what: str) -> None:
    """Wait until ``proc`` accepts connections on 127.0.0.1:port; fail with the end of its log if it exits
    or takes longer than ``timeout`` (for peers that cannot write a port file)."""
    deadline = time.monotonic() + timeout
    while not accepts_connections(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            text = log.read_text(errors="replace")[-STDERR_TAIL:] if log.exists() else ""
            raise ProcessFailure(f"{what} did not start listening on {port} (exit {proc.poll()}); log:\n{text}")
        time.sleep(0.05)


@contextmanager
def start_server(
    mode: str,
    *,
    json_response: bool = False,
    retry_interval_ms: int | None = None,
    auth_token: str | None = None,
    startup_timeout: float = 15.0,
    port: int = 0,
) -> Iterator[ServerProcess]:
    """Run `python -m tests.support.mcp_server` on ``port`` (0: a free one) for the duration of the block."""
    with tempfile.TemporaryDirectory(prefix="mcp-testbed-") as tmp, tempfile.TemporaryFile() as stderr:
        port_file = Path(tmp) / "port"
        argv = [sys.executable, "-m", "tests.support.mcp_server", "--mode", mode, "--port", str(port)]
        argv += ["--port-file", str(port_file)]
        if json_response:
            argv.append("--json-response")
        if retry_interval_ms is not None:
            argv += ["--retry-interval-ms", str(retry_interval_ms)]
        if auth_token:
            argv += ["--auth-token", auth_token]
        proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr
        )
        try:
            port = wait_for_port_file(port_file, proc, stderr, startup_timeout)
            yield ServerProcess(proc=proc, port=port, stderr=stderr, mode=mode)
        finally:
            stop_process(proc)


def run_json_command(argv: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run a child that prints one JSON document on stdout and exits 0; return the document."""
    with tempfile.TemporaryFile() as stderr:
        try:
            done = subprocess.run(
                list(argv),
                cwd=REPO_ROOT,
                env=child_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:  # subprocess.run has already killed it
            raise ProcessFailure(f"{argv[:4]} did not finish within {timeout}s; stderr:\n{_tail(stderr)}") from exc
        if done.returncode != 0:
            raise ProcessFailure(
                f"{argv[:4]} exited with {done.returncode}; stdout:\n{done.stdout[-STDERR_TAIL:]!r}\n"
                f"stderr:\n{_tail(stderr)}"
            )
        try:
            return json.loads(done.stdout)
        except ValueError as exc:
            raise ProcessFailure(
                f"{argv[:4]} printed no JSON document: {done.stdout[-STDERR_TAIL:]!r}; stderr:\n{_tail(stderr)}"
            ) from exc


def run_py_client(
    url: str,
    steps: list[dict[str, Any]],
    *,
    transport: str = "streamable-http",
    mode: str = "auto",
    auth_token: str | None = None,
    auth_retry_token: str | None = None,
    timeout: float = 20.0,
    step_timeout: float | None = None,
    rerun_on_failure: bool = False,
) -> dict[str, Any]:
    """Run tests.clients.py_client and return its JSON result.

    auth_token: sent on every request; auth_retry_token: sent only after a 401 (the runner's RetryBearerAuth).
    """
    argv = [sys.executable, "-m", "tests.clients.py_client", "--url", url, "--steps", json.dumps(steps)]
    argv += ["--transport", transport, "--mode", mode, "--timeout", str(timeout)]
    if step_timeout is not None:
        argv += ["--step-timeout", str(step_timeout)]
    if rerun_on_failure:
        argv.append("--rerun-on-failure")
    if auth_token:
        argv += ["--auth-token", auth_token]
    if auth_retry_token:
        argv += ["--auth-retry-token", auth_retry_token]
    # The runner enforces `timeout` itself; the extra margin covers interpreter start-up.
    return run_json_command(argv, timeout=timeout + 15)


TS_CLIENT = REPO_ROOT / "tests" / "clients" / "ts" / "client.mjs"


def run_ts_client(
    url: str,
    steps: list[dict[str, Any]],
    *,
    transport: str = "streamable-http",
    auth_token: str | None = None,
    timeout_ms: int = 20_000,
) -> dict[str, Any]:
    """Run the TypeScript SDK client runner (tests/clients/ts/client.mjs) and return its JSON result."""
    if not (TS_CLIENT.parent / "node_modules").exists():
        raise ProcessFailure("tests/clients/ts/node_modules is missing: run `make test` (it runs `npm ci` there)")
    argv = ["node", str(TS_CLIENT), "--url", url, "--steps", json.dumps(steps), "--transport", transport]
    argv += ["--timeout-ms", str(timeout_ms)]
    if auth_token:
        argv += ["--auth-token", auth_token]
    return run_json_command(argv, timeout=timeout_ms / 1000 + 15)
