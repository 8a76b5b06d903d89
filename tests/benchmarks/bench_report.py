"""What the HTML report costs at scale: file size and time to interactive in headless Chromium.

    .venv/bin/python tests/benchmarks/bench_report.py [--calls N] [--file F]

A benchmark, not a test. It renders the report of a synthetic capture of N calls (default
100,000; the same generator and cache as bench_analyzer.py), then opens it in Debian's
chromium through the browser harness and reads ``ready_ms``: navigation start to the page
setting ``window.__reportReady`` (table, filters and timeline drawn). For scale it also opens
the report of the sample captures (about 100 calls) in the same run. Goals: under 50 MB and
interactive in under 3 s at 100,000 calls. Exits 0 either way.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO)]

from bench_analyzer import default_capture  # noqa: E402
from report_timing import time_to_interactive  # noqa: E402
from synthetic_capture import generate  # noqa: E402

from mcp_blackbox.analyzer.review.report import write_report  # noqa: E402


def measure(label: str, captures: list[Path], out: Path) -> dict[str, float]:
    start = time.perf_counter()
    data = write_report(captures, out)
    render_s = time.perf_counter() - start
    timing = time_to_interactive(out, runs=3, timeout=180)
    size_mb = out.stat().st_size / 2**20
    aggregated = data["meta"]["aggregated"]
    print(
        f"{label:<28} {data['meta']['calls']:>8} calls ({len(data['calls'])} rows, {aggregated} aggregated)  "
        f"{size_mb:7.1f} MB  render {render_s:6.1f} s  interactive {timing['ready_ms']:8.0f} ms "
        f"(median of {timing['ready_runs']})  console/page errors {timing['errors']}"
    )
    return {"size_mb": size_mb, "ready_ms": timing["ready_ms"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--file", type=Path)
    args = parser.parse_args()
    capture = args.file or default_capture(args.calls, 0, 4)
    if not capture.exists():
        print(f"generating {capture} ({args.calls} calls)…", file=sys.stderr)
        generate(capture, args.calls, 0, 4)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        samples = sorted((REPO / "sample_captures").glob("*.flows"))
        measure("sample captures", samples, Path(tmp) / "samples.html")
        big = measure(f"synthetic {args.calls} calls", [capture], Path(tmp) / "big.html")
    print()
    print(f"goal: under 50 MB           {big['size_mb']:7.1f} MB  -> {'PASS' if big['size_mb'] < 50 else 'MISS'}")
    print(f"goal: interactive under 3 s {big['ready_ms']:7.0f} ms  -> {'PASS' if big['ready_ms'] < 3000 else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
