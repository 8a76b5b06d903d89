"""Long fuzzing of mcp-blackbox: the properties of tests/fuzz with many more examples.

    .venv/bin/python tests/fuzz/long_fuzz.py --seconds 600 --seed 1

The time is shared out: each hypothesis property of tests/fuzz runs in batches (seed S, then S+1, ...)
until its share is used; then a corpus of random bytes and of the sample captures with bytes flipped,
cut, duplicated and spliced goes through analyzer.load and analyzer.extract; then, when atheris is
installed (`pip install atheris`), a coverage-guided atheris run over the same reader, in a child process.
Prints the cases tried per property and every failure (hypothesis's shrunk example, or the input saved
to a file under the temporary directory); exits 1 if any property failed. Not a test: `make test` runs
the bounded tests beside it.
"""

from __future__ import annotations

import argparse
import io
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "sample_captures").glob("*.flows"))
BATCH = 25  # examples per hypothesis run; a property overruns its share by one batch at most


@dataclass
class Outcome:
    name: str
    cases: int = 0
    seconds: float = 0.0
    failure: str | None = None


def hypothesis_properties() -> list[tuple[str, Any, Callable[..., Any]]]:
    from hypothesis import strategies as st

    from tests.fuzz import properties, strategies

    streams = st.tuples(st.lists(strategies.http_flows(), min_size=1, max_size=3), strategies.sse_bodies())
    return [
        ("analyzer: random captures", strategies.captures(), properties.check_flows),
        ("analyzer: random event streams", streams, lambda args: properties.check_event_streams(*args)),
        ("analyzer: retried requests", strategies.retry_captures(), properties.check_flows),
        ("analyzer: flow-file bytes", strategies.flow_file_bytes(), properties.check_bytes),
        ("analyzer: random bytes", st.binary(max_size=2000), properties.check_bytes),
        ("analyzer: HAR files", strategies.har_files(), properties.check_bytes),
        ("addon: hooks and stream callable", strategies.hook_runs(), properties.check_hooks),
        ("report: escaping", properties.captured, properties.check_escaping),
        ("report and exports: redaction", properties.secrets, properties.check_secrets),
    ]


def counting(check: Callable[..., Any], cases: list[int]) -> Callable[[Any], None]:
    def test(value: Any) -> None:
        cases[0] += 1
        check(value)

    return test


def run_hypothesis(name: str, strategy: Any, check: Callable[..., Any], seconds: float, seed: int) -> Outcome:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as fixed_seed

    outcome = Outcome(name)
    start = time.monotonic()
    batch = 0
    while time.monotonic() - start < seconds and outcome.failure is None:
        cases = [0]
        run = given(strategy)(counting(check, cases))
        run = settings(max_examples=BATCH, deadline=None, database=None, suppress_health_check=list(HealthCheck))(run)
        run = fixed_seed(seed * 100_003 + batch)(run)
        try:
            run()
        except Exception as e:  # hypothesis re-raises the shrunk failure, its example in the notes
            outcome.failure = "".join(traceback.format_exception(e)[-12:]) + "\n".join(getattr(e, "__notes__", []))
        outcome.cases += cases[0]
        batch += 1
    outcome.seconds = time.monotonic() - start
    return outcome


def mutate(data: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data) + 1)
        op = rng.choice(["flip", "byte", "cut", "insert", "duplicate", "splice"])
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
        elif op == "byte" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([rng.choice(b"0123456789:,;#^!~]}\x00\xff")]) + data[at + 1 :]
        elif op == "cut":
            data = data[:at]
        elif op == "insert":
            data = data[:at] + rng.randbytes(rng.randint(1, 16)) + data[at:]
        elif op == "duplicate":
            end = min(len(data), at + rng.randint(1, 400))
            data = data[:end] + data[at:end] + data[end:]
        else:
            other = rng.choice(SAMPLES).read_bytes()
            data = data[:at] + other[rng.randrange(len(other)) :]
    return data


def run_corpus(seconds: float, seed: int, failures_dir: Path) -> Outcome:
    """Random and mutated bytes through the loader and the extractor (fast: thousands of cases a second)."""
    from tests.fuzz.properties import check_reading

    outcome = Outcome("mcp_blackbox.analyzer.read.load/extract: random and mutated bytes")
    samples = [p.read_bytes() for p in SAMPLES]
    rng = random.Random(seed)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        random_bytes = rng.random() < 0.15 or not samples
        data = rng.randbytes(rng.randint(0, 3000)) if random_bytes else mutate(rng.choice(samples), rng)
        outcome.cases += 1
        try:
            check_reading(data)
        except Exception:
            failures_dir.mkdir(parents=True, exist_ok=True)
            path = failures_dir / f"corpus-{seed}-{outcome.cases}.flows"
            path.write_bytes(data)
            outcome.failure = f"input saved to {path}\n" + traceback.format_exc(limit=-6)
            break
    outcome.seconds = time.monotonic() - start
    return outcome


def atheris_child(seconds: int, seed: int, workdir: Path) -> None:
    """Runs in a child process: atheris exits the process when it is done."""
    import atheris

    with atheris.instrument_imports(include=["mcp_blackbox"]):
        import mcp_blackbox.analyzer.read.extract
        import mcp_blackbox.analyzer.read.load
        import mcp_blackbox.analyzer.wire.sse_framing
        import mcp_blackbox.analyzer.wire.tnetstring_reader

    def one_input(data: bytes) -> None:
        report = mcp_blackbox.analyzer.read.load.LoadReport()
        exchanges = 0
        handle = io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]
        for exchange in mcp_blackbox.analyzer.read.load._read_file(handle, "fuzz", report, True):
            exchanges += 1
            mcp_blackbox.analyzer.read.extract.extract_messages(exchange, whole=True)
        assert report.flows_read == exchanges + len(report.skipped)

    corpus = workdir / "corpus"
    corpus.mkdir()
    for sample in SAMPLES:
        shutil.copy(sample, corpus / sample.name)
    argv = [sys.argv[0], f"-max_total_time={seconds}", f"-seed={seed}", "-rss_limit_mb=4096"]
    argv += [f"-artifact_prefix={workdir}/", "-print_final_stats=1", str(corpus)]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


def run_atheris(seconds: float, seed: int, failures_dir: Path) -> Outcome | None:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return None
    outcome = Outcome("atheris: mcp_blackbox.analyzer.read.load/extract (coverage-guided)")
    workdir = Path(tempfile.mkdtemp(prefix="atheris-"))
    command = [sys.executable, __file__, "--atheris-child", str(workdir), "--seconds", str(int(seconds)),
               "--seed", str(seed)]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, errors="replace", check=False)
    outcome.seconds = time.monotonic() - start
    log = done.stdout + done.stderr
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log) or re.findall(r"Done (\d+) runs", log)
    outcome.cases = int(runs[-1]) if runs else 0
    if done.returncode != 0:
        crashes = list(workdir.glob("crash-*")) + list(workdir.glob("oom-*")) + list(workdir.glob("timeout-*"))
        saved = []
        for crash in crashes:
            failures_dir.mkdir(parents=True, exist_ok=True)
            saved.append(str(shutil.copy(crash, failures_dir / crash.name)))
        where = log.find("Uncaught Python exception")
        outcome.failure = f"atheris exited {done.returncode}; inputs: {saved}\n" + log[max(0, where) :][-3000:]
    shutil.rmtree(workdir, ignore_errors=True)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120, help="the whole run (default 120)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--atheris-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.atheris_child:
        atheris_child(int(args.seconds), args.seed, args.atheris_child)
        return 0

    failures_dir = Path(tempfile.gettempdir()) / "mcp-blackbox-fuzz-failures"
    properties = hypothesis_properties()
    try:
        import atheris  # noqa: F401

        atheris_share = 0.15
    except ImportError:
        atheris_share = 0.0
    corpus_share = 0.1
    each = args.seconds * (1 - atheris_share - corpus_share) / len(properties)
    outcomes = []
    for name, strategy, check in properties:
        outcomes.append(run_hypothesis(name, strategy, check, each, args.seed))
        print(f"{outcomes[-1].cases:>8} cases  {outcomes[-1].seconds:6.1f} s  {name}", flush=True)
    outcomes.append(run_corpus(args.seconds * corpus_share, args.seed, failures_dir))
    print(f"{outcomes[-1].cases:>8} cases  {outcomes[-1].seconds:6.1f} s  {outcomes[-1].name}", flush=True)
    if atheris_share:
        found = run_atheris(args.seconds * atheris_share, args.seed, failures_dir)
        if found is not None:
            outcomes.append(found)
            print(f"{found.cases:>8} cases  {found.seconds:6.1f} s  {found.name}", flush=True)
    else:
        print("atheris is not installed: its run is skipped (pip install atheris)")
    failed = [o for o in outcomes if o.failure]
    verdict = f"{len(failed)} propert{'y' if len(failed) == 1 else 'ies'} FAILED" if failed else "no failure"
    total = f"{sum(o.cases for o in outcomes)} cases in {sum(o.seconds for o in outcomes):.0f} s"
    print(f"\n{total}, seed {args.seed}: {verdict}")
    for outcome in failed:
        print(f"\n=== {outcome.name}\n{outcome.failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
