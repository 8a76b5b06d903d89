"""What ``record --stdio`` costs per message: round trips to a stdio server, bare and through the wrapper, in one run.

    .venv/bin/python tests/benchmarks/bench_stdio.py [--messages N] [--rounds R] [--server minimal|sdk]

A benchmark, not a test: it prints numbers and exits 0 whether the goal is met or not.

Setups, each its own server process, driven alike by this process over the server's stdin and stdout:

  (bare)     the server started directly;
  (wrapped)  ``mcp-blackbox record --stdio -w FILE -- <the same server>``, recording into a temporary file.

Servers: ``minimal`` (default) is this file run with ``--serve``, a JSON-RPC loop that answers each line at
once, so that what is measured is the wrapper and not an SDK; ``sdk`` is the official Python SDK server of
the tests (tests/stdio_servers/py_server.py), initialized first, answering ``tools/call echo``.

Measured: N ``tools/call`` round trips per setup and round (a request line written, the client waiting for
its answer line), p50 and p95. The round trips go in blocks of 100 that alternate between the setups (a
burst of noise hits both alike), in an order swapped every round; the figures printed are the medians over
the rounds of each round's figure. "added" is wrapped minus bare at p50, the goal is under 1 ms per message
(PASS/MISS is informational). The capture's size and line count are printed as a check that the wrapper
recorded every line.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO)]

from bench_addon import gc_paused, percentile  # noqa: E402

from mcp_blackbox.analyzer.wire import stdio_capture  # noqa: E402

WRAPPER = str(Path(sys.executable).with_name("mcp-blackbox"))
SDK_SERVER = REPO / "tests" / "stdio_servers" / "py_server.py"
BLOCK = 100
WARMUP = 300
READ_TIMEOUT = 10.0  # no single answer may hang the run
GOAL_MS = 1.0


def serve() -> None:
    """The minimal server: one answer line per request line, written at once."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if "id" not in request:
            continue
        text = request.get("params", {}).get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")
        out.flush()


@dataclass
class Setup:
    key: str
    argv: list[str]
    proc: subprocess.Popen[bytes] | None = None
    pending: bytes = b""
    p50: list[float] = field(default_factory=list)
    p95: list[float] = field(default_factory=list)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0
        )

    def send(self, message: dict[str, object]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        os.write(self.proc.stdin.fileno(), json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def answer(self) -> bytes:
        """The next line from the server (raw reads: no buffering of the client's own in the way)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            if not select.select([fd], [], [], READ_TIMEOUT)[0]:
                raise SystemExit(f"bench-stdio: ({self.key}) did not answer within {READ_TIMEOUT} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise SystemExit(f"bench-stdio: ({self.key}) closed its stdout (exit {self.proc.wait()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def stop(self) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def initialize(setup: Setup) -> None:
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    setup.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    setup.answer()
    setup.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def round_trips(setup: Setup, first_id: int, count: int) -> list[float]:
    times = []
    for n in range(first_id, first_id + count):
        call = {"name": "echo", "arguments": {"text": f"message {n}"}}
        started = time.perf_counter()
        setup.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call})
        line = setup.answer()
        times.append(time.perf_counter() - started)
        if f'"id":{n}'.encode() not in line.replace(b" ", b""):
            raise SystemExit(f"bench-stdio: ({setup.key}) answered {line[:200]!r} to request {n}")
    return times


def run_round(setups: list[Setup], count: int, first_id: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {s.key: [] for s in setups}
    with gc_paused():
        for block_start in range(0, count, BLOCK):
            size = min(BLOCK, count - block_start)
            for s in setups:
                times[s.key] += round_trips(s, first_id + block_start, size)
    return times


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="round trips per setup and round (2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the medians over them are printed (3)")
    parser.add_argument("--server", choices=("minimal", "sdk"), default="minimal")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    server = [sys.executable, str(SDK_SERVER)] if args.server == "sdk" else [sys.executable, __file__, "--serve"]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-stdio-") as tmp:
        capture = Path(tmp) / f"bench{stdio_capture.SUFFIX}"
        bare = Setup("bare", server)
        wrapped = Setup("wrapped", [WRAPPER, "record", "--stdio", "-w", str(capture), "--", *server])
        setups = [bare, wrapped]
        try:
            for s in setups:
                s.start()
                if args.server == "sdk":
                    initialize(s)
            print(f"warming up ({WARMUP} round trips each) ...", file=sys.stderr)
            run_round(setups, WARMUP, first_id=1)
            next_id = WARMUP + 1
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr)
                order = setups if r % 2 == 0 else setups[::-1]
                for key, values in run_round(order, args.messages, next_id).items():
                    s = bare if key == "bare" else wrapped
                    s.p50.append(percentile(values, 0.50))
                    s.p95.append(percentile(values, 0.95))
                next_id += args.messages
        finally:
            for s in setups:
                s.stop()
        reading = stdio_capture.CaptureReading(str(capture))
        lines = sum(1 for r in stdio_capture.read_capture(capture, reading) if r["type"] == stdio_capture.LINE)
        size = capture.stat().st_size
    elapsed = time.monotonic() - started

    print(
        f"mcp-blackbox record --stdio benchmark: {args.messages} tools/call round trips per setup per round, "
        f"{args.rounds} round(s), median of rounds; server: {args.server}; {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.2f}, {elapsed:.0f} s"
    )
    print()
    print(f"{'setup':<12} {'p50 ms':>9} {'p95 ms':>9}   per round p50 (ms)")
    for s in setups:
        rounds = " ".join(ms(v).strip() for v in s.p50)
        print(f"{s.key:<12} {ms(statistics.median(s.p50)):>9} {ms(statistics.median(s.p95)):>9}   {rounds}")
    added = statistics.median(wrapped.p50) - statistics.median(bare.p50)
    ratio = statistics.median(wrapped.p50) / statistics.median(bare.p50)
    added_p95 = statistics.median(wrapped.p95) - statistics.median(bare.p95)
    print()
    print(f"added per message: p50 {added * 1000:+.3f} ms, p95 {added_p95 * 1000:+.3f} ms; p50 ratio {ratio:.3f}")
    verdict = "PASS" if added * 1000 < GOAL_MS else "MISS"
    print(f"goal (informational): under {GOAL_MS:g} ms added per message at p50 -> {verdict}")
    expected = 2 * (WARMUP + args.rounds * args.messages) + (3 if args.server == "sdk" else 0)
    print()
    print(
        f"sanity: the capture has {lines} lines (expected {expected}: each request and answer), "
        f"{size / 2**20:.1f} MiB, {len(reading.problems)} problem(s)"
    )


if __name__ == "__main__":
    main()
