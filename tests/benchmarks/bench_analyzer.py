"""How fast the offline analyzer reads a large capture, against mitmproxy's own reader, in one run.

    .venv/bin/python tests/benchmarks/bench_analyzer.py [--calls N] [--file F] [--seed S] [--regenerate]

A benchmark, not a test: it prints numbers and PASS/MISS lines and exits 0 either way.

1. The capture: ``synthetic_capture.py`` (next to this file) with N JSON-RPC requests (default
   100,000; see that module for the mix). With ``--file F`` an existing F is reused as it is, a
   missing one is generated there; without it the capture is cached in the temp directory under a
   name holding N, the seed, the client count and the generator version, and reused on the next
   run (``--regenerate`` writes it again).
2. Two phases, each in a fresh Python process so that neither inherits the other's memory or
   imports, over the same file (read once beforehand, so both find it in the page cache):
   - ``read``: ``mitmproxy.io.FlowReader(f).stream()``, every flow consumed, nothing else: the
     floor any analysis that goes through mitmproxy's Flow objects pays;
   - ``analyze``: ``analyze([path])`` then ``export.write_json(result, fp)`` (mcp_blackbox.analyzer) into
     a temp file: the whole analysis, as ``report``, ``check`` and ``diff`` read;
   - ``export``: ``write_json`` of a ``CallStream`` with the export's window: what ``mcp-blackbox
     export --format json`` does, each call written once final.
   Each phase times its own work (imports excluded, reported apart) and reports its peak RSS:
   ``VmHWM`` from /proc/self/status, which execve resets, so the figure is the phase's (imports
   included) and nothing else's; ``ru_maxrss`` of ``getrusage(RUSAGE_SELF)`` is printed beside it
   but Linux carries it over from the forking parent across execve, so it can read higher (it is
   the fallback where /proc is missing).
3. Goals: analysis time / FlowReader time below 1.0, and analysis peak RSS below 400 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RATIO_GOAL = 1.0
RSS_GOAL_MB = 400.0


# ---------------------------------------------------------------------------- phases (child side)


def peak_rss_mb() -> dict[str, float | None]:
    maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    hwm_kb: float | None = None
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm_kb = float(line.split()[1])
    except OSError:
        pass
    return {"ru_maxrss_mb": maxrss_kb / 1024, "vmhwm_mb": hwm_kb / 1024 if hwm_kb is not None else None}


def phase_read(path: Path) -> dict[str, Any]:
    began = time.perf_counter()
    from mitmproxy import io as flow_io

    imported = time.perf_counter()
    flows = 0
    with path.open("rb") as f:
        for _ in flow_io.FlowReader(f).stream():
            flows += 1
    done = time.perf_counter()
    return {"import_s": imported - began, "seconds": done - imported, "flows": flows, **peak_rss_mb()}


def phase_analyze(path: Path) -> dict[str, Any]:
    began = time.perf_counter()
    sys.path.insert(0, str(REPO))
    try:
        import mcp_blackbox.analyzer
        import mcp_blackbox.analyzer.outputs.export
    except Exception as e:  # the analyzer may not exist yet, or not build
        return {"error": f"analyzer not importable: {type(e).__name__}: {e}"}
    imported = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-analyzer-") as tmp:
        out = Path(tmp) / "calls.json"
        result = mcp_blackbox.analyzer.analyze([path])
        analyzed = time.perf_counter()
        with out.open("w", encoding="utf-8") as fp:
            mcp_blackbox.analyzer.outputs.export.write_json(result, fp)
        done = time.perf_counter()
        json_bytes = out.stat().st_size
    skipped = getattr(result, "skipped", None)
    return {
        "import_s": imported - began,
        "seconds": done - imported,
        "analyze_s": analyzed - imported,
        "write_json_s": done - analyzed,
        "calls": len(result.calls),
        "flows_read": getattr(result, "flows_read", None),
        "skipped": len(skipped) if skipped is not None else None,
        "json_bytes": json_bytes,
        **peak_rss_mb(),
    }


def phase_export(path: Path) -> dict[str, Any]:
    """What ``mcp-blackbox export F -o calls.json`` does since issue 12: each call written once final."""
    began = time.perf_counter()
    from mcp_blackbox.analyzer.across.call_stream import DEFAULT_WINDOW, CallStream
    from mcp_blackbox.analyzer.outputs.export import write_json

    imported = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-analyzer-") as tmp, (Path(tmp) / "calls.json").open("w") as fp:
        stream = CallStream([path], window=DEFAULT_WINDOW)
        write_json(stream, fp)
    return {"import_s": imported - began, "seconds": time.perf_counter() - imported, **peak_rss_mb()}


PHASES = {"read": phase_read, "analyze": phase_analyze, "export": phase_export}


# ---------------------------------------------------------------------------- driver (parent side)


def run_phase(name: str, path: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--phase", name, "--file", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        return {"error": f"phase {name} exited {proc.returncode}:\n    " + "\n    ".join(tail)}
    return json.loads(lines[-1])


def default_capture(calls: int, seed: int, clients: int) -> Path:
    from synthetic_capture import GENERATOR_VERSION

    folder = Path(tempfile.gettempdir()) / "mcp-blackbox-bench"
    folder.mkdir(exist_ok=True)
    return folder / f"synthetic-calls{calls}-seed{seed}-clients{clients}-v{GENERATOR_VERSION}.flows"


def ensure_capture(args: argparse.Namespace) -> Path:
    sys.path.insert(0, str(HERE))
    import synthetic_capture

    path: Path = args.file or default_capture(args.calls, args.seed, args.clients)
    if path.exists() and not args.regenerate:
        print(f"capture       {path} (reused)")
        return path
    partial = path.with_name(path.name + ".partial")
    began = time.perf_counter()
    stats = synthetic_capture.generate(partial, args.calls, args.seed, args.clients)
    os.replace(partial, path)  # an interrupted run never leaves a capture that looks complete
    elapsed = time.perf_counter() - began
    print(
        f"capture       {path} (generated in {elapsed:.1f} s: {stats['requests']:,} JSON-RPC requests, "
        f"{stats['flows']:,} flows, {stats['sessions']:,} sessions)"
    )
    return path


def warm_page_cache(path: Path) -> None:
    with path.open("rb") as f:
        while f.read(8 << 20):
            pass


def mb(value: float | None) -> str:
    return f"{value:,.0f} MB" if value is not None else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000, help="JSON-RPC requests in the capture (default 100000)")
    parser.add_argument("--file", type=Path, help="capture to reuse, or to generate if missing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clients", type=int, default=4, help="concurrent client lanes in a generated capture")
    parser.add_argument("--regenerate", action="store_true", help="write the capture again even if it exists")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase:  # child process: one phase, one JSON line
        print(json.dumps(PHASES[args.phase](args.file)))
        return 0

    began = time.perf_counter()
    path = ensure_capture(args)
    size = path.stat().st_size
    print(f"file size     {size / 1e6:,.1f} MB ({size:,} bytes)")
    warm_page_cache(path)

    read = run_phase("read", path)
    if "error" in read:
        print(f"FlowReader    FAILED: {read['error']}")
        return 0
    flows = read["flows"]
    read_rate = flows / read["seconds"]
    print(
        f"FlowReader    {flows:,} flows in {read['seconds']:.1f} s = {read_rate:,.0f} flows/s; "
        f"peak RSS {mb(read['vmhwm_mb'])} (ru_maxrss {mb(read['ru_maxrss_mb'])}); import {read['import_s']:.2f} s"
    )

    result = run_phase("analyze", path)
    if "error" in result:
        print(f"analysis      not run: {result['error']}")
        print(f"MISS  ratio analysis/FlowReader: not measured (goal < {RATIO_GOAL:.1f})")
        print(f"MISS  analysis peak RSS: not measured (goal < {RSS_GOAL_MB:.0f} MB)")
        print(f"total {time.perf_counter() - began:.0f} s")
        return 0
    rate = flows / result["seconds"]
    print(
        f"analysis      analyze() {result['analyze_s']:.1f} s + write_json() {result['write_json_s']:.1f} s "
        f"= {result['seconds']:.1f} s = {rate:,.0f} flows/s; peak RSS {mb(result['vmhwm_mb'])} "
        f"(ru_maxrss {mb(result['ru_maxrss_mb'])}); import {result['import_s']:.2f} s"
    )
    skipped = result["skipped"]
    print(
        f"              {result['calls']:,} calls, flows_read {result['flows_read']}, skipped {skipped}, "
        f"JSON {result['json_bytes'] / 1e6:,.1f} MB"
    )
    if result["flows_read"] is not None and result["flows_read"] != flows:
        print(f"NOTE  the analyzer read {result['flows_read']:,} flows, FlowReader {flows:,}")
    ratio = result["seconds"] / read["seconds"]
    rss = result["vmhwm_mb"] if result["vmhwm_mb"] is not None else result["ru_maxrss_mb"]
    verdict = "PASS" if ratio < RATIO_GOAL else "MISS"
    print(f"{verdict}  ratio analysis/FlowReader = {ratio:.2f} (goal < {RATIO_GOAL:.1f})")
    verdict = "PASS" if rss < RSS_GOAL_MB else "MISS"
    print(f"{verdict}  analysis peak RSS = {rss:,.0f} MB (goal < {RSS_GOAL_MB:.0f} MB)")
    streamed = run_phase("export", path)
    if "error" in streamed:
        print(f"export        not run: {streamed['error']}")
    else:
        print(
            f"export        the calls written as they become final (CallStream, the export's window): "
            f"{streamed['seconds']:.1f} s = {streamed['seconds'] / read['seconds']:.2f} of FlowReader; "
            f"peak RSS {mb(streamed['vmhwm_mb'])}"
        )
    print(f"total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
