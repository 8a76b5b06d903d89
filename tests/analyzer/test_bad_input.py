"""Files the analyzer cannot fully use: each gives a clear message and honest counts, never a traceback.

The inputs: random bytes, a real capture cut in the middle of a record, an empty file, a HAR file
(mitmproxy imports HAR) with one MCP and one non-MCP entry, a flow file of ordinary web traffic,
and a path that does not exist. Then HAR files exported by mitmproxy's own savehar from a real
capture and damaged: one bad entry among five (skipped, naming its index counted from 0 like
``index`` in ``skipped``; the other four analyzed), JSON that is no HAR, a HAR without entries, and
JSON that is invalid or cut short (one read problem each, saying why and where).

docs/ARCHITECTURE.md, export contract: ``skipped`` lists each flow not analyzed with the reason, so that
analyzed + skipped = flows read. What could not be read at all is in ``read_problems`` (source,
reason, flows_read, offset).

The CLI (``mcp-blackbox export|summary``) exits 2 only when nothing at all could be read, 0
otherwise, and says on stderr which file and why.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy import io as flow_io
from mitmproxy.addons.savehar import SaveHar
from mitmproxy.io import tnetstring
from mitmproxy.test import tflow, tutils

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_captures"
TRUNCATED_FROM = SAMPLES / "py-2025-session-tools.flows"
CUT_RECORD = 6  # the file is cut half-way through its 7th record: 6 whole flows come before the cut
GOOD_CAPTURE = SAMPLES / "ts-2025-session-tools.flows"
HAR_FROM = SAMPLES / "py-2026-stateless.flows"  # its first 5 flows are MCP calls, each analyzed from a HAR
BAD_ENTRY = 2  # the third of five entries, counted from 0 as ``index`` in ``skipped``

NON_MCP = re.compile(r"\b(non|not)\b[\s-]*(an?\s+)?mcp", re.IGNORECASE)
NOT_FOUND = re.compile(r"no such file|not found|does not exist|doesn't exist|missing", re.IGNORECASE)
EMPTY = re.compile(r"empty|no flows|0 flows|zero flows|nothing", re.IGNORECASE)
TRUNCATED = re.compile(
    r"truncat|incomplete|unexpected end|end of (the )?file|premature|cut (off|short)|short read|partial",
    re.IGNORECASE,
)
UNREADABLE = re.compile(
    r"corrupt|invalid|not a (mitmproxy )?(flow|capture|har)|unreadable|(cannot|can't|could not|unable to) read"
    r"|unknown format|unrecogni[sz]ed|malformed|bad data|garbage",
    re.IGNORECASE,
)
CALL_COLUMNS = [
    "call_id", "scope", "direction", "method", "tool", "jsonrpc_id", "outcome", "layer", "http_status",
    "error_code", "flags", "t_start", "t_end", "duration_ms", "sse_events", "exchanges", "retry_group",
    "attempt", "retry_origin", "retry_confidence",
]  # fmt: skip


# ---------------------------------------------------------------- the inputs


def record_offsets(path: Path) -> list[int]:
    """Byte offset of the start of each tnetstring record, plus the end of the file."""
    size = path.stat().st_size
    offsets = [0]
    with path.open("rb") as f:
        while f.tell() < size:
            tnetstring.load(f)
            offsets.append(f.tell())
    return offsets


def read_flow_ids(path: Path) -> list[str]:
    with path.open("rb") as f:
        return [flow.id for flow in flow_io.FlowReader(f).stream()]


@dataclass(frozen=True)
class Truncated:
    path: Path
    cut_at: int  # the file's size
    record_start: int  # where the record that was cut begins
    flow_ids_before_cut: list[str]


def web_flow(method: str, path: str, request_body: bytes, content_type: str, response_body: bytes) -> http.HTTPFlow:
    request = tutils.treq(
        host="shop.example",
        port=80,
        method=method.encode(),
        path=path.encode(),
        headers=http.Headers(host="shop.example", accept="*/*", **{"content-length": str(len(request_body))}),
        content=request_body,
    )
    response = tutils.tresp(
        headers=http.Headers(**{"content-type": content_type, "content-length": str(len(response_body))}),
        content=response_body,
    )
    return tflow.tflow(req=request, resp=response, live=False)


def har_entry(method: str, url: str, request_body: str | None, status: int, mime: str, text: str) -> dict[str, Any]:
    request: dict[str, Any] = {
        "method": method,
        "url": url,
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": [{"name": "Host", "value": "127.0.0.1:8000"}, {"name": "Accept", "value": "*/*"}],
        "queryString": [],
        "headersSize": -1,
        "bodySize": len(request_body or ""),
    }
    if request_body is not None:
        request["headers"] += [
            {"name": "Content-Type", "value": "application/json"},
            {"name": "Accept", "value": "application/json, text/event-stream"},
        ]
        request["postData"] = {"mimeType": "application/json", "text": request_body}
    return {
        "startedDateTime": "2026-07-30T10:00:00.000Z",
        "time": 12.5,
        "request": request,
        "response": {
            "status": status,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [{"name": "Content-Type", "value": mime}],
            "content": {"size": len(text), "mimeType": mime, "text": text},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(text),
        },
        "cache": {},
        "timings": {"send": 0.5, "wait": 11.5, "receive": 0.5},
    }


HAR_CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
HAR_RESULT = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hi"}], "isError": False}}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # Neutral names: a reason must not be found in the file name itself.
    where = tmp_path_factory.mktemp("inputs")

    corrupt = where / "noise.flows"
    corrupt.write_bytes(b"\x00\xff" + random.Random(20261018).randbytes(8190))

    empty = where / "blank.flows"
    empty.write_bytes(b"")

    offsets = record_offsets(TRUNCATED_FROM)
    start, end = offsets[CUT_RECORD], offsets[CUT_RECORD + 1]
    cut_at = (start + end) // 2
    truncated_path = where / "session-head.flows"
    truncated_path.write_bytes(TRUNCATED_FROM.read_bytes()[:cut_at])
    truncated = Truncated(truncated_path, cut_at, start, read_flow_ids(TRUNCATED_FROM)[:CUT_RECORD])

    har = where / "capture.har"
    har.write_text(
        json.dumps(
            {
                "log": {
                    "version": "1.2",
                    "creator": {"name": "mcp-blackbox tests", "version": "1"},
                    "pages": [],
                    "entries": [
                        har_entry(
                            "POST",
                            "http://127.0.0.1:8000/mcp",
                            json.dumps(HAR_CALL),
                            200,
                            "application/json",
                            json.dumps(HAR_RESULT),
                        ),
                        har_entry("GET", "http://127.0.0.1:8000/index.html", None, 200, "text/html", "<html></html>"),
                    ],
                }
            }
        )
    )

    web = where / "web.flows"
    with web.open("wb") as f:
        writer = flow_io.FlowWriter(f)
        writer.add(web_flow("GET", "/index.html", b"", "text/html", b"<!doctype html><title>shop</title>"))
        writer.add(web_flow("GET", "/api/items.json", b"", "application/json", b'{"items": [1, 2, 3]}'))
        writer.add(web_flow("POST", "/api/search", b'{"query": "shoes"}', "application/json", b'{"hits": []}'))

    missing = where / "absent.flows"
    return {
        "corrupt": corrupt,
        "empty": empty,
        "truncated": truncated,
        "har": har,
        "web": web,
        "missing": missing,
    }


def analyze(paths: list[Path]) -> Any:
    from mcp_blackbox.analyzer import analyze as analyze_paths  # the contract: analyzer.analyze(paths) -> Analysis

    analysis = analyze_paths(paths)
    assert analysis.flows_read == analysis.analyzed + len(analysis.skipped), (
        f"flows_read {analysis.flows_read} != analyzed {analysis.analyzed} + skipped {len(analysis.skipped)}"
    )
    return analysis


def problems_about(analysis: Any, path: Path) -> list[dict[str, Any]]:
    return [p for p in analysis.read_problems if path.name in str(p["source"])]


def only_problem(analysis: Any, path: Path) -> dict[str, Any]:
    problems = problems_about(analysis, path)
    assert len(problems) == 1, f"one read problem naming {path.name} expected: {analysis.read_problems}"
    problem = problems[0]
    assert {"source", "reason", "flows_read", "offset"} <= set(problem), problem
    assert isinstance(problem["reason"], str) and problem["reason"].strip(), problem
    return problem


# ---------------------------------------------------------------- analyze()


def test_corrupt_file_is_a_read_problem_not_an_exception(inputs: dict[str, Any]) -> None:
    analysis = analyze([inputs["corrupt"]])
    problem = only_problem(analysis, inputs["corrupt"])
    assert UNREADABLE.search(problem["reason"]), problem
    assert problem["flows_read"] == 0, problem
    assert (analysis.flows_read, analysis.analyzed, analysis.skipped, analysis.calls) == (0, 0, [], [])


def test_truncated_file_keeps_every_flow_before_the_cut(inputs: dict[str, Any]) -> None:
    truncated: Truncated = inputs["truncated"]
    analysis = analyze([truncated.path])

    assert analysis.flows_read == CUT_RECORD
    assert analysis.analyzed == CUT_RECORD, analysis.skipped
    carried = {flow_id for call in analysis.calls for flow_id in call["exchanges"]}
    assert set(truncated.flow_ids_before_cut) <= carried, "every flow before the cut contributes to a call"

    problem = only_problem(analysis, truncated.path)
    assert problem["flows_read"] == CUT_RECORD, problem
    assert problem["offset"] is None or truncated.record_start <= problem["offset"] <= truncated.cut_at, (
        f"the offset should point into the cut record ({truncated.record_start}..{truncated.cut_at}): {problem}"
    )
    assert TRUNCATED.search(problem["reason"]), f"the reason should say the file is truncated: {problem}"


def test_truncated_file_calls_match_the_whole_file(inputs: dict[str, Any]) -> None:
    truncated: Truncated = inputs["truncated"]
    before_cut = set(truncated.flow_ids_before_cut)

    def verdicts(calls: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        keys = ("method", "tool", "jsonrpc_id", "outcome", "layer", "http_status", "error_code")
        return sorted((tuple(c[k] for k in keys) for c in calls), key=repr)

    whole = analyze([TRUNCATED_FROM])
    cut = analyze([truncated.path])
    assert verdicts(cut.calls) == verdicts([c for c in whole.calls if set(c["exchanges"]) <= before_cut])

    # The six flows before the cut, from the sample's listing (sample_captures/README.md).
    by_method = {(c["method"], c["tool"]): (c["outcome"], c["layer"]) for c in cut.calls}
    assert by_method == {
        ("initialize", None): ("SUCCESS", "application"),
        ("notifications/initialized", None): ("ACCEPTED", "transport"),
        ("tools/list", None): ("SUCCESS", "application"),
        ("tools/call", "echo"): ("TOOL_SUCCESS", "application"),
        ("tools/call", "add"): ("TOOL_SUCCESS", "application"),
        ("tools/call", "tool_error"): ("TOOL_ERROR", "application"),
    }


def test_empty_file_says_it_is_empty(inputs: dict[str, Any]) -> None:
    analysis = analyze([inputs["empty"]])
    problem = only_problem(analysis, inputs["empty"])
    assert EMPTY.search(problem["reason"]), problem
    assert (analysis.flows_read, analysis.analyzed, analysis.skipped, analysis.calls) == (0, 0, [], [])


def test_nonexistent_path_is_a_read_problem(inputs: dict[str, Any]) -> None:
    analysis = analyze([inputs["missing"]])
    problem = only_problem(analysis, inputs["missing"])
    assert NOT_FOUND.search(problem["reason"]), problem
    assert (analysis.flows_read, analysis.analyzed, analysis.skipped, analysis.calls) == (0, 0, [], [])


def test_har_file_is_read_mcp_entry_analyzed_other_skipped(inputs: dict[str, Any]) -> None:
    analysis = analyze([inputs["har"]])
    assert analysis.read_problems == []
    assert (analysis.flows_read, analysis.analyzed, len(analysis.skipped)) == (2, 1, 1)

    (skipped,) = analysis.skipped
    assert {"source", "flow_id", "reason"} <= set(skipped), skipped
    assert inputs["har"].name in str(skipped["source"]), skipped
    assert NON_MCP.search(skipped["reason"]), skipped

    (call,) = analysis.calls
    assert (call["method"], call["tool"], call["jsonrpc_id"]) == ("tools/call", "echo", 7), call
    assert (call["outcome"], call["layer"], call["http_status"]) == ("TOOL_SUCCESS", "application", 200), call
    assert skipped["flow_id"] not in call["exchanges"]


def test_non_mcp_traffic_is_all_skipped_with_a_reason(inputs: dict[str, Any]) -> None:
    analysis = analyze([inputs["web"]])
    flow_ids = read_flow_ids(inputs["web"])
    assert analysis.read_problems == []
    assert (analysis.flows_read, analysis.analyzed, analysis.calls) == (3, 0, [])
    assert sorted(s["flow_id"] for s in analysis.skipped) == sorted(flow_ids)
    for skipped in analysis.skipped:
        assert inputs["web"].name in str(skipped["source"]), skipped
        assert NON_MCP.search(skipped["reason"]), f"the reason should say the flow is not MCP: {skipped}"


def test_bad_files_do_not_stop_the_good_one(inputs: dict[str, Any]) -> None:
    alone = analyze([GOOD_CAPTURE])
    mixed = analyze([inputs["corrupt"], GOOD_CAPTURE, inputs["missing"], inputs["empty"], inputs["web"]])
    assert mixed.flows_read == alone.flows_read + 3
    assert mixed.analyzed == alone.analyzed
    assert len(mixed.calls) == len(alone.calls)
    for bad in ("corrupt", "missing", "empty"):
        only_problem(mixed, inputs[bad])
    assert problems_about(mixed, GOOD_CAPTURE) == []


# ---------------------------------------------------------------- the CLI


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    console_script = Path(sys.executable).with_name("mcp-blackbox")
    command = [str(console_script)] if console_script.exists() else [sys.executable, "-m", "analyzer.cli"]
    return subprocess.run(
        [*command, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


def export_json(*paths: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = cli("export", *paths, "--format", "json", "-o", "-")
    assert done.returncode == 0, f"exit {done.returncode}; stderr:\n{done.stderr}"
    try:
        document = json.loads(done.stdout)
    except ValueError as exc:
        raise AssertionError(f"stdout is not one JSON document: {done.stdout[:2000]!r}") from exc
    assert {"calls", "retry_groups", "summary", "skipped"} <= set(document), sorted(document)
    return done, document


def without(text: str, path: Path) -> str:
    """stderr without the file's path, so that a reason is never found in the name."""
    return text.replace(str(path), "<path>").replace(path.name, "<name>")


@pytest.mark.parametrize("command", ["export", "summary"])
@pytest.mark.parametrize("kind", ["corrupt", "empty", "missing"])
def test_cli_exits_2_when_nothing_could_be_read(inputs: dict[str, Any], command: str, kind: str) -> None:
    path: Path = inputs[kind]
    reason = {"corrupt": UNREADABLE, "empty": EMPTY, "missing": NOT_FOUND}[kind]
    args = ["export", path, "--format", "json", "-o", "-"] if command == "export" else ["summary", path]
    done = cli(*args)
    assert done.returncode == 2, f"exit {done.returncode}; stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert path.name in done.stderr, f"stderr should name the file:\n{done.stderr}"
    assert reason.search(without(done.stderr, path)), f"stderr should say why ({reason.pattern}):\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    assert "usage:" not in done.stderr, f"exit 2 from argparse, not from reading the file:\n{done.stderr}"


def test_cli_export_of_truncated_file_exits_0_and_says_where(inputs: dict[str, Any]) -> None:
    truncated: Truncated = inputs["truncated"]
    done, document = export_json(truncated.path)
    assert truncated.path.name in done.stderr, done.stderr
    assert TRUNCATED.search(without(done.stderr, truncated.path)), done.stderr
    assert len(document["calls"]) == len(analyze([truncated.path]).calls)
    assert document["skipped"] == []


def test_cli_export_of_har_file(inputs: dict[str, Any]) -> None:
    _, document = export_json(inputs["har"])
    (call,) = document["calls"]
    assert (call["tool"], call["outcome"], call["http_status"]) == ("echo", "TOOL_SUCCESS", 200), call
    (skipped,) = document["skipped"]
    assert {"source", "flow_id", "reason"} <= set(skipped) and NON_MCP.search(skipped["reason"]), skipped


def test_cli_export_of_non_mcp_traffic_lists_every_flow_as_skipped(inputs: dict[str, Any]) -> None:
    _, document = export_json(inputs["web"])
    assert document["calls"] == []
    assert sorted(s["flow_id"] for s in document["skipped"]) == sorted(read_flow_ids(inputs["web"]))
    assert all(NON_MCP.search(s["reason"]) for s in document["skipped"]), document["skipped"]


def test_cli_export_csv_has_the_contract_columns(inputs: dict[str, Any]) -> None:
    done = cli("export", inputs["har"], "--format", "csv", "-o", "-")
    assert done.returncode == 0, f"exit {done.returncode}; stderr:\n{done.stderr}"
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert rows, f"no CSV rows: {done.stdout!r}"
    assert set(CALL_COLUMNS) <= set(rows[0]), f"missing columns {sorted(set(CALL_COLUMNS) - set(rows[0]))}"
    assert [(r["tool"], r["outcome"]) for r in rows] == [("echo", "TOOL_SUCCESS")]


@pytest.mark.parametrize("kind", ["truncated", "har", "web"])
def test_cli_summary_exits_0_when_something_was_read(inputs: dict[str, Any], kind: str) -> None:
    path = inputs[kind].path if kind == "truncated" else inputs[kind]
    done = cli("summary", path)
    assert done.returncode == 0, f"exit {done.returncode}; stderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr


def test_cli_names_the_missing_file_beside_a_good_one(inputs: dict[str, Any]) -> None:
    done, document = export_json(GOOD_CAPTURE, inputs["missing"])
    assert inputs["missing"].name in done.stderr, done.stderr
    assert NOT_FOUND.search(without(done.stderr, inputs["missing"])), done.stderr
    assert document["calls"], "the good capture's calls are exported"


# ---------------------------------------------------------------- HAR files, damaged


@pytest.fixture(scope="module")
def real_har() -> dict[str, Any]:
    """Five entries, as mitmproxy's own exporter writes them from a real capture."""
    with HAR_FROM.open("rb") as f:
        flows = list(flow_io.FlowReader(f).stream())[:5]
    return SaveHar().make_har(flows)


def write_har(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document, indent=4))  # indented, as savehar writes it
    return path


def verdicts(calls: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a call is and how it ended, without the flow ids (a HAR import gives fresh ones each time)."""
    keys = ("method", "tool", "jsonrpc_id", "outcome", "layer", "http_status", "error_code")
    return sorted((tuple(c[k] for k in keys) for c in calls), key=repr)


def without_request(entry: dict[str, Any]) -> None:
    del entry["request"]


def with_bad_start_time(entry: dict[str, Any]) -> None:
    entry["startedDateTime"] = "yesterday at noon"


def with_bad_base64_body(entry: dict[str, Any]) -> None:
    entry["response"]["content"].update(encoding="base64", text="not base64!")


def with_status_not_a_number(entry: dict[str, Any]) -> None:
    entry["response"]["status"] = "OK"


def as_a_string(entry: dict[str, Any]) -> str:
    return "an entry that is only a string"


HAR_DAMAGES = {
    "no request": (without_request, r"missing field 'request'"),
    "start time not a date": (with_bad_start_time, r"ValueError: .*yesterday at noon"),
    "body not base64": (with_bad_base64_body, r"binascii\.Error: Invalid base64"),
    "status not a number": (with_status_not_a_number, r"TypeError: .*status_code"),
    "entry not an object": (as_a_string, r"is a JSON string, not an object"),
}


@pytest.mark.parametrize("damage", HAR_DAMAGES)
def test_har_bad_entry_is_skipped_and_the_entries_after_it_are_analyzed(
    real_har: dict[str, Any], tmp_path: Path, damage: str
) -> None:
    damaged_by, reason = HAR_DAMAGES[damage]
    entries = real_har["log"]["entries"]
    assert len(entries) == 5
    damaged = json.loads(json.dumps(real_har))
    entry = damaged["log"]["entries"][BAD_ENTRY]
    replaced = damaged_by(entry)
    if replaced is not None:
        damaged["log"]["entries"][BAD_ENTRY] = replaced
    good_only = {"log": {**real_har["log"], "entries": [e for i, e in enumerate(entries) if i != BAD_ENTRY]}}

    analysis = analyze([write_har(tmp_path / "damaged.har", damaged)])
    assert analysis.read_problems == []
    assert (analysis.flows_read, analysis.analyzed, len(analysis.skipped)) == (5, 4, 1), analysis.skipped
    (skipped,) = analysis.skipped
    assert (skipped["source"], skipped["index"], skipped["flow_id"]) == (str(tmp_path / "damaged.har"), 2, None)
    assert re.search(rf"^HAR entry {BAD_ENTRY}\b", skipped["reason"]), skipped
    assert re.search(reason, skipped["reason"]), skipped
    # The four others give the calls they give without the bad entry.
    assert verdicts(analysis.calls) == verdicts(analyze([write_har(tmp_path / "good.har", good_only)]).calls)
    assert len(analysis.calls) == 4


def test_har_with_a_bom_is_read(real_har: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "bom.har"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(real_har, indent=4).encode())
    analysis = analyze([path])
    assert analysis.read_problems == []
    assert (analysis.flows_read, analysis.analyzed, len(analysis.calls)) == (5, 5, 5)


NOT_HAR = {
    "no log": ({"version": "1.2", "entries": []}, r'no "log" object'),
    "log not an object": ({"log": [1, 2]}, r'"log" is a JSON array, not an object'),
    "no entries": ({"log": {"version": "1.2", "pages": []}}, r'no "entries" list in "log"'),
    "entries not a list": ({"log": {"version": "1.2", "entries": {}}}, r'"log.entries" is a JSON object, not a list'),
    "entries null": ({"log": {"version": "1.2", "entries": None}}, r'"log.entries" is a JSON null, not a list'),
}


@pytest.mark.parametrize("kind", NOT_HAR)
def test_json_without_har_entries_is_one_problem_saying_what_is_missing(tmp_path: Path, kind: str) -> None:
    document, missing = NOT_HAR[kind]
    path = write_har(tmp_path / "other.json", document)
    analysis = analyze([path])
    problem = only_problem(analysis, path)
    assert problem["reason"].startswith("JSON but not a HAR file: "), problem
    assert re.search(missing, problem["reason"]), problem
    assert problem["flows_read"] == 0, problem
    assert (analysis.flows_read, analysis.analyzed, analysis.skipped) == (0, 0, [])


def test_har_without_entries_is_one_problem_saying_it_is_empty(real_har: dict[str, Any], tmp_path: Path) -> None:
    path = write_har(tmp_path / "nothing.har", {"log": {**real_har["log"], "entries": []}})
    analysis = analyze([path])
    problem = only_problem(analysis, path)
    assert problem["reason"] == "empty HAR file: no entries in it", problem
    assert EMPTY.search(problem["reason"]), problem
    assert (analysis.flows_read, analysis.analyzed, analysis.skipped) == (0, 0, [])


def test_har_cut_short_is_one_problem_saying_truncated(real_har: dict[str, Any], tmp_path: Path) -> None:
    text = json.dumps(real_har, indent=4).encode()
    path = tmp_path / "cut.har"
    for cut in (1, len(text) // 3, len(text) // 2, len(text) - 1):
        path.write_bytes(text[:cut])
        analysis = analyze([path])
        problem = only_problem(analysis, path)
        assert problem["reason"].startswith("HAR file truncated: the JSON ends early ("), (cut, problem)
        assert re.search(r", line \d+ column \d+\)$", problem["reason"]), (cut, problem)
        assert 0 <= problem["offset"] <= cut, (cut, problem)
        assert (analysis.flows_read, analysis.analyzed, analysis.skipped) == (0, 0, [])


def test_invalid_json_har_is_one_problem_saying_where(real_har: dict[str, Any], tmp_path: Path) -> None:
    text = json.dumps(real_har, indent=4)
    at = text.index('"entries"')
    path = tmp_path / "bad.har"
    path.write_text(text[:at] + "entries" + text[at + len('"entries"') :])  # a key without its quotes
    line = text.count("\n", 0, at) + 1
    column = at - text.rindex("\n", 0, at)
    analysis = analyze([path])
    problem = only_problem(analysis, path)
    assert problem["reason"] == (
        f"HAR file is invalid JSON (Expecting property name enclosed in double quotes, line {line} column {column})"
    ), problem
    assert problem["offset"] == at, problem
    assert UNREADABLE.search(problem["reason"]), problem
    assert (analysis.flows_read, analysis.analyzed, analysis.skipped) == (0, 0, [])


def test_cli_export_of_har_with_a_bad_entry_lists_it_as_skipped(real_har: dict[str, Any], tmp_path: Path) -> None:
    damaged = json.loads(json.dumps(real_har))
    del damaged["log"]["entries"][BAD_ENTRY]["request"]
    path = write_har(tmp_path / "damaged.har", damaged)
    done, document = export_json(path)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(document["calls"]) == 4, document["calls"]
    (skipped,) = document["skipped"]
    assert skipped["reason"] == f"HAR entry {BAD_ENTRY} not readable: missing field 'request'", skipped
    assert skipped["index"] == BAD_ENTRY, skipped
    assert document["summary"]["flows_read"] == 5, document["summary"]
