"""Every output of every sample capture and of synthetic captures, written to one folder.

A refactor proves itself by leaving these bytes alone (issue 20): run this before and after the change
and compare the two folders (``diff -r``). Each output is made by the installed ``mcp-blackbox``
command, as a user runs it, so the comparison covers the CLI too.

    python -m tests.support.export_snapshot OUT_DIR

The synthetic captures cover the windowed stream (the default export), the whole analysis
(``--window 0``) and, at 20,000 calls (above the 32 MB threshold), the decoding workers. ``diff`` runs on
each sample against the next and on synthetic captures against each other and themselves, in its three
formats.
"""

from __future__ import annotations

import argparse
import itertools
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.benchmarks import synthetic_capture

ROOT = Path(__file__).resolve().parents[2]
GENERATED = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
SAMPLES = ROOT / "sample_captures"
# (name, calls, seed): the last one is large enough for the parallel decoding path.
SYNTHETIC = [("synthetic-300", 300, 11), ("synthetic-3000", 3000, 5), ("synthetic-20000", 20000, 7)]


def command() -> str:
    found = shutil.which("mcp-blackbox") or str(Path(sys.executable).parent / "mcp-blackbox")
    return found


def run(out: Path, name: str, *args: str) -> None:
    target = out / name
    done = subprocess.run([command(), *args, "-o", str(target)], capture_output=True, text=True, cwd=ROOT)
    # The exit status and what was said are part of the behaviour too; the folder's name is not.
    said = f"{done.returncode}\n{done.stdout}{done.stderr}".replace(str(out), "OUT")
    (out / f"{name}.status").write_text(said)
    if target.suffix == ".html" and target.exists():
        # The one thing that changes from run to run: when the page was made.
        target.write_text(GENERATED.sub("(time)", target.read_text()))


def snapshot_capture(out: Path, label: str, captures: list[str], *, report: bool) -> None:
    run(out, f"{label}.json", "export", *captures, "--format", "json")
    run(out, f"{label}.csv", "export", *captures, "--format", "csv")
    run(out, f"{label}.whole.json", "export", *captures, "--format", "json", "--window", "0")
    run(out, f"{label}.summary.md", "summary", *captures, "--format", "markdown")
    if report:
        run(out, f"{label}.har", "export", *captures, "--format", "har")
        run(out, f"{label}.otlp.json", "export", *captures, "--format", "otlp")
        run(out, f"{label}.report.html", "report", *captures)


def snapshot_diff(out: Path, label: str, before: str, after: str) -> None:
    for form, suffix in (("json", "json"), ("text", "txt"), ("markdown", "md")):
        run(out, f"diff-{label}.{suffix}", "diff", before, after, "--format", form)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    samples = sorted(p for p in SAMPLES.iterdir() if p.name.endswith((".flows", ".stdio.jsonl")))
    for sample in samples:
        snapshot_capture(out, sample.name, [str(sample.relative_to(ROOT))], report=True)
    snapshot_capture(out, "all-samples", [str(s.relative_to(ROOT)) for s in samples], report=True)
    # One fixed place for the synthetic captures, so that before and after read the same paths.
    cache = Path(tempfile.gettempdir()) / "mcp-blackbox-snapshot"
    cache.mkdir(exist_ok=True)
    for name, calls, seed in SYNTHETIC:
        path = cache / f"{name}.flows"
        if not path.exists():
            synthetic_capture.generate(path, calls, seed)
        snapshot_capture(out, name, [str(path)], report=False)
    named = [str(s.relative_to(ROOT)) for s in samples]
    for before, after in itertools.pairwise(named):
        snapshot_diff(out, f"{Path(before).name}-{Path(after).name}", before, after)
    synthetic = {name: str(cache / f"{name}.flows") for name, _, _ in SYNTHETIC}
    for before, after in (("synthetic-300", "synthetic-3000"), ("synthetic-3000", "synthetic-20000"),
                          ("synthetic-20000", "synthetic-20000")):  # fmt: skip
        snapshot_diff(out, f"{before}-{after}", synthetic[before], synthetic[after])
    return 0


if __name__ == "__main__":
    sys.exit(main())
