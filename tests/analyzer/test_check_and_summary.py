"""``mcp-blackbox check`` (the CI gate) and ``mcp-blackbox summary`` in 80 columns.

check: exit 1 and one line per matching call when a call has an outcome or flag named in
--fail-on (or failed in a named layer), 0 and one OK line when none does, 2 on a usage error or
when a capture could not be read completely. Both commands run as the installed console script, as CI
runs them. The gate's newer parts (--allow, --min-calls, --allow-partial, the auth handshake, the
formats) are in test_check_gate.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.review.check import DEFAULT_FAIL_ON, FLAGS, LAYERS, OUTCOMES, matching_calls, parse_fail_on
from mcp_blackbox.analyzer.review.summary_text import summary_text

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_captures"
ALL_SAMPLES = sorted(SAMPLES.glob("*.flows"))
RETRY_AFTER_503 = SAMPLES / "py-app-retry-after-503.flows"
RESUMED = SAMPLES / "ts-2025-resume-after-cut.flows"  # a cut stream resumed: nothing failed
WIDTH = 80
CALL_ID = re.compile(r"^(c[0-9a-f]{12}(?:\.\d+)?(?:~\d+)?) ")


def cli(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    console_script = Path(sys.executable).with_name("mcp-blackbox")
    command = [str(console_script)] if console_script.exists() else [sys.executable, "-m", "analyzer.cli"]
    return subprocess.run(
        [*command, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def relative(*paths: Path) -> list[str]:
    return [str(path.relative_to(REPO)) for path in paths]


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def listed_ids(stdout: str) -> list[str]:
    return [m.group(1) for line in stdout.splitlines() if (m := CALL_ID.match(line))]


@pytest.fixture(scope="module")
def all_samples() -> Any:
    return analyze(relative(*ALL_SAMPLES))


# ---------------------------------------------------------------- matching, without the CLI


def record(outcome: str, layer: str, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"outcome": outcome, "layer": layer, "flags": list(flags)}


def test_names_are_case_insensitive_and_unknown_ones_are_refused() -> None:
    assert parse_fail_on("http_error, Unsafe_Retry,TRANSPORT,") == ["HTTP_ERROR", "UNSAFE_RETRY", "transport"]
    with pytest.raises(ValueError) as refused:
        parse_fail_on("HTTP_ERROR,FLAKY")
    for name in (*OUTCOMES, *FLAGS, *LAYERS):
        assert name in str(refused.value), f"{name} not among the valid names:\n{refused.value}"
    with pytest.raises(ValueError):
        parse_fail_on(" , ")


def test_matching_by_outcome_flag_and_failing_layer() -> None:
    calls = [
        record("HTTP_ERROR", "transport"),
        record("ACCEPTED", "transport"),
        record("TOOL_SUCCESS", "application", ("UNSAFE_RETRY",)),
        record("INPUT_REQUIRED", "interaction"),
        record("CANCELLED", "interaction"),
        record("TOOL_ERROR", "application"),
    ]
    assert matching_calls(calls, ["http_error"]) == [calls[0]]
    assert matching_calls(calls, ["UNSAFE_RETRY"]) == [calls[2]]
    # A layer is the layer that failed: an accepted notification or an input_required round is no failure.
    assert matching_calls(calls, ["Transport"]) == [calls[0]]
    assert matching_calls(calls, ["interaction"]) == [calls[4]]
    assert matching_calls(calls, ["application"]) == [calls[5]]
    assert matching_calls(calls, DEFAULT_FAIL_ON) == [calls[0], calls[2], calls[4], calls[5]]
    assert matching_calls(calls, ["NO_RESPONSE", "LATE_RESPONSE"]) == []


def test_every_outcome_and_flag_in_the_samples_can_be_named(all_samples: Any) -> None:
    for call in all_samples.calls:
        assert call["outcome"] in OUTCOMES and call["layer"] in LAYERS, call
        assert set(call["flags"]) <= set(FLAGS), call


# ---------------------------------------------------------------- check: exit codes and output


def test_check_fails_on_the_503_and_lists_the_write_record_call() -> None:
    done = cli("check", *relative(RETRY_AFTER_503), "--fail-on", "HTTP_ERROR")
    assert done.returncode == 1, done
    expected = [c for c in analyze(relative(RETRY_AFTER_503)).calls if c["outcome"] == "HTTP_ERROR"]
    assert [c["tool"] for c in expected] == ["write_record"]
    assert listed_ids(done.stdout) == [expected[0]["call_id"]]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(f"{expected[0]['call_id']} ")]
    for part in ("tools/call", "write_record", f"id={expected[0]['jsonrpc_id']}", "HTTP_ERROR", RETRY_AFTER_503.name):
        assert part in line, f"{part!r} missing from {line!r}"
    assert done.stdout.splitlines()[-1].startswith("FAIL: 1 of "), done.stdout


def test_check_passes_when_nothing_matches() -> None:
    assert not [c for c in analyze(relative(RETRY_AFTER_503)).calls if c["outcome"] == "CANCELLED"]
    done = cli("check", *relative(RETRY_AFTER_503), "--fail-on", "cancelled")
    assert done.returncode == 0, done
    (line,) = done.stdout.splitlines()
    assert line.startswith("OK:") and re.search(r"\b10 calls\b", line) and "14 flows" in line, line


def auth_handshakes(analysis: Any) -> list[str]:
    """How the protocol begins, worked out here on their own: the 401s that an auth-retry chain answered and
    the refused probes a protocol-fallback chain negotiated past, each chain ending in success."""
    chains = {g.group_id: g.record() for g in analysis.retry_groups}
    return [
        c["call_id"]
        for c in analysis.calls
        if c["retry_group"] in chains
        and (
            (c["http_status"] == 401 and chains[c["retry_group"]]["origin"] == "auth-retry")
            or chains[c["retry_group"]]["origin"] == "protocol-fallback"
        )
        and chains[c["retry_group"]]["final_outcome"] in {"SUCCESS", "TOOL_SUCCESS"}
        and c["call_id"] != chains[c["retry_group"]]["members"][-1]
    ]


def test_check_default_fails_on_every_failure_and_unsafe_retry(ran_twice: Path) -> None:
    all_samples = analyze([*relative(*ALL_SAMPLES), str(ran_twice)])
    done = cli("check", *relative(*ALL_SAMPLES), ran_twice)
    assert done.returncode == 1, done
    handshakes = auth_handshakes(all_samples)
    # py-auth-retry.flows starts with a 401 that authorization answered; py-protocol-fallback.flows with a probe.
    assert len(handshakes) == 2, handshakes
    expected = [
        c["call_id"]
        for c in all_samples.calls
        if c["outcome"] not in {"SUCCESS", "TOOL_SUCCESS", "ACCEPTED", "INPUT_REQUIRED"} or "UNSAFE_RETRY" in c["flags"]
    ]
    # How the protocol begins is listed, as allowed, and is not a failure.
    assert listed_ids(done.stdout) == [i for i in expected if i not in handshakes]
    for handshake in handshakes:
        assert [line for line in done.stdout.splitlines() if line.startswith(f"allowed {handshake} ")], done.stdout
    assert any("UNSAFE_RETRY" in c["flags"] for c in all_samples.calls if c["call_id"] in expected)
    assert done.stdout.splitlines()[-1].startswith(
        f"FAIL: {len(expected) - 2} of {len(all_samples.calls)} calls match, 2 allowed"
    ), done.stdout


def test_check_default_passes_a_resumed_stream() -> None:
    """The answer came late, on the resumed GET: LATE_RESPONSE is worth a look, not a failure."""
    done = cli("check", *relative(RESUMED))
    assert done.returncode == 0, done
    assert done.stdout.startswith("OK:"), done.stdout


def test_check_output_is_one_line_per_call_without_color(all_samples: Any) -> None:
    """A call line carries its reason now, so it may pass 80 columns; it stays one line, for grep and CI logs.
    The verdict line and stderr still fit 80 columns."""
    for fail_on in ("transport,protocol,interaction,application", ",".join(FLAGS)):
        done = cli("check", *relative(*ALL_SAMPLES), "--fail-on", fail_on, "--strict")
        assert done.returncode == 1, done
        *calls, verdict = done.stdout.splitlines()
        expected = matching_calls(all_samples.calls, parse_fail_on(fail_on))
        assert [CALL_ID.match(line).group(1) for line in calls if CALL_ID.match(line)] == [
            c["call_id"] for c in expected
        ], done.stdout
        assert len(calls) == len(expected), "a call per line, nothing wrapped"
        assert all(" — " in line for line in calls), done.stdout
        assert len(verdict) <= WIDTH and too_wide(done.stderr) == [], done
        assert "\x1b" not in done.stdout + done.stderr


@pytest.mark.parametrize("fail_on", ["HTTP_ERROR,FLAKY", ""])
def test_check_usage_errors_exit_2(fail_on: str) -> None:
    done = cli("check", *relative(RETRY_AFTER_503), "--fail-on", fail_on)
    assert done.returncode == 2, done
    assert "usage:" in done.stderr and done.stdout == "", done
    for name in (*OUTCOMES, *FLAGS, *LAYERS):
        assert name in done.stderr, f"the error should name {name}:\n{done.stderr}"
    assert too_wide(done.stderr) == [], done.stderr


def test_check_without_captures_is_a_usage_error() -> None:
    assert cli("check").returncode == 2


def test_check_exits_2_when_no_capture_could_be_read(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.flows"
    garbage.write_bytes(bytes(range(256)) * 4)
    missing = tmp_path / "missing.flows"
    done = cli("check", garbage, missing, "--fail-on", "HTTP_ERROR")
    assert done.returncode == 2, done
    assert garbage.name in done.stderr and missing.name in done.stderr, done.stderr
    assert "usage:" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_check_reads_what_it_can_beside_a_missing_capture(tmp_path: Path) -> None:
    """A missing capture is evidence not read: exit 2, unless --allow-partial judges what was read."""
    done = cli("check", *relative(RETRY_AFTER_503), tmp_path / "missing.flows", "--fail-on", "HTTP_ERROR")
    assert done.returncode == 2, done
    assert "missing.flows" in done.stderr and "missing.flows" in done.stdout, done
    assert done.stdout.splitlines()[-1].startswith("ERROR:"), done.stdout
    partial = cli(
        "check", *relative(RETRY_AFTER_503), tmp_path / "missing.flows", "--fail-on", "HTTP_ERROR", "--allow-partial"
    )
    assert partial.returncode == 1, partial
    assert "missing.flows" in partial.stderr
    assert "not fully read" in partial.stdout.splitlines()[-1], partial.stdout


def test_long_stderr_messages_wrap_and_keep_the_path_whole(tmp_path: Path) -> None:
    name = "captures-of-the-nightly-integration-run/the-tool-calls-that-failed.flows"
    done = cli("check", name, cwd=tmp_path)
    assert done.returncode == 2, done
    assert name in done.stderr, done.stderr
    assert too_wide(done.stderr) == [], done.stderr


# ---------------------------------------------------------------- summary in 80 columns


def test_summary_of_all_samples_fits_80_columns(all_samples: Any) -> None:
    done = cli("summary", *relative(*ALL_SAMPLES))
    assert done.returncode == 0, done
    assert too_wide(done.stdout) == [], "\n".join(too_wide(done.stdout))
    assert too_wide(done.stderr) == [], done.stderr  # the note about streams without per-event times wraps
    assert "event stream(s) without per-event times" in " ".join(done.stderr.split())

    lines = done.stdout.splitlines()
    calls = all_samples.calls
    assert lines[0].startswith(f"{len(calls)} calls in {all_samples.analyzed} exchanges"), lines[0]
    # The counts wrap between items: each name stays beside its count.
    counts = " ".join(line.strip() for line in lines[: lines.index("")])
    for key in ("outcome", "layer", "method", "tool", "flags"):
        tally: dict[str, int] = {}
        for call in calls:
            for name in call[key] if key == "flags" else [call[key]] if call[key] is not None else []:
                tally[name] = tally.get(name, 0) + 1
        assert tally, key
        for name, count in tally.items():
            assert re.search(rf"(^|[ :,]){re.escape(name)} {count}\b", counts), f"{name} {count} not in the counts"
    assert "flags: " in counts  # each flag with its count: the loop above

    chains = lines[lines.index("retry chains:") + 1 :]
    assert len(all_samples.retry_groups) >= 5
    text = " ".join(" ".join(chains).split())
    for group in all_samples.retry_groups:
        chain = group.record()
        assert f"{chain['retry_group']} {chain['origin']} [{chain['confidence']}]" in text, chain
        assert " -> ".join(chain["members"]) in text, chain


@pytest.mark.parametrize("width", [80, 60])
def test_summary_text_lines_never_exceed_the_width(all_samples: Any, width: int) -> None:
    text = summary_text(all_samples, width=width)
    assert [line for line in text.splitlines() if len(line) > width] == []
    assert "calls to look at:" in text and "retry chains:" in text


def test_summary_says_ran_more_than_once_once_with_every_attempt(ran_twice: Path) -> None:
    """Issue 22: one answer to "did it run twice?". The flags that feed it (DUPLICATE_EXECUTION, UNSAFE_RETRY)
    stay in the export, but the summary says the answer instead: its count, and the write with each attempt
    and how it ended; the retry chain that holds them says the same. Wrapped at 50 columns, a call's id,
    method and tool stay together."""
    analysis = analyze([ran_twice])
    text = summary_text(analysis, width=50)
    flagged = next(c for c in analysis.calls if "UNSAFE_RETRY" in c["flags"])
    first = next(c for c in analysis.calls if c["outcome"] == "HTTP_ERROR")
    joined = " ".join(text.split())
    assert f"{flagged['call_id']} {flagged['method']} {flagged['tool']}" in joined
    assert "DUPLICATE_EXECUTION" not in text and "UNSAFE_RETRY" not in text
    assert "ran more than once: 0 certain, 1 possible" in joined
    assert "write_record (arguments " in joined and "possible, 2 runs in 2 attempts" in joined
    assert f"{first['call_id']} HTTP_ERROR (HTTP 500): may have run; retry chain r1" in joined
    assert f"{flagged['call_id']} TOOL_SUCCESS (HTTP 200): ran; retry chain r1" in joined
    assert f"{first['call_id']} -> {flagged['call_id']} = TOOL_SUCCESS, unsafe ran more than once: possible" in joined


@pytest.mark.parametrize("page", ["docs/analysis.md", "README.md"])
def test_the_documented_example_runs_as_written(page: str) -> None:
    """The `check` example of docs/analysis.md ("check, the gate for CI"), and the README's quick start that
    shows it again: the command as written, and its output as shown."""
    text = (REPO / page).read_text(encoding="utf-8")
    example = re.search(r"^    \$ (\.venv/bin/mcp-blackbox check .*)\n((?:    (?!\$).*\n)+)", text, re.MULTILINE)
    assert example, f"{page}: no `check` example"
    command, shown = example.group(1).split(), example.group(2)
    done = cli(*command[1:])
    assert done.returncode == 1, done
    assert done.stdout == "".join(line[4:] + "\n" for line in shown.splitlines()), done.stdout
