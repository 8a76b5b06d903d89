"""Where the recorder's time goes: the p50 of keep-alive POSTs through the recorder with parts switched off.

    .venv/bin/python tests/benchmarks/bench_recorder_parts.py [--requests N] [--rounds R]

A benchmark, not a test: it prints numbers and exits 0. ``bench_addon.py`` measures the recorder as users run
it; this splits its like-for-like ratio, (c)/(bw), into parts. Every setup is a mitmdump in reverse mode with
``-w`` and ``flow_detail=0`` behind the same upstream (bench_addon.py's), the POSTs in blocks of 100 rotating
over the setups, each figure the median over the rounds of that round's p50:

  (bw)  no addon;
  (n)   an addon with the recorder's hooks, each returning at once: what mitmproxy's calling them costs;
  (r)   the recorder recognising MCP, its writer's hooks, no record (``_judge`` off);
  (rv)  the record too, no live verdict (the flow not described nor sent to the verdict worker);
  (cq)  the recorder as shipped, ``mcp_console=false``;
  (c)   the recorder as shipped, its console line going to a file (as bench_addon.py's (c)).

The switches are in ``recorder_parts_addon.py``, next to this file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_addon as bench  # noqa: E402

PARTS = HERE / "recorder_parts_addon.py"
# key, label, extra mitmdump arguments, what recorder_parts_addon.py switches off
SETUPS = [
    ("bw", "no addon", [], None),
    ("n", "hooks that return at once", ["-s", str(PARTS)], "everything"),
    ("r", "recognition and writer, no record", ["-s", str(PARTS)], "judge"),
    ("rv", "the record, no live verdict", ["-s", str(PARTS)], "verdict"),
    ("cq", "as shipped, no console line", ["-s", str(bench.ADDON), "--set", "mcp_console=false"], None),
    ("c", "as shipped", ["-s", str(bench.ADDON)], None),
]


def start(setup: bench.Setup, upstream: int, workdir: Path, extra: list[str], off: str | None) -> None:
    setup.port = bench.free_port()
    command = [bench.MITMDUMP, "--mode", f"reverse:http://{bench.HOST}:{upstream}", "--listen-host", bench.HOST]
    command += ["-p", str(setup.port), "--set", "flow_detail=0", "-w", str(workdir / f"{setup.key}.flows"), *extra]
    environment = {**os.environ, "MCP_BLACKBOX_BENCH_OFF": off or ""}
    setup.log = workdir / f"{setup.key}.log"
    with setup.log.open("wb") as log:
        setup.proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment
        )
    bench.wait_listening(setup, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="POSTs per setup per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    args = parser.parse_args()
    setups = [bench.Setup(key, f"({key}) {label}", sse=False) for key, label, _, _ in SETUPS]
    upstream = None
    with tempfile.TemporaryDirectory(prefix="bench-recorder-parts-") as tmp:
        try:
            upstream, port = bench.start_upstream()
            for setup, (_, _, extra, off) in zip(setups, SETUPS, strict=True):
                start(setup, port, Path(tmp), extra, off)
            bench.run_posts(setups, bench.WARMUP_POSTS, first_id=1)
            next_id = bench.WARMUP_POSTS + 1
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr)
                for key, values in bench.run_posts(bench.rotated(setups, r), args.requests, next_id).items():
                    next(s for s in setups if s.key == key).post["p50"].append(bench.percentile(values, 0.50))
                next_id += args.requests
        finally:
            for setup in setups:
                bench.stop(setup.proc)
            if upstream is not None:
                upstream.kill()
                upstream.wait(5)
    report(setups, args)


def report(setups: list[bench.Setup], args: argparse.Namespace) -> None:
    print(f"{args.requests} keep-alive POSTs per setup per round, {args.rounds} rounds, {os.cpu_count()} CPUs")
    base = setups[0]
    previous = base
    print(f"{'setup':<44} {'p50 ms':>8} {'/(bw)':>7} {'step':>7}   /(bw) per round")
    for setup in setups:
        p50 = statistics.median(setup.post["p50"])
        ratio = p50 / statistics.median(base.post["p50"])
        step = ratio - statistics.median(previous.post["p50"]) / statistics.median(base.post["p50"])
        rounds = " ".join(f"{x / y:.3f}" for x, y in zip(setup.post["p50"], base.post["p50"], strict=True))
        print(f"{setup.label:<44} {p50 * 1000:8.3f} {ratio:7.3f} {step:+7.3f}   {rounds}")
        previous = setup
    print("step: the change of the ratio from the setup above; the spread of the rounds is the noise")


if __name__ == "__main__":
    main()
