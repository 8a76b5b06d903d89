"""Weighing a compiled flow-file reader (issue 23): the tnetstring reader as it is, and compiled by mypyc.

    .venv/bin/python tests/benchmarks/bench_reader.py [--records N] [--capture FILE]

A benchmark, not a test: it prints numbers and exits 0 (1 if mypyc or a C compiler is missing).

The decoding workers of ``export`` spend most of their time in ``analyzer/wire/tnetstring_reader.py``
(63% of a worker's profile on a synthetic capture, 2026-12-07), and on a 2-core machine the workers and the
main process share the cores, so the reader's speed is the export's. This compiles a copy of the reader
with mypyc (as black and mypy ship themselves) in a temporary directory, with the one change mypyc needs
(``Encoded`` subclasses ``bytes``: a non-native class), and times both on the same records, in alternating
rounds, for the fields the analysis reads and for whole records. It also checks that both decode every
record alike. Nothing here changes what the project ships: it measures whether shipping a compiled reader
would be worth the packaging (a wheel per platform, a pure-Python fallback where no compiler is).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from mcp_blackbox.analyzer.read.load import ANALYSIS_FIELDS
from mcp_blackbox.analyzer.wire import tnetstring_reader

HERE = Path(__file__).resolve().parent
NATIVE_EXCEPTION = "@mypyc_attr(native_class=False)\nclass Encoded(bytes):"


def compiled_reader(workdir: Path) -> ModuleType:
    """The reader's source, compiled by mypyc in ``workdir`` and imported under another name."""
    source = Path(tnetstring_reader.__file__).read_text()
    assert source.count("class Encoded(bytes):") == 1, "the reader changed: update this benchmark"
    source = "from mypy_extensions import mypyc_attr\n" + source.replace("class Encoded(bytes):", NATIVE_EXCEPTION)
    (workdir / "reader_compiled.py").write_text(source)
    mypyc = Path(sys.executable).with_name("mypyc")
    done = subprocess.run([str(mypyc), "reader_compiled.py"], cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mypyc could not compile the reader:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    (workdir / "reader_compiled.py").unlink()  # import the extension, not the source beside it
    built = next(workdir.glob("reader_compiled.*.so"))
    spec = importlib.util.spec_from_file_location("reader_compiled", built)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def records_of(capture: Path, count: int) -> list[bytes]:
    records: list[bytes] = []
    with capture.open("rb") as handle:
        while len(records) < count and (record := tnetstring_reader.read_record(handle)) is not None:
            records.append(record)
    return records


def per_record_us(decode: Any, records: list[bytes], want: Any) -> float:
    started = time.perf_counter()
    for record in records:
        decode(record, want)
    return (time.perf_counter() - started) / len(records) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="flow records timed (default 10000)")
    parser.add_argument("--capture", type=Path, help="a flow file to read (default: a synthetic one, generated)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        raise SystemExit("no C compiler: mypyc cannot build here")
    with tempfile.TemporaryDirectory(prefix="bench-reader-") as tmp:
        workdir = Path(tmp)
        capture = args.capture
        if capture is None:
            capture = workdir / "synthetic.flows"
            generator = [sys.executable, str(HERE / "synthetic_capture.py"), "--calls", str(args.records), "-o"]
            subprocess.run([*generator, str(capture)], check=True, capture_output=True)
        records = records_of(capture, args.records)
        started = time.monotonic()
        compiled = compiled_reader(workdir)
        build_s = time.monotonic() - started
        same = all(compiled.decode(r, ANALYSIS_FIELDS) == tnetstring_reader.decode(r, ANALYSIS_FIELDS) for r in records)
        same = same and all(compiled.decode(r) == tnetstring_reader.decode(r) for r in records[:2000])
        figures: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name, module in (("pure", tnetstring_reader), ("mypyc", compiled)):
                for label, want in (("analysis fields", ANALYSIS_FIELDS), ("whole records", True)):
                    figures.setdefault((name, label), []).append(per_record_us(module.decode, records, want))
    print(
        f"reader benchmark: {len(records)} records of {capture.name}, {args.rounds} alternating rounds, median; "
        f"mypyc built the reader in {build_s:.1f} s; both decode every record alike: {same}"
    )
    for label in ("analysis fields", "whole records"):
        pure = statistics.median(figures[("pure", label)])
        fast = statistics.median(figures[("mypyc", label)])
        print(f"  {label:<16} pure {pure:7.1f} us/record, mypyc {fast:7.1f} us/record: {fast / pure:.3f}x")


if __name__ == "__main__":
    main()
