"""``mcp-blackbox check`` as a CI gate that speaks CI (issue 11, part 5).

No evidence is not success (--min-calls), part of the evidence is not all of it (exit 2 unless
--allow-partial), expected failures are allowed and listed (--allow), the 401 that starts MCP
authorization is no failure, every line carries its reason, and the verdict comes as text, JUnit XML,
GitHub workflow commands or JSON. Everything runs through the installed console script, as CI runs it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from junitparser import Error, Failure, JUnitXml
from markdown_it import MarkdownIt

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, CallStream
from mcp_blackbox.analyzer.redaction.redact import redact_text
from mcp_blackbox.analyzer.review.check import (
    AUTH_HANDSHAKE,
    DEFAULT_FAIL_ON,
    FLAGS,
    LAYERS,
    OUTCOMES,
    SELECTOR_KEYS,
    Gate,
    Passed,
    answered_by_authorization,
    judge,
    parse_allow,
    parse_allowance,
)
from mcp_blackbox.analyzer.review.check_formats import FORMATS, escape_data, escape_property, render, step_summary
from tests.analyzer.flows import error, exchange, rpc, tool_call, write
from tests.analyzer.test_check_and_summary import ALL_SAMPLES, CALL_ID, REPO, RETRY_AFTER_503, SAMPLES, cli, relative

AUTH = SAMPLES / "py-auth-retry.flows"  # a 401, then the same initialize with credentials: the OAuth start
TOOLS = SAMPLES / "py-2025-session-tools.flows"  # TOOL_ERROR on tool_error and raise_error, JSONRPC_ERROR
TS_TOOLS = SAMPLES / "ts-2025-session-tools.flows"  # the same tools and failures, from the TypeScript SDK
NO_FAILURE = {"SUCCESS", "TOOL_SUCCESS", "ACCEPTED", "INPUT_REQUIRED"}  # the outcomes that are no failure

INITIALIZE = rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}})


def failing_ids(stdout: str) -> list[str]:
    return [m.group(1) for line in stdout.splitlines() if (m := CALL_ID.match(line))]


def allowed_ids(stdout: str) -> list[str]:
    return [m.group(1) for line in stdout.splitlines() if (m := re.match(r"^allowed (c\S+) ", line))]


def calls_of(path: Path, **where: Any) -> list[dict[str, Any]]:
    return [c for c in analyze(relative(path)).calls if all(c[k] == v for k, v in where.items())]


def only_call(path: Path, **where: Any) -> dict[str, Any]:
    (call,) = calls_of(path, **where)
    return call


# ---------------------------------------------------------------- evidence not read completely: exit 2


def test_an_empty_file_beside_a_good_one_exits_2_and_says_which_and_why(tmp_path: Path) -> None:
    empty = tmp_path / "empty.flows"
    empty.write_bytes(b"")
    done = cli("check", *relative(AUTH), empty)
    assert done.returncode == 2, done
    assert "empty.flows" in done.stderr and "empty file" in done.stderr, done.stderr
    problem = [line for line in done.stdout.splitlines() if line.startswith("not fully read")]
    assert len(problem) == 1 and "empty.flows" in problem[0] and "empty file" in problem[0], done.stdout
    assert done.stdout.splitlines()[-1].startswith("ERROR:"), done.stdout

    # Judging what was read: the good capture passes (its 401 was answered), the 503 one fails.
    assert cli("check", *relative(AUTH), empty, "--allow-partial").returncode == 0
    partial = cli("check", *relative(RETRY_AFTER_503), empty, "--allow-partial")
    assert partial.returncode == 1, partial
    assert "1 not fully read" in partial.stdout.splitlines()[-1], partial.stdout


def test_a_truncated_capture_exits_2(tmp_path: Path) -> None:
    whole = RETRY_AFTER_503.read_bytes()
    cut = tmp_path / "cut.flows"
    cut.write_bytes(whole[: len(whole) // 2])
    done = cli("check", cut, "--fail-on", "cancelled")  # nothing in it matches: only the cut fails it
    assert done.returncode == 2, done
    assert "cut.flows" in done.stderr and "truncated" in done.stderr, done.stderr
    assert any("cut.flows" in line and "truncated" in line for line in done.stdout.splitlines()), done.stdout
    assert cli("check", cut, "--fail-on", "cancelled", "--allow-partial").returncode == 0


def test_when_nothing_could_be_read_the_report_says_so_whatever_the_options(tmp_path: Path) -> None:
    empty = tmp_path / "empty.flows"
    empty.write_bytes(b"")
    out = tmp_path / "check.xml"
    done = cli(
        "check",
        empty,
        tmp_path / "missing.flows",
        "--allow-partial",
        "--min-calls",
        "0",
        "-o",
        out,
        "--format",
        "junit",
    )
    assert done.returncode == 2, done
    assert done.stdout.splitlines()[-1].startswith("ERROR: no capture could be read"), done.stdout
    xml = JUnitXml.fromfile(str(out))
    assert xml.tests == 2 and xml.errors == 2, "nothing read is an error even with --allow-partial"
    strict = cli("check", empty, "--format", "junit")
    assert strict.returncode == 2 and JUnitXml.fromstring(strict.stdout.encode()).errors == 1, strict


# ---------------------------------------------------------------- no evidence is not success


def test_a_capture_without_mcp_calls_fails_by_min_calls(tmp_path: Path) -> None:
    page = write(tmp_path, exchange(None, method="GET", path="/", body=b"<html></html>", content_type="text/html"))
    done = cli("check", page)
    assert done.returncode == 1, done
    assert "no evidence is not success" in done.stdout, done.stdout
    assert done.stdout.splitlines()[-1].startswith("FAIL: none of 0 calls match"), done.stdout
    assert cli("check", page, "--min-calls", "0").returncode == 0


def test_min_calls_counts_the_calls_analyzed() -> None:
    calls = len(analyze(relative(RETRY_AFTER_503)).calls)
    assert cli("check", *relative(RETRY_AFTER_503), "--fail-on", "cancelled", "--min-calls", str(calls)).returncode == 0
    fewer = cli("check", *relative(RETRY_AFTER_503), "--fail-on", "cancelled", "--min-calls", str(calls + 1))
    assert fewer.returncode == 1 and "no evidence is not success" in fewer.stdout, fewer


@pytest.mark.parametrize("count", ["-1", "many"])
def test_min_calls_must_be_a_count(count: str) -> None:
    done = cli("check", *relative(AUTH), "--min-calls", count)
    assert done.returncode == 2 and "usage:" in done.stderr, done


# ---------------------------------------------------------------- --allow


def test_allow_grammar() -> None:
    (a,) = parse_allow("tool=nope:tool_error")
    assert (a.spec, a.name, a.selectors) == ("tool=nope:TOOL_ERROR", "TOOL_ERROR", (("tool", "nope"),))
    a, b, c = parse_allow(
        " method=tools/call + capture=x.flows : JSONRPC_ERROR, UNSAFE_RETRY,call=c0a1b2c3d4e5f.2:transport"
    )
    assert a.selectors == (("method", "tools/call"), ("capture", "x.flows")) and a.name == "JSONRPC_ERROR"
    assert (b.selectors, b.name) == ((), "UNSAFE_RETRY")
    assert (c.selectors, c.name) == ((("call", "c0a1b2c3d4e5f.2"),), "transport")
    # A path may hold a colon: the name is after the last one.
    assert parse_allowance(r"capture=C:\ci\run.flows:HTTP_ERROR").selectors == (("capture", r"C:\ci\run.flows"),)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("tool=nope:FLAKY", [*OUTCOMES, *FLAGS, *LAYERS]),
        ("colour=red:TOOL_ERROR", [f"{key}=" for key in SELECTOR_KEYS]),
        ("tool=:TOOL_ERROR", [f"{key}=" for key in SELECTOR_KEYS]),
        ("tool=a+tool=b:TOOL_ERROR", ["given twice"]),
        (" , ", ["names nothing"]),
    ],
)
def test_a_bad_allowance_is_a_usage_error_naming_what_is_valid(spec: str, says: list[str]) -> None:
    with pytest.raises(ValueError):
        parse_allow(spec)
    done = cli("check", *relative(TOOLS), "--allow", spec)
    assert done.returncode == 2, done
    assert "usage:" in done.stderr and done.stdout == "", done
    for word in says:
        assert word in done.stderr, f"the error should say {word}:\n{done.stderr}"


def test_allow_excuses_the_expected_tool_error_and_not_a_look_alike() -> None:
    tool_error = only_call(TOOLS, tool="tool_error")["call_id"]
    raise_error = only_call(TOOLS, tool="raise_error")["call_id"]
    protocol_error = only_call(TOOLS, tool="protocol_error")["call_id"]
    assert only_call(TOOLS, tool="raise_error")["outcome"] == only_call(TOOLS, tool="tool_error")["outcome"]

    done = cli("check", *relative(TOOLS), "--allow", "tool=tool_error:TOOL_ERROR")
    assert done.returncode == 1, done
    assert failing_ids(done.stdout) == [protocol_error, raise_error], done.stdout  # in the order they started
    assert allowed_ids(done.stdout) == [tool_error], done.stdout
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("allowed ")]
    assert line.endswith("(--allow tool=tool_error:TOOL_ERROR)") and "isError: tool says no" in line, line
    assert done.stdout.splitlines()[-1].startswith("FAIL: 2 of ") and "1 allowed" in done.stdout, done.stdout

    every = cli(
        "check",
        *relative(TOOLS),
        "--allow",
        "tool=tool_error:TOOL_ERROR,tool=raise_error:TOOL_ERROR",
        "--allow",
        "method=tools/call:JSONRPC_ERROR",
    )
    assert every.returncode == 0, every
    assert set(allowed_ids(every.stdout)) == {tool_error, raise_error, protocol_error}
    assert every.stdout.splitlines()[-1].startswith("OK: none of ") and "3 allowed" in every.stdout


def test_allow_by_capture_does_not_excuse_the_same_failures_in_another_capture() -> None:
    done = cli("check", *relative(TOOLS, TS_TOOLS), "--allow", f"capture={TOOLS.name}:application")
    assert done.returncode == 1, done
    ts_failures = [c["call_id"] for c in calls_of(TS_TOOLS) if c["outcome"] not in NO_FAILURE]
    py_tool_errors = [c["call_id"] for c in calls_of(TOOLS, outcome="TOOL_ERROR")]
    assert len(ts_failures) == 3 and len(py_tool_errors) == 2
    # The application layer is allowed in the Python capture only; its JSON-RPC error (protocol) still fails.
    assert set(allowed_ids(done.stdout)) == set(py_tool_errors), done.stdout
    assert set(failing_ids(done.stdout)) == {*ts_failures, only_call(TOOLS, tool="protocol_error")["call_id"]}


def test_allow_by_call_id() -> None:
    http_error = only_call(RETRY_AFTER_503, outcome="HTTP_ERROR")["call_id"]
    done = cli(
        "check", *relative(RETRY_AFTER_503), "--fail-on", "http_error", "--allow", f"call={http_error}:HTTP_ERROR"
    )
    assert done.returncode == 0, done
    assert allowed_ids(done.stdout) == [http_error]


def test_an_allowance_covers_only_what_it_names(ran_twice: Path) -> None:
    """The re-sent write has two flags: allowing one leaves the other; the 500 before it is its own call."""
    calls = [c for c in analyze([ran_twice]).calls if c["tool"] == "write_record"]
    (http_error,) = [c["call_id"] for c in calls if c["outcome"] == "HTTP_ERROR"]
    (again,) = [c for c in calls if "UNSAFE_RETRY" in c["flags"]]
    assert set(again["flags"]) == {"UNSAFE_RETRY", "DUPLICATE_EXECUTION"}

    one = cli("check", ran_twice, "--allow", "tool=write_record:HTTP_ERROR,tool=write_record:unsafe_retry")
    assert one.returncode == 1, one
    assert allowed_ids(one.stdout) == [http_error] and failing_ids(one.stdout) == [again["call_id"]], one.stdout

    both = cli(
        "check",
        ran_twice,
        "--allow",
        "tool=write_record:HTTP_ERROR,tool=write_record:UNSAFE_RETRY,tool=write_record:DUPLICATE_EXECUTION",
    )
    assert both.returncode == 0, both
    assert allowed_ids(both.stdout) == [http_error, again["call_id"]], both.stdout


def test_an_allowance_that_excused_nothing_is_noted() -> None:
    done = cli("check", *relative(AUTH), "--allow", "tool=nope:TOOL_ERROR")
    assert done.returncode == 0, done
    assert "note: --allow tool=nope:TOOL_ERROR allowed no call" in done.stdout.splitlines(), done.stdout


# ---------------------------------------------------------------- the auth handshake


def test_the_401_that_starts_oauth_is_allowed_by_default() -> None:
    unauthorized = only_call(AUTH, http_status=401)
    assert unauthorized["outcome"] == "HTTP_ERROR"
    done = cli("check", *relative(AUTH))
    assert done.returncode == 0, done
    assert allowed_ids(done.stdout) == [unauthorized["call_id"]]
    assert "answered by authorization" in done.stdout and done.stdout.splitlines()[-1].startswith("OK:"), done.stdout

    strict = cli("check", *relative(AUTH), "--strict")
    assert strict.returncode == 1, strict
    assert failing_ids(strict.stdout) == [unauthorized["call_id"]]
    assert "--strict" in cli("check", "--help").stdout


def test_a_401_never_answered_by_authorization_still_fails(tmp_path: Path) -> None:
    alone = write(tmp_path, exchange(INITIALIZE, status=401, body=b"unauthorized", content_type="text/plain"))
    done = cli("check", alone)
    assert done.returncode == 1, done
    assert len(failing_ids(done.stdout)) == 1 and allowed_ids(done.stdout) == [], done.stdout

    # Credentials came, and the server failed anyway: the chain is auth-retry, but it did not end in success.
    failed = write(
        tmp_path,
        exchange(INITIALIZE, status=401, body=b"unauthorized", content_type="text/plain"),
        exchange(
            INITIALIZE, status=500, body=b"boom", content_type="text/plain", request_headers={"authorization": "x"}
        ),
        name="then-500.flows",
    )
    analysis = analyze([str(failed)])
    (chain,) = [g.record() for g in analysis.retry_groups]
    assert chain["origin"] == "auth-retry" and chain["final_outcome"] == "HTTP_ERROR", chain
    done = cli("check", failed)
    assert done.returncode == 1, done
    assert failing_ids(done.stdout) == [c["call_id"] for c in analysis.calls] and allowed_ids(done.stdout) == []


def test_answered_by_authorization_reads_the_records() -> None:
    call = {"call_id": "c1", "http_status": 401, "outcome": "HTTP_ERROR", "retry_group": "r1"}
    chain = {"retry_group": "r1", "origin": "auth-retry", "members": ["c1", "c2"], "final_outcome": "SUCCESS"}
    assert answered_by_authorization(call, chain)
    assert not answered_by_authorization(call, None)
    assert not answered_by_authorization({**call, "http_status": 403}, chain)
    assert not answered_by_authorization({**call, "http_status": 500}, chain)
    assert not answered_by_authorization(call, {**chain, "origin": "app-retry"})
    assert not answered_by_authorization(call, {**chain, "final_outcome": "HTTP_ERROR"})
    assert not answered_by_authorization(call, {**chain, "members": ["c0", "c1"]}), "the last attempt is the answer"
    assert not answered_by_authorization({**call, "retry_group": "r2"}, chain)


# ---------------------------------------------------------------- the reason on every line


def test_each_line_carries_the_reason_redacted(tmp_path: Path) -> None:
    secret = "abcdef0123456789"
    capture = write(tmp_path, exchange(tool_call(1, "x"), body=error(1, -32000, f"refused Bearer {secret}")))
    (call,) = analyze([str(capture)]).calls
    done = cli("check", capture)
    assert done.returncode == 1, done
    (line,) = [line for line in done.stdout.splitlines() if CALL_ID.match(line)]
    assert line == f"{call['call_id']} tools/call x id=1 JSONRPC_ERROR capture.flows — {redact_text(call['reason'])}"
    assert call["reason"].startswith("JSON-RPC error -32000: refused Bearer")
    assert secret not in done.stdout and "refused Bearer" in done.stdout

    for sample_call in analyze(relative(RETRY_AFTER_503)).calls:
        if sample_call["outcome"] == "HTTP_ERROR":
            assert f" — {sample_call['reason']}" in cli("check", *relative(RETRY_AFTER_503)).stdout
            assert sample_call["reason"] == "HTTP 503: injected 503"  # the status and what the 503's body said


def test_control_characters_in_a_reason_do_not_reach_the_log(tmp_path: Path) -> None:
    capture = write(tmp_path, exchange(tool_call(1, "x"), body=error(1, -32000, "red \x1b[31m nul \x00 end")))
    done = cli("check", capture)
    assert done.returncode == 1, done
    assert "\x1b" not in done.stdout and "\x00" not in done.stdout
    assert "red \\x1b[31m nul \\x00 end" in done.stdout, done.stdout


# ---------------------------------------------------------------- --format junit


def expected_failures(analysis: Any) -> dict[str, str]:
    """Call id -> what fails it by default, worked out here: the failing outcome, then UNSAFE_RETRY and
    DUPLICATE_EXECUTION in the call's order; the 401 answered by authorization and the refused probe the
    client negotiated past (a protocol-fallback chain) are not among them."""
    chains = {g.group_id: g.record() for g in analysis.retry_groups}
    failing = {}
    for c in analysis.calls:
        chain = chains.get(c["retry_group"] or "")
        began = bool(chain) and chain["members"][-1] != c["call_id"] and chain["final_outcome"] in NO_FAILURE
        handshake = began and c["http_status"] == 401 and chain["origin"] == "auth-retry"
        if handshake or (began and chain["origin"] == "protocol-fallback"):
            continue
        names = [c["outcome"]] if c["outcome"] not in NO_FAILURE else []
        names += [f for f in c["flags"] if f in ("UNSAFE_RETRY", "DUPLICATE_EXECUTION")]
        if names:
            failing[c["call_id"]] = ",".join(names)
    return failing


def test_junit_has_a_suite_per_capture_a_case_per_call_and_outcomes_as_failure_types(tmp_path: Path) -> None:
    analysis = analyze(relative(*ALL_SAMPLES))
    out = tmp_path / "check.xml"
    done = cli("check", *relative(*ALL_SAMPLES), "--format", "junit", "-o", out)
    assert done.returncode == 1, done
    assert done.stdout.splitlines()[-1].startswith("FAIL: "), "the text still goes to the log"

    xml = JUnitXml.fromfile(str(out))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {path.name for path in ALL_SAMPLES}
    by_capture: dict[str, list[dict[str, Any]]] = {}
    for c in analysis.calls:
        by_capture.setdefault(Path(c["source"]).name, []).append(c)
    expected = expected_failures(analysis)
    failure_types: dict[str, str] = {}
    for name, suite in suites.items():
        cases = list(suite)
        assert len(cases) == len(by_capture.get(name, [])) == suite.tests, name
        for case, call in zip(cases, by_capture.get(name, []), strict=True):
            assert case.name.split()[0] == call["call_id"] and (call["method"] or "(response)") in case.name
            assert case.classname.endswith(f"/{call['tool'] or call['method'] or '(response)'}"), case.classname
            failures = [r for r in case.result if isinstance(r, Failure)]
            assert len(failures) <= 1 and not [r for r in case.result if not isinstance(r, Failure)]
            for failure in failures:
                failure_types[call["call_id"]] = failure.type
                assert failure.message == call["reason"]
                assert failure.text.splitlines() == [redact_text(line) for line in call["evidence"]]
    assert failure_types == expected
    assert xml.tests == len(analysis.calls) and xml.failures == len(expected)

    # The allowed 401 passes, with why.
    (handshake,) = [case for suite in xml for case in suite if case.system_out and "authorization" in case.system_out]
    assert handshake.is_passed and handshake.name.split()[0] == only_call(AUTH, http_status=401)["call_id"]


def test_junit_on_stdout_reports_a_capture_not_fully_read_as_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.flows"
    empty.write_bytes(b"")
    done = cli("check", *relative(AUTH), empty, "--format", "junit")
    assert done.returncode == 2, done
    xml = JUnitXml.fromstring(done.stdout.encode())
    suites = {suite.name: suite for suite in xml}
    assert suites["empty.flows"].tests == 0 and suites[AUTH.name].tests == len(calls_of(AUTH))
    (read,) = list(suites["mcp-blackbox check"])
    (problem,) = read.result
    assert isinstance(problem, Error) and "empty.flows" in read.name and "empty file" in (problem.message or "")

    partial = cli("check", *relative(AUTH), empty, "--format", "junit", "--allow-partial")
    assert partial.returncode == 0, partial
    (read,) = list({suite.name: suite for suite in JUnitXml.fromstring(partial.stdout.encode())}["mcp-blackbox check"])
    assert read.is_passed and "--allow-partial" in (read.system_out or ""), read


def test_junit_carries_characters_xml_cannot(tmp_path: Path) -> None:
    capture = write(tmp_path, exchange(tool_call(1, "x"), body=error(1, -32000, "nul \x00 esc \x1b \ud800 < & >")))
    done = cli("check", capture, "--format", "junit")
    assert done.returncode == 1, done
    ((case,),) = [list(suite) for suite in JUnitXml.fromstring(done.stdout.encode())]
    (failure,) = case.result
    assert "nul \\x00 esc \\x1b" in failure.message and "< & >" in failure.message, failure.message


def test_junit_min_calls_is_a_failing_case(tmp_path: Path) -> None:
    page = write(tmp_path, exchange(None, method="GET", path="/", body=b"<html></html>", content_type="text/html"))
    done = cli("check", page, "--format", "junit")
    assert done.returncode == 1, done
    xml = JUnitXml.fromstring(done.stdout.encode())
    assert xml.failures == 1
    (case,) = list({suite.name: suite for suite in xml}["mcp-blackbox check"])
    assert "no evidence is not success" in case.result[0].message


# ---------------------------------------------------------------- --format github


def test_github_escapes_as_documented() -> None:
    assert escape_data("100%\r\nnext: a, b") == "100%25%0D%0Anext: a, b"
    assert escape_property("100%\r\nnext: a, b") == "100%25%0D%0Anext%3A a%2C b"


def test_github_one_error_per_failing_call_with_the_reason_escaped(tmp_path: Path) -> None:
    capture = write(tmp_path, exchange(tool_call(1, "x:y"), body=error(1, -32000, "100% sure\nsecond: line")))
    (call,) = analyze([str(capture)]).calls
    done = cli("check", capture, "--format", "github")
    assert done.returncode == 1, done
    error_line, verdict = done.stdout.splitlines()
    title, message = re.fullmatch(r"::error title=([^:]*)::(.*)", error_line).groups()  # type: ignore[union-attr]
    assert title == f"JSONRPC_ERROR%3A {call['call_id']} tools/call x%3Ay in capture.flows", title
    assert message.endswith("— JSON-RPC error -32000: 100%25 sure%0Asecond: line"), message
    assert verdict.startswith("FAIL: 1 of 1 calls match"), verdict


def test_github_on_the_samples_and_the_ok_notice() -> None:
    analysis = analyze(relative(*ALL_SAMPLES))
    done = cli("check", *relative(*ALL_SAMPLES), "--format", "github")
    assert done.returncode == 1, done
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == len(expected_failures(analysis))
    assert not [line for line in done.stdout.splitlines() if line.startswith("::notice")]

    ok = cli("check", *relative(AUTH), "--format", "github")
    assert ok.returncode == 0, ok
    assert ok.stdout.splitlines()[-1].startswith("::notice title=mcp-blackbox check::OK: none of "), ok.stdout


def test_github_step_summary_is_appended_as_an_inert_markdown_table(tmp_path: Path) -> None:
    summary = tmp_path / "step-summary.md"
    summary.write_text("# earlier step\n\n", encoding="utf-8")
    hostile = "a | b ![x](http://e/t.png) [l](http://e) <b>x</b> `c`"
    capture = write(
        tmp_path,
        exchange(tool_call(1, "x"), body=error(1, -32000, hostile)),
        exchange(tool_call(2, "y"), body=error(2, -32000, "fine")),
    )
    ids = [c["call_id"] for c in analyze([str(capture)]).calls]
    done = cli_with_env(capture, "--format", "github", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 1, done
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# earlier step\n\n"), "appended, not overwritten"
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<img" not in html and "<a " not in html and "<b>" not in html, html
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.DOTALL)
    assert len(rows) == 3, html  # the head and the two failing calls
    cells = [re.findall(r"<t[dh]>(.*?)</t[dh]>", row, re.DOTALL) for row in rows]
    assert all(len(row) == 7 for row in cells), cells
    assert [row[0] for row in cells[1:]] == ids
    assert "a | b" in cells[1][6] and "http://e/t.png" in cells[1][6], cells[1][6]

    # Only the github format writes the step summary.
    before = summary.read_text(encoding="utf-8")
    cli_with_env(capture, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.read_text(encoding="utf-8") == before


def cli_with_env(*args: Any, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    console_script = Path(sys.executable).with_name("mcp-blackbox")
    return subprocess.run(
        [str(console_script), "check", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


# ---------------------------------------------------------------- --format json


def test_json_verdict_counts_failing_and_allowed_calls() -> None:
    done = cli("check", *relative(RETRY_AFTER_503, AUTH), "--format", "json")
    assert done.returncode == 1, done
    document = json.loads(done.stdout)
    analysis = analyze(relative(RETRY_AFTER_503, AUTH))
    expected = expected_failures(analysis)
    assert document["verdict"] == "fail" and document["exit_code"] == 1
    assert document["counts"]["calls"] == len(analysis.calls) and document["counts"]["failing"] == len(expected)
    assert {c["call_id"]: ",".join(c["failed_on"]) for c in document["failing"]} == expected
    by_id = {c["call_id"]: c for c in analysis.calls}
    for entry in document["failing"]:
        call = by_id[entry["call_id"]]
        assert entry["outcome"] == call["outcome"] and entry["flags"] == call["flags"]
        assert entry["reason"] == call["reason"] and entry["capture"] == RETRY_AFTER_503.name
    (allowed,) = document["allowed"]
    assert allowed["call_id"] == only_call(AUTH, http_status=401)["call_id"]
    assert allowed["allowed_by"][0].startswith("answered by authorization")
    assert document["read_problems"] == []


def test_json_pass_and_read_problems(tmp_path: Path) -> None:
    ok = cli("check", *relative(AUTH), "--format", "json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["verdict"] == "pass", ok
    empty = tmp_path / "empty.flows"
    empty.write_bytes(b"")
    out = tmp_path / "check.json"
    done = cli("check", *relative(AUTH), empty, "--format", "json", "-o", out)
    assert done.returncode == 2, done
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["verdict"] == "fail" and document["exit_code"] == 2
    (problem,) = document["read_problems"]
    assert problem["source"] == str(empty) and "empty file" in problem["reason"]
    assert done.stdout.splitlines()[-1].startswith("ERROR:"), "the text goes to the log"


def test_a_refused_probe_the_client_negotiated_past_is_allowed_and_a_lone_one_fails(tmp_path: Path) -> None:
    fallback = SAMPLES / "py-protocol-fallback.flows"
    (probe,) = [c for c in analyze(relative(fallback)).calls if c["method"] == "server/discover"]
    done = cli("check", *relative(fallback))
    assert done.returncode == 0, done.stdout
    assert allowed_ids(done.stdout) == [probe["call_id"]] and "(negotiation: " in done.stdout

    # The look-alike: the same refusal with no initialize after it. Nothing was negotiated; it fails.
    refused = exchange(rpc(1, "server/discover", {}), body=error(1, -32601, "Method not found"))
    lone = write(tmp_path, refused)
    done = cli("check", lone)
    assert done.returncode == 1, done.stdout
    assert failing_ids(done.stdout) == [analyze([str(lone)]).calls[0]["call_id"]] and allowed_ids(done.stdout) == []


# ---------------------------------------------------------------- read as a stream


def gate_outputs(gate: Gate) -> dict[str, str]:
    return {fmt: render(gate, fmt) for fmt in FORMATS} | {"step summary": step_summary(gate)}


@pytest.mark.parametrize("names", [["UNSAFE_RETRY"], list(DEFAULT_FAIL_ON), ["transport", "protocol"]])
def test_the_gate_judged_from_the_stream_says_what_the_whole_analysis_says(names: list[str]) -> None:
    """check reads each recording through a CallStream with the default window, as export does, keeping only
    the calls its outputs list: every format says what the gate over the whole analysis says, the allowed
    protocol starts included (their retry groups are settled before their calls are final)."""
    allow = parse_allow("tool=raise_error:TOOL_ERROR,HTTP_ERROR")
    for capture in [*ALL_SAMPLES, *SAMPLES.glob("*.stdio.jsonl")]:
        paths = relative(capture)
        whole = judge(analyze(paths), paths, names, allow, testcases=True)
        stream = CallStream(paths, window=DEFAULT_WINDOW)
        streamed = judge(stream, paths, names, allow, testcases=True)
        assert streamed.calls == stream.call_count > 0, capture
        assert gate_outputs(streamed) == gate_outputs(whole), capture
    protocol_starts = judge(CallStream(relative(AUTH), window=DEFAULT_WINDOW), relative(AUTH))
    assert [j.allowed_by[0].split(":")[0] for j in protocol_starts.allowed] == [AUTH_HANDSHAKE]


def test_a_passing_call_is_only_counted_unless_junit_wants_its_testcase() -> None:
    paths = relative(TOOLS)
    counted = judge(CallStream(paths, window=DEFAULT_WINDOW), paths)
    assert counted.testcases is None and counted.calls > len(counted.failing) + len(counted.allowed) > 0
    with pytest.raises(ValueError, match="testcases=True"):
        render(counted, "junit")
    every = judge(CallStream(paths, window=DEFAULT_WINDOW), paths, testcases=True)
    assert every.testcases is not None and len(every.testcases) == every.calls
    passed = [case for case in every.testcases if isinstance(case, Passed)]
    assert len(passed) == every.calls - len(every.failing) - len(every.allowed)
