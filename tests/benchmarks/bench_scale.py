"""A day of traffic: a million calls in rotated files, read, analyzed, exported and reported, in one run.

    .venv/bin/python tests/benchmarks/bench_scale.py [--calls N] [--dir D] [--rotate-mb M] [--seed S] [--regenerate]

A benchmark, not a test: it prints numbers and PASS/MISS lines and exits 0 either way.

1. The capture: ``synthetic_capture.py`` (next to this file) with N JSON-RPC requests (default
   1,000,000), written as the recorder rotates its files: a directory of ``mcp-<UTC start>-<n>.flows``
   files of about ``--rotate-mb`` MB each (default 64), each started when the first flow after a
   rotation ends, named by that flow's completion time (``addon/rotation.py``'s ``rotated_name``). The
   analyzer reads the directory as one capture (``analyzer/wire/inputs.py``). Cached in the temp directory
   under a name holding N, the seed, the client count, the file size and the generator version, and
   reused on the next run (``--regenerate`` writes it again; ``--dir D`` uses D instead).
2. Two lengths at the same rate: N calls and N/2 (``--calls``; ``--short`` for another fraction), each its
   own capture (the same generator and seed, so the shorter is the same traffic for half as long).
3. Phases, each in a fresh Python process (as bench_analyzer.py: imports excluded from the times, peak
   RSS from ``VmHWM``; the garbage collector set as the installed command sets it), over the same files,
   read once beforehand into the page cache when they fit:
   - ``read``: ``mitmproxy.io.FlowReader(f).stream()`` over every file, every flow consumed;
   - ``export``: ``export.write_json`` of a ``CallStream`` over DIR (the default window) into /dev/null:
     what ``mcp-blackbox export DIR -o /dev/null`` does, each call written once final;
   - ``check``: ``review.check.judge`` over the same stream: what ``mcp-blackbox check DIR`` does;
   - ``report``: ``write_report`` of a ``CallStream`` over DIR (the default window): what
     ``mcp-blackbox report DIR`` does, each call kept once final and the page built from what it shows;
   - ``diff``: ``review.diff`` of DIR against itself, each side read through the stream and kept on disk:
     what ``mcp-blackbox diff DIR DIR`` does; its ratio is to FlowReader reading both sides;
   then the longer report's size and its time to interactive in headless Chromium (median of 3 loads,
   ``report_timing.py``, shared with bench_report.py). Printed per length: each phase's time, its ratio to
   FlowReader's and its peak RSS; then each phase's growth from N/2 to N (time and RSS), so that a
   structure growing with the recording shows.
4. Goals (issue 23): export at most 0.5 of FlowReader's time and report at most 1.0; every phase's peak RSS
   under 1 GB, export's and diff's under 500 MB, and at most 1.15x from N/2 to N; the report under 50 MB and
   interactive in under 3 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO)]

from bench_analyzer import mb, peak_rss_mb  # noqa: E402

from mcp_blackbox.analyzer.read.collector import fewer_collections  # noqa: E402  (as the command does)

RATIO_GOAL = 0.5
REPORT_RATIO_GOAL = 1.0
RSS_GOAL_MB = 500.0
ANY_RSS_GOAL_MB = 1000.0
GROWTH_GOAL = 1.15  # peak RSS from N/2 to N calls at the same rate
REPORT_MB_GOAL = 50.0
READY_MS_GOAL = 3000.0
COMPLETE = ".complete"  # written last: a directory without it is an interrupted generation


# ---------------------------------------------------------------------------- the capture


def generate_rotated(directory: Path, calls: int, seed: int, clients: int, rotate_bytes: int) -> dict[str, Any]:
    """The synthetic capture as rotated files in ``directory``: a new file once the current one has passed
    ``rotate_bytes``, opened when the next flow ends (the recorder's rule: no empty files)."""
    import synthetic_capture
    from mitmproxy.io import tnetstring

    from mcp_blackbox.addon.rotation import rotated_name

    generator = synthetic_capture.CaptureGenerator(calls, seed, clients)
    files = 0
    out = None
    try:
        for completed, f in generator.timed_flows():
            if out is None or out.tell() >= rotate_bytes:
                if out is not None:
                    out.close()
                files += 1
                out = open(directory / rotated_name(completed, files), "wb", buffering=1 << 20)  # noqa: SIM115
            tnetstring.dump(f.get_state(), out)  # what FlowWriter.add writes
            generator.stats["flows"] += 1
    finally:
        if out is not None:
            out.close()
    return {**generator.stats, "files": files}


def default_directory(calls: int, seed: int, clients: int, rotate_mb: int) -> Path:
    from synthetic_capture import GENERATOR_VERSION

    folder = Path(tempfile.gettempdir()) / "mcp-blackbox-bench"
    folder.mkdir(exist_ok=True)
    return folder / f"rotated-calls{calls}-seed{seed}-clients{clients}-{rotate_mb}MB-v{GENERATOR_VERSION}"


def ensure_capture(args: argparse.Namespace, calls: int) -> Path:
    directory: Path = args.dir or default_directory(calls, args.seed, args.clients, args.rotate_mb)
    if (directory / COMPLETE).exists() and not args.regenerate:
        print(f"capture       {directory} (reused)")
        return directory
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    began = time.perf_counter()
    stats = generate_rotated(partial, calls, args.seed, args.clients, args.rotate_mb << 20)
    (partial / COMPLETE).write_text(json.dumps(stats) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(partial, directory)  # an interrupted run never leaves a capture that looks complete
    print(
        f"capture       {directory} (generated in {time.perf_counter() - began:.0f} s: {stats['requests']:,} "
        f"JSON-RPC requests, {stats['flows']:,} flows, {stats['sessions']:,} sessions, {stats['files']} files)"
    )
    return directory


def capture_files(directory: Path) -> list[Path]:
    from mcp_blackbox.analyzer.wire.inputs import directory_captures

    return [Path(p) for p in directory_captures(directory)]


def warm_page_cache(files: list[Path]) -> bool:
    """Read the files once, so that every phase finds them in the page cache, when they fit in it."""
    total = sum(f.stat().st_size for f in files)
    available = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            available = int(line.split()[1]) * 1024
    if total > available // 2:
        return False
    for path in files:
        with path.open("rb") as f:
            while f.read(8 << 20):
                pass
    return True


# ---------------------------------------------------------------------------- phases (child side)


def phase_read(directory: Path, _: Path | None) -> dict[str, Any]:
    began = time.perf_counter()
    from mitmproxy import io as flow_io

    files = capture_files(directory)
    imported = time.perf_counter()
    flows = 0
    for path in files:
        with path.open("rb") as f:
            for _flow in flow_io.FlowReader(f).stream():
                flows += 1
    done = time.perf_counter()
    return {"import_s": imported - began, "seconds": done - imported, "flows": flows, **peak_rss_mb()}


def phase_analyze(directory: Path, _: Path | None) -> dict[str, Any]:
    """What ``mcp-blackbox export DIR -o /dev/null`` does: the calls written as they become final."""
    began = time.perf_counter()
    from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream
    from mcp_blackbox.analyzer.outputs.export import write_json

    imported = time.perf_counter()
    fewer_collections()
    stream = CallStream([directory], window=DEFAULT_WINDOW)
    with open(os.devnull, "w", encoding="utf-8") as fp:
        write_json(stream, fp)
    done = time.perf_counter()
    return {
        "import_s": imported - began,
        "seconds": done - imported,
        "calls": stream.call_count,
        "flows_read": stream.flows_read,
        "skipped": len(stream.skipped),
        **peak_rss_mb(),
    }


def phase_report(directory: Path, out: Path | None) -> dict[str, Any]:
    assert out is not None
    began = time.perf_counter()
    from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream
    from mcp_blackbox.analyzer.review.report import write_report

    imported = time.perf_counter()
    fewer_collections()
    data = write_report([directory], out, analysis=CallStream([directory], window=DEFAULT_WINDOW))
    done = time.perf_counter()
    meta = data["meta"]
    return {
        "import_s": imported - began,
        "seconds": done - imported,
        "calls": meta["calls"],
        "rows": len(data["calls"]),
        "aggregated": meta.get("aggregated", 0),
        "bytes": out.stat().st_size,
        **peak_rss_mb(),
    }


def phase_check(directory: Path, _: Path | None) -> dict[str, Any]:
    """What ``mcp-blackbox check DIR`` does: every call judged as the stream makes it final."""
    began = time.perf_counter()
    from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream
    from mcp_blackbox.analyzer.review.check import judge

    imported = time.perf_counter()
    fewer_collections()
    gate = judge(CallStream([directory], window=DEFAULT_WINDOW), [str(directory)])
    done = time.perf_counter()
    return {"import_s": imported - began, "seconds": done - imported, "calls": gate.calls, **peak_rss_mb()}


def phase_diff(directory: Path, _: Path | None) -> dict[str, Any]:
    """What ``mcp-blackbox diff DIR DIR`` does: both sides read through the stream, matched from disk."""
    began = time.perf_counter()
    from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream
    from mcp_blackbox.analyzer.review.diff import diff
    from mcp_blackbox.analyzer.review.diff_side import Side

    imported = time.perf_counter()
    fewer_collections()
    with Side.of(CallStream([directory], window=DEFAULT_WINDOW)) as before:
        read_once = time.perf_counter()
        with Side.of(CallStream([directory], window=DEFAULT_WINDOW)) as after:
            read_twice = time.perf_counter()
            result = diff(before, after)
    done = time.perf_counter()
    return {
        "import_s": imported - began,
        "seconds": done - imported,
        "sides_s": [read_once - imported, read_twice - read_once],
        "match_s": done - read_twice,
        "calls": result["calls"]["before"],
        "matched": result["calls"]["matched"],
        **peak_rss_mb(),
    }


PHASES = {
    "read": phase_read,
    "export": phase_analyze,
    "check": phase_check,
    "report": phase_report,
    "diff": phase_diff,
}
BOTH_SIDES = {"diff"}  # phases that read the capture twice: their ratio is to two FlowReader reads


# ---------------------------------------------------------------------------- driver (parent side)


def run_phase(name: str, directory: Path, out: Path | None = None) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--phase", name, "--dir", str(directory)]
    if out is not None:
        argv += ["--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        return {"error": f"phase {name} exited {proc.returncode}:\n    " + "\n    ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def goal(ok: bool, text: str) -> None:
    print(f"{'PASS' if ok else 'MISS'}  {text}")


def measure(args: argparse.Namespace, calls: int, out: Path) -> dict[str, dict[str, Any]]:
    """Every phase over a capture of ``calls`` calls, each result printed as it comes."""
    directory = ensure_capture(args, calls)
    files = capture_files(directory)
    size = sum(f.stat().st_size for f in files)
    cached = "" if warm_page_cache(files) else " (not pre-read: too big for the page cache)"
    print(f"  {len(files)} rotated files, {size / 1e6:,.0f} MB{cached}")
    results: dict[str, dict[str, Any]] = {}
    for name in (name for name in PHASES if name == "read" or name in args.only):
        result = results[name] = run_phase(name, directory, out if name == "report" else None)
        if "error" in result:
            print(f"  {name:8} FAILED: {result['error']}")
            continue
        reads = 2 if name in BOTH_SIDES else 1
        ratio = result["seconds"] / (reads * results["read"]["seconds"]) if "seconds" in results["read"] else math.nan
        extra = f"{result['flows']:,} flows" if name == "read" else f"{result.get('calls', 0):,} calls"
        if name == "diff":
            first, second = result["sides_s"]
            extra += (
                f" against themselves: sides read in {first:.1f} + {second:.1f} s, {result['matched']:,} requests "
                f"matched in {result['match_s']:.1f} s"
            )
        if name == "report":
            extra += (
                f", {result['bytes'] / 2**20:,.1f} MB, {result['rows']:,} rows ({result['aggregated']:,} aggregated)"
            )
        print(
            f"  {name:8} {result['seconds']:7.1f} s  {ratio:5.2f}x FlowReader  "
            f"peak RSS {mb(result['vmhwm_mb']):>8}  {extra}"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000, help="JSON-RPC requests (default 1000000)")
    parser.add_argument("--short", type=float, default=0.5, help="the shorter capture's length, as a fraction")
    parser.add_argument("--dir", type=Path, help="directory of rotated files to reuse (one length only)")
    parser.add_argument("--rotate-mb", type=int, default=64, help="size of one rotated file in MB (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clients", type=int, default=4, help="concurrent client lanes in a generated capture")
    parser.add_argument("--regenerate", action="store_true", help="write the capture again even if it exists")
    parser.add_argument("--no-browser", action="store_true", help="skip the report's time to interactive")
    parser.add_argument(
        "--only", type=lambda text: text.split(","), default=list(PHASES), metavar="PHASE,...",
        help=f"the phases to run, of {','.join(PHASES)} (read always runs: the others' ratios are to it)",
    )  # fmt: skip
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase:  # child process: one phase, one JSON line
        print(json.dumps(PHASES[args.phase](args.dir, args.out)))
        return 0

    began = time.perf_counter()
    lengths = [args.calls] if args.dir else [round(args.calls * args.short), args.calls]
    by_length: dict[int, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        out = Path(tmp) / "report.html"
        for calls in lengths:
            print(f"{calls:,} calls ({args.clients} client lanes)")
            by_length[calls] = measure(args, calls, out)
        report = by_length[lengths[-1]].get("report", {})
        if report and "error" not in report and not args.no_browser:
            from report_timing import time_to_interactive

            report.update(time_to_interactive(out, timeout=300))
            print(
                f"  report interactive in {report['ready_ms']:,.0f} ms (median of {report['ready_runs']} of "
                f"{report['runs']} loads), console/page errors {report['errors']}"
            )
    print()
    judge_goals(by_length, lengths)
    print(f"total {time.perf_counter() - began:.0f} s")
    return 0


def judge_goals(by_length: dict[int, dict[str, dict[str, Any]]], lengths: list[int]) -> None:
    longest = by_length[lengths[-1]]
    read = longest["read"].get("seconds")
    for name, most in (("export", RATIO_GOAL), ("report", REPORT_RATIO_GOAL)):
        seconds = longest.get(name, {}).get("seconds")
        if read and seconds:
            goal(seconds / read <= most, f"{name} / FlowReader = {seconds / read:.2f} (goal <= {most})")
    for name in ("export", "check", "report", "diff"):
        rss = longest.get(name, {}).get("vmhwm_mb")
        most = RSS_GOAL_MB if name in ("export", "diff") else ANY_RSS_GOAL_MB
        if rss is not None:
            goal(rss < most, f"{name} peak RSS = {mb(rss)} (goal < {most:.0f} MB)")
        if len(lengths) == 2 and rss is not None and (short := by_length[lengths[0]].get(name, {}).get("vmhwm_mb")):
            growth = rss / short
            times = longest[name]["seconds"] / by_length[lengths[0]][name]["seconds"]
            goal(
                growth <= GROWTH_GOAL,
                f"{name} peak RSS {lengths[0]:,} -> {lengths[-1]:,} calls: {growth:.3f}x (goal <= {GROWTH_GOAL}); "
                f"time {times:.2f}x",
            )
    report = longest.get("report", {})
    if "bytes" in report:
        size_mb = report["bytes"] / 2**20
        goal(size_mb < REPORT_MB_GOAL, f"report size = {size_mb:,.1f} MB (goal < {REPORT_MB_GOAL:.0f} MB)")
    if "ready_ms" in report:
        ready = report["ready_ms"]
        goal(ready < READY_MS_GOAL, f"report interactive in {ready:,.0f} ms (goal < {READY_MS_GOAL / 1000:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
