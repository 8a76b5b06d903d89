"""The flow-record decoder as Python source and as mypyc compiled it (issue 23): both timed on the same records.

    .venv/bin/python tests/benchmarks/bench_reader.py [--records N] [--capture FILE]

A benchmark, not a test: it prints numbers and exits 0 (1 if the package was installed without the compiled
decoder: no mypyc or no C compiler when ``pip install`` ran, see setup.py).

The decoding workers of ``export`` spend most of their time decoding records
(``analyzer/wire/tnetstring_decoder.py``: 63% of a worker's profile on a synthetic capture, 2026-12-07), and
on a 2-core machine the workers and the main process share the cores, so the decoder's speed is the export's.
``setup.py`` compiles the decoder with mypyc (as black and mypy ship themselves); this times the compiled
module the reader uses against the source, in alternating rounds, for the fields the analysis reads and for
whole records, and checks that both decode every record alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp_blackbox.analyzer.read.load import ANALYSIS_FIELDS
from mcp_blackbox.analyzer.wire import tnetstring_decoder, tnetstring_reader

HERE = Path(__file__).resolve().parent


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
    compiled = tnetstring_reader.compiled_decoder()
    if compiled is None:
        raise SystemExit("no compiled decoder installed (see setup.py): nothing to compare")
    with tempfile.TemporaryDirectory(prefix="bench-reader-") as tmp:
        capture = args.capture
        if capture is None:
            capture = Path(tmp) / "synthetic.flows"
            generator = [sys.executable, str(HERE / "synthetic_capture.py"), "--calls", str(args.records), "-o"]
            subprocess.run([*generator, str(capture)], check=True, capture_output=True)
        records = records_of(capture, args.records)
    same = all(compiled.decode(r, ANALYSIS_FIELDS) == tnetstring_decoder.decode(r, ANALYSIS_FIELDS) for r in records)
    same = same and all(compiled.decode(r) == tnetstring_decoder.decode(r) for r in records[:2000])
    figures: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, module in (("source", tnetstring_decoder), ("mypyc", compiled)):
            for label, want in (("analysis fields", ANALYSIS_FIELDS), ("whole records", True)):
                figures.setdefault((name, label), []).append(per_record_us(module.decode, records, want))
    print(
        f"decoder benchmark: {len(records)} records of {capture.name}, {args.rounds} alternating rounds, median; "
        f"both decode every record alike: {same}"
    )
    for label in ("analysis fields", "whole records"):
        source = statistics.median(figures[("source", label)])
        fast = statistics.median(figures[("mypyc", label)])
        print(f"  {label:<16} source {source:7.1f} us/record, mypyc {fast:7.1f} us/record: {fast / source:.3f}x")


if __name__ == "__main__":
    main()
