"""--since/--until (issue 22, item 3): the calls that started in the range, read from the files that reach it.

Captures are rotated files named as the recorder names them (mcp-<UTC start>-<n>.flows); those wholly outside
the range and its margins are corrupt here, so that decoding one would show as a read problem.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.across.call_stream import DEFAULT_WINDOW
from mcp_blackbox.analyzer.across.retries import RETRY_WINDOW
from mcp_blackbox.analyzer.read.time_range import MARGIN, RangeError, TimeRange, parse_value, resolve
from tests.analyzer.flows import exchange, result, rpc, text_result, tool_call, write
from tests.analyzer.test_check_and_summary import cli

TOOLS = result(0, {"tools": [{"name": "lookup", "annotations": {"readOnlyHint": True}}]})


def at(clock: str, day: int = 1) -> float:
    """Epoch seconds of 2026-12-<day> at ``clock`` (HH:MM:SS) UTC."""
    return datetime.fromisoformat(f"2026-12-{day:02d}T{clock}+00:00").timestamp()


def lookup(rpc_id: int, when: float, *, ok: bool = True, duration: float = 0.5, key: str = "k1") -> Any:
    message = tool_call(rpc_id, "lookup")
    message["params"]["arguments"] = {"key": key}
    headers = {"mcp-session-id": "S", "user-agent": "client/1"}
    if ok:
        return exchange(
            message, body=result(rpc_id, text_result("done")), request_headers=headers, at=when, duration=duration
        )
    return exchange(message, status=503, body=b"busy", content_type="text/plain", request_headers=headers, at=when)


def corrupt(directory: Path, name: str) -> Path:
    path = directory / name
    path.write_bytes(b"99:not a flow record at all")
    return path


def rotated(tmp_path: Path) -> Path:
    """A recorder's directory: the range is 19:40 to 19:50 UTC on 2026-12-01 in the tests below."""
    directory = tmp_path / "captures"
    directory.mkdir()
    corrupt(directory, "mcp-20261201T170000Z-0001.flows")  # wholly before: its successor opened at 18:00
    write(directory, lookup(1, at("18:00:05"), key="early"), name="mcp-20261201T180000Z-0002.flows")
    write(
        directory,
        exchange(rpc(0, "tools/list"), body=TOOLS, request_headers={"mcp-session-id": "S"}, at=at("19:30:00")),
        lookup(2, at("19:39:58"), ok=False),  # the first attempt, just before --since
        lookup(3, at("19:39:59.500"), duration=2.0, key="across-since"),  # straddles --since
        lookup(4, at("19:40:01")),  # the retry of 2: in range
        lookup(5, at("19:45:00"), key="middle"),
        lookup(6, at("19:49:59"), duration=3.0, key="across-until"),  # in range, straddles --until
        lookup(7, at("19:55:00"), key="after"),
        name="mcp-20261201T193000Z-0003.flows",
    )
    corrupt(directory, "mcp-20261201T210000Z-0004.flows")  # wholly after: its name starts past the margin
    write(directory, lookup(8, at("22:00:01"), key="late"), name="mcp-20261201T220000Z-0005.flows")
    return directory


RANGE = TimeRange(at("19:40:00"), at("19:50:00"))


# ---------------------------------------------------------------------------- parsing


def test_iso_forms_are_utc() -> None:
    assert parse_value("--since", "2026-12-01T19:30:00Z") == at("19:30:00")
    assert parse_value("--since", "2026-12-01T19:30Z") == at("19:30:00")
    assert parse_value("--since", "2026-12-01T21:30:00+02:00") == at("19:30:00")
    assert parse_value("--since", "2026-12-01T19:30:00.250Z") == at("19:30:00.250")


@pytest.mark.parametrize("value", ["yesterday", "2026-12-01", "25:00", "19:61", "19h30"])
def test_values_that_are_no_time_are_refused(value: str) -> None:
    with pytest.raises(RangeError, match="--since"):
        parse_value("--since", value)


def test_a_time_of_day_is_placed_on_the_captures_one_day(tmp_path: Path) -> None:
    capture = write(tmp_path, lookup(1, at("19:31:00")), lookup(2, at("19:59:00")))
    assert resolve("19:30", "19:40:15", [str(capture)]) == TimeRange(at("19:30:00"), at("19:40:15"))
    assert resolve("19:30", None, [str(capture)]) == TimeRange(at("19:30:00"), None)


def test_a_time_of_day_is_refused_on_a_capture_of_two_days(tmp_path: Path) -> None:
    capture = write(tmp_path, lookup(1, at("23:59:00")), lookup(2, at("00:01:00", day=2)))
    with pytest.raises(RangeError, match="2026-12-01, 2026-12-02"):
        resolve("19:30", None, [str(capture)])
    # Look-alike: the same capture with full times is fine.
    assert resolve("2026-12-01T23:00Z", None, [str(capture)]) == TimeRange(at("23:00:00"), None)


def test_until_not_after_since_is_refused() -> None:
    with pytest.raises(RangeError, match="not after"):
        resolve("2026-12-01T19:40Z", "2026-12-01T19:40Z", [])
    with pytest.raises(RangeError, match="not after"):
        resolve("2026-12-01T19:40Z", "2026-12-01T19:30Z", [])


def test_the_margin_covers_a_retry_window_and_a_flow_open_across_an_edge() -> None:
    assert MARGIN >= RETRY_WINDOW + DEFAULT_WINDOW


def test_the_range_says_itself() -> None:
    assert RANGE.describe() == "calls from 19:40:00 to 19:50:00 UTC on 2026-12-01 (--since/--until)"
    assert RANGE.record() == {"since": "2026-12-01T19:40:00.000Z", "until": "2026-12-01T19:50:00.000Z"}


# ---------------------------------------------------------------------------- the analysis


def test_only_calls_started_in_range_and_files_outside_are_not_decoded(tmp_path: Path) -> None:
    directory = rotated(tmp_path)
    analysis = analyze([directory], time_range=RANGE)
    assert analysis.read_problems == []  # the corrupt files were never opened for their records
    assert [c["jsonrpc_id"] for c in analysis.calls] == [4, 5, 6]
    assert analysis.flows_read == 1 + 7  # files 0002 and 0003; not 0005 (its records date it past the margin)
    assert analysis.range is not None
    assert [Path(p).name for p in analysis.range["captures_not_read"]] == [
        "mcp-20261201T170000Z-0001.flows",
        "mcp-20261201T210000Z-0004.flows",
        "mcp-20261201T220000Z-0005.flows",
    ]
    # Look-alike: without a range every file is decoded, and the corrupt ones say so.
    assert len(analyze([directory]).read_problems) == 2


def test_straddling_calls_are_said(tmp_path: Path) -> None:
    analysis = analyze([rotated(tmp_path)], time_range=RANGE)
    ids = {c.request.id: c.call_id for c in analyze([tmp_path / "captures"]).call_objects}
    assert analysis.range is not None
    assert analysis.range["straddling"] == [
        {"call_id": ids[3], "edge": "since"},
        {"call_id": ids[6], "edge": "until"},
    ]


def test_a_retry_whose_first_attempt_is_before_since_is_still_linked(tmp_path: Path) -> None:
    analysis = analyze([rotated(tmp_path)], time_range=RANGE)
    retry = next(c for c in analysis.calls if c["jsonrpc_id"] == 4)
    assert retry["retry_group"] is not None and retry["attempt"] == 2
    (group,) = [g.record() for g in analysis.retry_groups]
    assert group["members"][1] == retry["call_id"]
    # Look-alike: the first attempt itself started before --since: it is no call of the range.
    assert group["members"][0] not in {c["call_id"] for c in analysis.calls}


def test_the_windowed_export_cuts_as_the_whole_analysis(tmp_path: Path) -> None:
    directory = rotated(tmp_path)
    whole = json.loads(cli("export", directory, "--since", "19:40", "--until", "19:50", "--window", "0").stdout)
    windowed = json.loads(cli("export", directory, "--since", "19:40", "--until", "19:50").stdout)
    # A unit idle longer than the window (session S from 18:00 to 19:30) starts a new lineage in a windowed
    # reading, with or without a range (docs/ARCHITECTURE.md, "What a window gives up"): not compared.
    for export in (whole, windowed):
        for call in export["calls"]:
            call["client"].pop("lineage")
    assert whole == windowed
    assert [c["jsonrpc_id"] for c in windowed["calls"]] == [4, 5, 6]
    assert windowed["range"]["since"] == "2026-12-01T19:40:00.000Z"
    assert [s["edge"] for s in windowed["range"]["straddling"]] == ["since", "until"]
    assert len(windowed["retry_groups"]) == 1


# ---------------------------------------------------------------------------- each command, as run


def test_export_csv_says_the_range_on_stderr(tmp_path: Path) -> None:
    done = cli("export", rotated(tmp_path), "--format", "csv", "--since", "2026-12-01T19:40:00Z", "--until", "19:50")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) == 1 + 3
    said = " ".join(done.stderr.split())  # wrapped at 80 columns
    assert "mcp-blackbox: calls from 19:40:00 to 19:50:00 UTC on 2026-12-01 (--since/--until)" in said
    assert "straddling an edge" in said and "3 capture file(s) wholly outside the range: not read" in said


def test_summary_text_and_markdown_say_the_range(tmp_path: Path) -> None:
    directory = rotated(tmp_path)
    done = cli("summary", directory, "--since", "19:40", "--until", "19:50")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "calls from 19:40:00 to 19:50:00 UTC on 2026-12-01 (--since/--until)"
    assert lines[1].startswith("straddling an edge")
    assert any(line.startswith("3 calls in") for line in lines)
    markdown = cli("summary", directory, "--format", "markdown", "--since", "19:40", "--until", "19:50").stdout
    assert "- Range: calls from 19:40:00 to 19:50:00 UTC on 2026-12-01 (--since/--until)" in markdown
    assert "- 3 calls in" in markdown


def test_report_says_the_range_in_its_header(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = cli("report", rotated(tmp_path), "--since", "19:40", "--until", "19:50", "-o", page)
    assert done.returncode == 0, done.stderr
    assert "3 calls" in done.stdout and "calls from 19:40:00 to 19:50:00 UTC" in done.stdout
    assert 'id="cut-range">calls from 19:40:00 to 19:50:00 UTC on 2026-12-01 (--since/--until)' in page.read_text()


def test_check_judges_the_range_and_says_it(tmp_path: Path) -> None:
    directory = rotated(tmp_path)
    done = cli("check", directory, "--since", "19:40", "--until", "19:50")
    assert done.returncode == 0, done.stdout + done.stderr  # the 503 before --since is not judged
    assert (
        done.stdout.strip()
        .splitlines()[-1]
        .endswith("; calls from 19:40:00 to 19:50:00 UTC on 2026-12-01 (--since/--until)")
    )
    # Look-alike: a range that holds the 503 fails.
    assert cli("check", directory, "--since", "19:39", "--until", "19:50").returncode == 1


def test_diff_cuts_both_sides_alike(tmp_path: Path) -> None:
    before = write(tmp_path, lookup(1, at("19:45:00")), lookup(2, at("20:30:00"), ok=False), name="before.flows")
    after = write(tmp_path, lookup(1, at("19:45:00", day=2)), name="after.flows")
    done = cli("diff", before, after, "--since", "19:40", "--until", "19:50", "--fail-on-regression")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "before: calls from 19:40:00 to 19:50:00 UTC on 2026-12-01 (--since/--until)" in done.stdout
    assert "after: calls from 19:40:00 to 19:50:00 UTC on 2026-12-02 (--since/--until)" in done.stdout
    assert "0 failed" in done.stdout.splitlines()[0]
    as_json = json.loads(cli("diff", before, after, "--since", "19:40", "--format", "json").stdout)
    assert set(as_json["range"]) == {"before", "after"}


def test_a_time_of_day_on_two_days_is_one_line_and_exit_2(tmp_path: Path) -> None:
    capture = write(tmp_path, lookup(1, at("23:59:00")), lookup(2, at("00:01:00", day=2)))
    for command in (["export"], ["summary"], ["check"], ["report", "-o", str(tmp_path / "r.html")]):
        done = cli(*command, capture, "--since", "19:30")
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and "ambiguous" in done.stderr, done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "r.html").exists()
