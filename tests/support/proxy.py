"""mitmdump with the recording addon, as a real process on 127.0.0.1 for end-to-end tests."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow

REPO = Path(__file__).resolve().parents[2]
ADDON = REPO / "addon" / "mcp_recorder.py"
MITMDUMP = str(Path(sys.executable).with_name("mitmdump"))


@dataclass
class Mitmdump:
    process: subprocess.Popen[bytes]
    port: int
    flow_file: Path
    log_file: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: signal.Signals = signal.SIGINT, timeout: float = 15) -> int:
        """Stop as a person would (Ctrl-C); the flow file is complete once this returns."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(f"mitmdump ignored {sig.name}; log:\n{self.log()}") from None
        return self.process.returncode

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def flows(self) -> list[HTTPFlow]:
        with self.flow_file.open("rb") as f:
            return [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_mitmdump(
    mode: str,
    workdir: Path,
    *,
    options: dict[str, str] | None = None,
    name: str = "mitmdump",
    addon: bool = True,
    extra_modes: Sequence[str] = (),
    scripts: Sequence[Path] = (),
    timeout: float = 20,
) -> Mitmdump:
    """Start ``mitmdump -s addon/mcp_recorder.py --mode MODE -w FILE`` and wait until it listens.

    With the addon it listens on ``-p 0`` and reports its port through ``mcp_listen_file``;
    plain mitmdump (``addon=False``, for contrast) gets a free port picked beforehand.
    ``scripts``: more mitmdump scripts, loaded after the addon (tests' instruments).
    """
    listen_file = workdir / f"{name}.listen.json"
    flow_file = workdir / f"{name}.flows"
    log_file = workdir / f"{name}.log"
    port = 0 if addon else free_port()
    command = [MITMDUMP, "--mode", mode, "--listen-host", "127.0.0.1", "-p", str(port), "-w", str(flow_file)]
    for extra in extra_modes:  # more listeners, into the same capture ("reverse:URL@PORT")
        command += ["--mode", extra]
    if addon:
        command += ["-s", str(ADDON), "--set", f"mcp_listen_file={listen_file}"]
    for script in scripts:
        command += ["-s", str(script)]
    for key, value in (options or {}).items():
        command += ["--set", f"{key}={value}"]
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    deadline = time.monotonic() + timeout
    while not (listen_file.exists() if addon else accepts_connections(port)):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"mitmdump did not start; log:\n{log_file.read_text(errors='replace')}")
        time.sleep(0.05)
    if addon:
        port = json.loads(listen_file.read_text())["listen_addrs"][0][1]
    return Mitmdump(process, port, flow_file, log_file)


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
