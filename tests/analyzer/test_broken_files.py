"""Broken and foreign flow files: cut at every byte, bits flipped, older and newer flow formats.

test_bad_input.py has one cut, random bytes, an empty file, HAR and a missing path; here:

- a real capture cut at every byte offset: exactly the whole records before the cut are analyzed,
  and a read problem names the cut record's offset exactly when the cut is not on a record boundary;
  the CLI exits 2 only when not one flow could be read;
- single bits flipped in a real capture: never an exception, and what comes before the damaged
  record is analyzed as in the intact file; a damaged record is skipped with its reason, and when the
  file's framing itself is broken a read problem says where reading stopped;
- files written by mitmproxy 11 (format 21, as 12) and by older mitmproxy versions (formats 20 and
  14, migrated by mitmproxy 12's io.compat), committed in tests/analyzer/data/ with the script that
  made them;
- records of a newer format (version 99): skipped with a reason, the rest analyzed; a file of only
  such records was read (every flow is framed, counted and skipped with its reason), so the CLI
  exits 0, not 2.

Record boundaries are computed here from the tnetstring length prefixes alone, not with the
analyzer's reader.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.io import tnetstring

from mcp_blackbox.analyzer import analyze

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_captures"
DATA = Path(__file__).resolve().parent / "data"
CUT_FROM = SAMPLES / "plain-mitmdump-progress.flows"  # the smallest sample: 4 records, 10,666 bytes
FLIPPED = SAMPLES / "py-2025-session-tools.flows"  # 14 records, each call answered in its own exchange
FLIPS = 300
FLIP_SEED = 20261106

TRUNCATED = re.compile(r"truncat|cut short", re.IGNORECASE)
NEWER = re.compile(r"(cannot|not) read.*version 99|version 99.*(update|newer)", re.IGNORECASE)
VERDICT = ("outcome", "layer", "http_status", "error_code")


def record_bounds(data: bytes) -> list[int]:
    """Where each record starts, plus the end of the last: ``LENGTH:`` + LENGTH bytes + one type tag."""
    bounds = [0]
    pos = 0
    while pos < len(data):
        colon = data.index(b":", pos)
        pos = colon + 1 + int(data[pos:colon]) + 1
        bounds.append(pos)
    assert pos == len(data), "the sample is one whole number of records"
    return bounds


def records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    bounds = record_bounds(data)
    return [data[start:end] for start, end in pairwise(bounds)]


def checked(path: Path) -> Any:
    """analyze() on one file; every flow read is analyzed or skipped."""
    analysis = analyze([path])
    assert analysis.flows_read == analysis.analyzed + len(analysis.skipped), (
        f"flows_read {analysis.flows_read} != analyzed {analysis.analyzed} + skipped {len(analysis.skipped)}"
    )
    return analysis


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    console_script = Path(sys.executable).with_name("mcp-blackbox")
    command = [str(console_script)] if console_script.exists() else [sys.executable, "-m", "analyzer.cli"]
    return subprocess.run(
        [*command, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


# ---------------------------------------------------------------- cut at every byte


def test_cut_at_every_offset(tmp_path: Path) -> None:
    data = CUT_FROM.read_bytes()
    bounds = record_bounds(data)
    whole_ids = [e.flow_id for e in checked(CUT_FROM).exchanges]
    assert len(whole_ids) == len(bounds) - 1, "every flow of the sample is analyzed"
    path = tmp_path / "cut.flows"
    path.write_bytes(data)
    for offset in range(len(data), -1, -1):
        os.truncate(path, offset)  # from the end: much cheaper than writing 10,667 files
        analysis = checked(path)
        complete = bisect_right(bounds, offset) - 1  # records that end at or before the cut
        where = f"cut at {offset} of {len(data)} (records at {bounds})"
        assert (analysis.flows_read, analysis.analyzed, analysis.skipped) == (complete, complete, []), where
        assert [e.flow_id for e in analysis.exchanges] == whole_ids[:complete], where
        problems = analysis.read_problems
        if offset == 0:
            assert len(problems) == 1 and "empty" in problems[0]["reason"], (where, problems)
        elif offset in bounds:
            assert problems == [], (where, problems)
        else:
            assert len(problems) == 1, (where, problems)
            (problem,) = problems
            assert (problem["offset"], problem["flows_read"]) == (bounds[complete], complete), (where, problem)
            # Inside the first record too: a cut capture, not "some other kind of file".
            assert TRUNCATED.search(problem["reason"]), (where, problem)
            assert "not a mitmproxy flow file" not in problem["reason"], (where, problem)


def test_cli_on_cut_files_exits_2_only_when_no_flow_was_read(tmp_path: Path) -> None:
    data = CUT_FROM.read_bytes()
    bounds = record_bounds(data)
    offsets = {0, 1, len(data) - 1, len(data)}
    for start, end in pairwise(bounds):
        offsets |= {start, start + 1, start + 3, (start + end) // 2, end - 1}
    offsets |= set(random.Random(7).sample(range(len(data)), 10))
    path = tmp_path / "cut.flows"
    for offset in sorted(offsets):
        path.write_bytes(data[:offset])
        done = cli("export", path)
        complete = bisect_right(bounds, offset) - 1
        where = f"cut at {offset} (records at {bounds}); stderr:\n{done.stderr}"
        assert "Traceback" not in done.stderr, where
        if complete == 0:
            assert done.returncode == 2, where
            assert path.name in done.stderr, where
            continue
        assert done.returncode == 0, where
        document = json.loads(done.stdout)
        assert document["summary"]["flows_read"] == complete, where
        assert document["skipped"] == [], where
        if offset in bounds:
            assert done.stderr.count(path.name) == 0, where
        else:
            assert path.name in done.stderr and f"at byte {bounds[complete]}" in " ".join(done.stderr.split()), where


# ---------------------------------------------------------------- bit flips


def test_bit_flips(tmp_path: Path) -> None:
    data = FLIPPED.read_bytes()
    bounds = record_bounds(data)
    total = len(bounds) - 1
    intact = checked(FLIPPED)
    intact_ids = [e.flow_id for e in intact.exchanges]
    assert len(intact_ids) == total and intact.read_problems == [] and intact.skipped == []

    rng = random.Random(FLIP_SEED)
    # Random bits anywhere (almost all inside a record's content), then one random bit in each byte
    # of each record's framing (length prefix, colon, final type tag), where a flip breaks the file.
    flips = [rng.randrange(len(data) * 8) for _ in range(FLIPS)]
    for start, end in pairwise(bounds):
        framing = [*range(start, data.index(b":", start) + 1), end - 1]
        flips += [at * 8 + rng.randrange(8) for at in framing]
    path = tmp_path / "flipped.flows"
    seen = {"analyzed": 0, "skipped": 0, "stopped": 0}
    for bit in flips:
        at = bit // 8
        damaged = bisect_right(bounds, at) - 1  # the record holding the flipped bit
        flipped = bytearray(data)
        flipped[at] ^= 1 << bit % 8
        path.write_bytes(flipped)
        analysis = checked(path)
        where = f"bit {bit % 8} of byte {at}, in record {damaged} ({bounds[damaged]}..{bounds[damaged + 1]})"

        # Everything before the damaged record: the same flows, the same verdicts.
        before = set(intact_ids[:damaged])
        assert [e.flow_id for e in analysis.exchanges][:damaged] == intact_ids[:damaged], where
        verdicts: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for call in analysis.calls:
            key = (call["direction"], call["method"], call["tool"], call["jsonrpc_id"])
            verdicts.setdefault(key, []).append(tuple(call[k] for k in VERDICT))
        for call in intact.calls:
            if set(call["exchanges"]) <= before:
                key = (call["direction"], call["method"], call["tool"], call["jsonrpc_id"])
                assert tuple(call[k] for k in VERDICT) in verdicts.get(key, []), (where, call)

        # The damaged record and what follows: analyzed (the flip may have changed what it says),
        # skipped with a reason, or the file stops there and a read problem says where.
        problems = analysis.read_problems
        if problems:
            (problem,) = problems
            assert problem["offset"] >= bounds[damaged], (where, problem)
            assert problem["flows_read"] == analysis.flows_read, (where, problem)
            assert analysis.flows_read < total or problem["offset"] > bounds[damaged], (where, problem)
            seen["stopped"] += 1
        else:
            assert analysis.flows_read == total, (where, "flows lost without a read problem")
            seen["skipped" if analysis.skipped else "analyzed"] += 1
        for skipped in analysis.skipped:
            assert skipped["reason"].strip() and skipped["source"] == str(path), (where, skipped)
    assert all(seen.values()), seen  # the fixed random seed gives all three cases


def test_damage_inside_a_record_loses_that_record_only(tmp_path: Path) -> None:
    """A regression: one bad byte inside a well-framed record used to end the reading of the file."""
    parts = records(FLIPPED)
    assert parts[3].count(b"4:http;") == 1
    parts[3] = parts[3].replace(b"4:http;", b"4:http?")  # an unknown type tag; the record's length is intact
    path = tmp_path / "one-bad-record.flows"
    path.write_bytes(b"".join(parts))
    analysis = checked(path)
    assert analysis.read_problems == []
    assert (analysis.flows_read, analysis.analyzed) == (len(parts), len(parts) - 1)
    (skipped,) = analysis.skipped
    assert skipped["index"] == 3 and f"at byte {sum(map(len, parts[:3]))}" in skipped["reason"], skipped
    assert "unknown type tag" in skipped["reason"], skipped


# ---------------------------------------------------------------- older flow formats

# Written by tests/analyzer/data/make_old_format_flows.py under each mitmproxy version.
OLD_FORMATS = [("11.1.3", 21), ("10.4.2", 20), ("7.0.4", 14)]
OLD_FORMAT_CALLS = {
    ("initialize", None, 1): ("SUCCESS", "application", 200, None),
    ("notifications/initialized", None, None): ("ACCEPTED", "transport", 202, None),
    ("tools/call", "echo", 2): ("TOOL_SUCCESS", "application", 200, None),
    ("tools/call", "tool_error", 3): ("TOOL_ERROR", "application", 200, None),
    ("tools/call", "protocol_error", 4): ("JSONRPC_ERROR", "protocol", 200, -32602),
    ("tools/call", "write_record", 5): ("HTTP_ERROR", "transport", 503, None),
    ("tools/call", "slow", 6): ("NO_RESPONSE", "transport", None, None),
}


@pytest.mark.parametrize(("mitmproxy_version", "flow_format"), OLD_FORMATS)
def test_flows_from_older_mitmproxy(mitmproxy_version: str, flow_format: int) -> None:
    path = DATA / f"mitmproxy-{mitmproxy_version}.flows"
    assert {tnetstring.loads(r)["version"] for r in records(path)} == {flow_format}
    analysis = checked(path)
    assert analysis.read_problems == [] and analysis.skipped == []
    assert analysis.flows_read == analysis.analyzed == len(OLD_FORMAT_CALLS)
    calls = {(c["method"], c["tool"], c["jsonrpc_id"]): tuple(c[k] for k in VERDICT) for c in analysis.calls}
    assert calls == OLD_FORMAT_CALLS
    assert [e.flow_id for e in analysis.exchanges] == [f"00000000-0000-4000-8000-{n:012d}" for n in range(7)]
    assert len({e.client_conn for e in analysis.exchanges}) == 1, "one client connection, as written"


# ---------------------------------------------------------------- a newer flow format


def newer(record: bytes) -> bytes:
    state = tnetstring.loads(record)
    state["version"] = 99
    return tnetstring.dumps(state)


def test_newer_format_records_are_skipped_the_rest_analyzed(tmp_path: Path) -> None:
    parts = records(FLIPPED)
    intact_ids = [e.flow_id for e in checked(FLIPPED).exchanges]
    newer_at = {2, 5, len(parts) - 1}
    path = tmp_path / "mixed.flows"
    path.write_bytes(b"".join(newer(r) if n in newer_at else r for n, r in enumerate(parts)))
    analysis = checked(path)
    assert analysis.read_problems == []
    assert analysis.flows_read == len(parts)
    assert [e.flow_id for e in analysis.exchanges] == [f for n, f in enumerate(intact_ids) if n not in newer_at]
    assert [s["index"] for s in analysis.skipped] == sorted(newer_at)
    for skipped in analysis.skipped:
        assert skipped["flow_id"] == intact_ids[skipped["index"]], skipped
        assert NEWER.search(skipped["reason"]), skipped


def test_file_of_only_newer_records_was_read_so_exit_0(tmp_path: Path) -> None:
    """The contract: exit 2 only when nothing at all could be read. These flows were read (framed,
    counted) and skipped with a reason each: exit 0, stderr says how many were skipped, the export
    lists them with the reason."""
    parts = records(CUT_FROM)
    path = tmp_path / "future.flows"
    path.write_bytes(b"".join(newer(r) for r in parts))
    analysis = checked(path)
    assert (analysis.flows_read, analysis.analyzed, analysis.read_problems) == (len(parts), 0, [])
    assert all(NEWER.search(s["reason"]) for s in analysis.skipped), analysis.skipped

    done = cli("export", path)
    assert done.returncode == 0, done.stderr
    assert f"{len(parts)} of {len(parts)} flow(s) skipped" in done.stderr, done.stderr
    document = json.loads(done.stdout)
    assert document["calls"] == [] and len(document["skipped"]) == len(parts)
    assert all(NEWER.search(s["reason"]) for s in document["skipped"]), document["skipped"]
    assert cli("summary", path).returncode == 0
