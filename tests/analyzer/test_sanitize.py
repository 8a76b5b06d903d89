"""A capture to share: secrets replaced by consistent pseudonyms (analyzer/redaction/sanitize.py,
analyzer/redaction/redact.py's ``Pseudonyms``), in every place a flow holds them, the analysis unchanged;
and the recorder's ``mcp_redact``, which writes the redacted copy through mitmproxy's own -w writer while
the live flow stays as it was."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import io as flow_io
from mitmproxy.addons.save import Save
from mitmproxy.http import HTTPFlow
from mitmproxy.net import encoding
from mitmproxy.test import taddons, tflow

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.outputs.export import write_json
from mcp_blackbox.analyzer.redaction.redact import PSEUDONYM, Pseudonyms
from mcp_blackbox.analyzer.redaction.sanitize import Sanitizer, redact_files
from mcp_blackbox.cli.main import main
from tests.analyzer.flows import error, exchange, result, rpc, sse, text_result, tool_call, write

TOKEN = "tok-live-0123456789abcdef"
OTHER_TOKEN = "tok-live-fedcba9876543210"
API_KEY = "key-5f4dcc3b5aa765d61d8327deb882cf99"
PASSWORD = "hunter2-correct-horse"
ACCESS = "ya29.a0AfH6SMBx-access"
SK = "sk-proj-AbCdEf0123456789XyZ"
SESSION = "5f0c2a7e9b3d4c1e8f6a7b2c3d4e5f60"
SECRETS = (TOKEN, OTHER_TOKEN, API_KEY, PASSWORD, ACCESS, SK, SESSION)


def read(path: Path) -> list[HTTPFlow]:
    with path.open("rb") as f:
        return [flow for flow in flow_io.FlowReader(f).stream() if isinstance(flow, HTTPFlow)]


def pseudonyms_in(text: str) -> set[str]:
    return set(PSEUDONYM.findall(text))


def planted_flow() -> HTTPFlow:
    call = tool_call(1, "echo", progressToken="progress-7")
    call["params"]["arguments"] = {"text": f"use {SK}", "password": PASSWORD, "access_token": ACCESS}
    answer = result(1, text_result(f"echo: use {SK}; pw {PASSWORD}", nextCursor="cursor-2"))
    flow = exchange(
        call,
        body=sse(rpc(None, "notifications/progress", {"progressToken": "progress-7", "progress": 1}), answer),
        content_type="text/event-stream",
        path=f"/mcp?api_key={API_KEY}&cursor=3",
        request_headers={
            "authorization": f"Bearer {TOKEN}",
            "cookie": f"session={TOKEN}",
            "x-api-key": API_KEY,
            "mcp-session-id": SESSION,
        },
        response_headers={"mcp-session-id": SESSION},
        stream={"ended": "complete", "bytes": 10, "stored_bytes": 10, "failure": f"TOOL_ERROR: {PASSWORD}"},
    )
    flow.metadata["mcp_blackbox"]["failure"] = f"TOOL_ERROR: wrong password {PASSWORD}"
    flow.comment = f"MCP: access_token={ACCESS}"
    return flow


# ---------------------------------------------------------------- pseudonyms


def test_the_same_secret_gets_the_same_pseudonym_and_another_secret_another() -> None:
    names = Pseudonyms()
    assert names.of(TOKEN) == names.of(TOKEN)
    assert names.of(TOKEN) != names.of(OTHER_TOKEN)
    assert PSEUDONYM.fullmatch(names.of(TOKEN))
    assert names.of(names.of(TOKEN)) == names.of(TOKEN)  # a capture redacted before keeps its pseudonyms
    assert names.of("") == ""


def test_each_run_has_its_own_key() -> None:
    """Without the key a pseudonym cannot be checked against a guessed password, nor two files correlated."""
    assert Pseudonyms().of(PASSWORD) != Pseudonyms().of(PASSWORD)
    assert Pseudonyms(b"k").of(PASSWORD) == Pseudonyms(b"k").of(PASSWORD)


def test_two_secrets_never_share_a_pseudonym(monkeypatch: pytest.MonkeyPatch) -> None:
    names = Pseudonyms(b"k")
    first = names.of("one-secret-value")
    names._owners[f"REDACTED-{first[9:]}"] = "one-secret-value"
    # Another secret whose first 8 hex digits clash: more digits.
    digest = "f" * 64
    monkeypatch.setattr("hmac.HMAC.hexdigest", lambda self: first[9:] + digest[8:])
    second = names.of("two-secret-value")
    assert second != first and second.startswith(first) and len(second) == len(first) + 4


# ---------------------------------------------------------------- one flow, every place


def test_every_planted_secret_is_replaced_and_correlation_survives() -> None:
    live = planted_flow()
    before = live.get_state()
    copy = Sanitizer().copy(live)
    assert copy is not None
    assert live.get_state() == before, "the flow handed in is never changed"
    written = io.BytesIO()
    flow_io.FlowWriter(written).add(copy)
    data = written.getvalue().decode("utf-8", "replace")
    for secret in SECRETS[:1] + SECRETS[2:]:
        assert secret not in data, secret
    headers = copy.request.headers
    token = headers["authorization"].removeprefix("Bearer ")
    assert PSEUDONYM.fullmatch(token)
    assert headers["cookie"] == f"session={token}", "the token learned from Authorization, found in the cookie"
    assert headers["x-api-key"] in copy.request.path, "one API key, one pseudonym in header and query"
    assert copy.request.path.endswith("&cursor=3")
    assert headers["mcp-session-id"] == copy.response.headers["mcp-session-id"] != SESSION
    body = json.loads(copy.request.content or b"")
    arguments = body["params"]["arguments"]
    assert arguments["password"] in copy.response.text  # echoed back: the same pseudonym
    assert arguments["text"].startswith("use REDACTED-")  # a key that says what it is: no name needed
    assert body["params"]["_meta"] == {"progressToken": "progress-7"}
    assert '"progressToken": "progress-7"' in (copy.response.text or "")
    assert '"nextCursor": "cursor-2"' in (copy.response.text or "")
    record = copy.metadata["mcp_blackbox"]
    assert record["failure"] == f"TOOL_ERROR: wrong password {arguments['password']}"
    assert record["stream"]["failure"] == f"TOOL_ERROR: {arguments['password']}"
    assert copy.comment == f"MCP: access_token={arguments['access_token']}"


def test_a_raw_secret_is_replaced_once_something_names_it() -> None:
    """A password in free text has no name to go by: kept until a named place (here another flow) shows it."""
    raw = "Plain-Secret-Value-77"
    quoted = exchange(tool_call(1, "echo"), body=result(1, text_result(f"your key is {raw}")))
    named = exchange(rpc(2, "tools/call", {"name": "login", "arguments": {"api_key": raw}}), body=result(2, {}))
    alone = Sanitizer().copy(quoted)
    assert alone is not None and raw in (alone.response.text or "")
    sanitizer = Sanitizer()
    sanitizer.copy(named)  # what redact_files' first reading of the whole file does
    again = sanitizer.copy(quoted)
    assert again is not None and raw not in (again.response.text or "")
    assert sanitizer.pseudonyms.of(raw) in (again.response.text or "")


KEYS = [
    SK, "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "ghp_0123456789abcdefghijABCDEFGHIJ0123", "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE", "AIzaSyA-0123456789abcdefghijklmnopqrstu", "sk_live_0123456789abcdefAB",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]  # fmt: skip


@pytest.mark.parametrize("key", KEYS)
def test_keys_that_say_what_they_are_are_replaced_without_a_name(key: str) -> None:
    """A provider's key returned by a tool as text: in the report (a marker) and in a shared capture."""
    from mcp_blackbox.analyzer.redaction.redact import marker, redact_text

    assert redact_text(f"here: {key}.") == f"here: {marker(key)}."
    copy = Sanitizer().copy(exchange(tool_call(1), body=result(1, text_result(f"here: {key}."))))
    assert copy is not None and key not in (copy.response.text or "") and "REDACTED-" in (copy.response.text or "")


def test_prose_and_ids_are_no_keys() -> None:
    from mcp_blackbox.analyzer.redaction.redact import redact_text

    for text in ("sk-learn is a library", "task-0123456789abcdefghij0123", "ask-0123456789abcdefghijklm", "AKIA"):
        assert redact_text(text) == text


def test_mcp_fields_that_merely_say_token_survive() -> None:
    sampling = rpc("s1", "sampling/createMessage", {"messages": [], "maxTokens": 512})
    usage = result("s1", {"model": "m", "usage": {"input_tokens": 9, "output_tokens": 3}, "token_type": "Bearer"})
    listing = result(7, {"tools": [], "nextCursor": "c-2", "nextPageToken": "page-token-2"})
    for message in (sampling, usage, listing):
        flow = exchange(message, body=message)
        copy = Sanitizer().copy(flow)
        assert copy is not None
        assert json.loads(copy.request.content or b"") == message
        assert copy.response.raw_content == flow.response.raw_content, "nothing to redact: the same bytes"


def test_an_unchanged_body_keeps_its_bytes_and_a_changed_one_keeps_its_spacing() -> None:
    spaced = b'{"jsonrpc": "2.0", "id": 1, "result": {"password": "p4ssw0rd-value"}}'
    compact = b'{"jsonrpc":"2.0","id":1,"result":{"password":"p4ssw0rd-value"}}'
    for body, separator in ((spaced, '": '), (compact, '":"')):
        copy = Sanitizer().copy(exchange(tool_call(1), body=body))
        assert copy is not None and b"p4ssw0rd" not in (copy.response.content or b"")
        assert separator in (copy.response.text or "")


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd", "deflate"])
def test_compressed_bodies_are_decoded_redacted_and_encoded_again_with_their_length(coding: str) -> None:
    plain = sse(result(1, text_result(json.dumps({"access_token": ACCESS, "note": "x" * 200}))))
    flow = exchange(
        tool_call(1),
        body=encoding.encode(plain, coding),
        content_type="text/event-stream",
        response_headers={"content-encoding": coding, "content-length": "0"},
        stream={"ended": "complete", "bytes": 0, "stored_bytes": 0},
    )
    flow.response.headers["content-length"] = str(len(flow.response.raw_content or b""))
    stored = len(flow.response.raw_content or b"")
    flow.metadata["mcp_blackbox"]["stream"].update(bytes=stored, stored_bytes=stored)
    copy = Sanitizer().copy(flow)
    assert copy is not None and copy.response is not None
    raw = copy.response.raw_content or b""
    assert copy.response.headers["content-encoding"] == coding
    assert copy.response.headers["content-length"] == str(len(raw))
    assert copy.metadata["mcp_blackbox"]["stream"]["stored_bytes"] == len(raw)
    decoded = encoding.decode(raw, coding)
    assert ACCESS.encode() not in decoded and b"REDACTED-" in decoded and ACCESS.encode() not in raw


def test_a_compressed_stream_cut_short_is_redacted_as_far_as_it_decodes() -> None:
    events = [sse(result(n, {"content": [], "refresh_token": f"rt-{n:04d}-{os.urandom(12).hex()}"})) for n in range(20)]
    whole = gzip.compress(b"".join(events))
    flow = exchange(
        tool_call(1),
        body=whole[: len(whole) * 3 // 4],
        content_type="text/event-stream",
        response_headers={"content-encoding": "gzip"},
    )
    copy = Sanitizer().copy(flow)
    assert copy is not None and copy.response is not None
    stored = copy.response.content or b""  # decoded by what the headers say
    assert stored.startswith(b"data: {") and stored.count(b"REDACTED-") >= 10
    assert not re.search(rb"rt-\d{4}-", stored)


def test_a_body_that_cannot_be_decoded_is_dropped_and_said() -> None:
    flow = exchange(
        tool_call(1), body=b"\x00not brotli " + ACCESS.encode(), response_headers={"content-encoding": "br"}
    )
    flow.metadata["mcp_blackbox"] = {"version": 1}
    copy = Sanitizer().copy(flow)
    assert copy is not None and copy.response.raw_content == b""
    assert "could not be decoded" in copy.metadata["mcp_blackbox"]["dropped_body"][0]


def test_the_legacy_session_id_keeps_one_pseudonym_in_the_query_and_the_endpoint_event() -> None:
    stream = exchange(
        None,
        method="GET",
        path="/sse",
        body=f"event: endpoint\r\ndata: /messages/?session_id={SESSION}\r\n\r\n".encode(),
        content_type="text/event-stream",
    )
    post = exchange(tool_call(1), path=f"/messages/?session_id={SESSION}", status=202, body=b"Accepted")
    sanitizer = Sanitizer()
    copies = [sanitizer.copy(stream), sanitizer.copy(post)]
    assert copies[0] is not None and copies[1] is not None
    pseudonym = copies[1].request.path.split("=")[1]
    assert PSEUDONYM.fullmatch(pseudonym)
    assert copies[0].response.text == f"event: endpoint\r\ndata: /messages/?session_id={pseudonym}\r\n\r\n"


# ---------------------------------------------------------------- files: redact, and the analysis


def capture(tmp_path: Path) -> Path:
    """A 401 answered with new credentials, a write run twice (a 500, which may have run it, then a result), a
    retry after a 503, secrets in every place."""
    refused = exchange(
        rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c"}}),
        status=401,
        body=b"unauthorized",
        content_type="text/plain",
        request_headers={"authorization": f"Bearer {OTHER_TOKEN}"},
        at=1.0,
    )
    accepted = exchange(
        rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c"}}),
        body=result(1, {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s"}}),
        request_headers={"authorization": f"Bearer {TOKEN}"},
        response_headers={"mcp-session-id": SESSION},
        at=2.0,
    )
    headers = {"authorization": f"Bearer {TOKEN}", "mcp-session-id": SESSION, "x-api-key": API_KEY}
    write_call = rpc(2, "tools/call", {"name": "write_record", "arguments": {"key": "k", "password": PASSWORD}})
    again = rpc(3, "tools/call", {"name": "write_record", "arguments": {"key": "k", "password": PASSWORD}})
    failing = rpc(4, "tools/call", {"name": "fetch", "arguments": {"access_token": ACCESS}})
    retried = rpc(5, "tools/call", {"name": "fetch", "arguments": {"access_token": ACCESS}})
    return write(
        tmp_path,
        refused,
        accepted,
        exchange(write_call, status=500, body=b"boom", content_type="text/plain", request_headers=headers, at=3.0),
        exchange(again, body=result(3, text_result("ok")), request_headers=headers, at=4.0),
        exchange(failing, status=503, body=b"down", content_type="text/plain", request_headers=headers, at=5.0),
        exchange(retried, body=error(5, -32000, f"refused access_token={ACCESS}"), request_headers=headers, at=6.0),
    )


CALL_FIELDS = ("call_id", "jsonrpc_id", "outcome", "flags", "retry_group", "attempt", "retry_origin",
               "retry_confidence", "method", "tool", "http_status", "error_code")  # fmt: skip
GROUP_FIELDS = ("retry_group", "origin", "confidence", "members", "attempts", "final_outcome", "safety")


def verdicts(path: Path) -> dict[str, Any]:
    out = io.StringIO()
    write_json(analyze([path]), out, redact=False)
    document = json.loads(out.getvalue())
    return {
        "calls": [{k: c[k] for k in CALL_FIELDS} for c in document["calls"]],
        "retry_groups": [{k: g[k] for k in GROUP_FIELDS} for g in document["retry_groups"]],
        # Not the arguments' digest: the arguments hold pseudonyms now (equal where they were equal).
        "duplicate_executions": [
            {k: v for k, v in d.items() if k != "arguments_digest"} for d in document["duplicate_executions"]
        ],
    }


def test_redact_writes_a_flow_file_whose_analysis_is_the_originals(tmp_path: Path) -> None:
    original = capture(tmp_path)
    out = tmp_path / "shared.flows"
    assert main(["redact", str(original), "-o", str(out)]) == 0
    data = out.read_bytes()
    for secret in SECRETS:
        assert secret.encode() not in data, secret
    flows = read(out)
    assert [f.id for f in flows] == [f.id for f in read(original)]
    first, second = (f.request.headers["authorization"] for f in flows[:2])
    assert first != second, "credentials changed after the 401: still two different pseudonyms"
    theirs, ours = verdicts(original), verdicts(out)
    assert ours == theirs
    assert {g["origin"] for g in ours["retry_groups"]} >= {"auth-retry"}
    assert ours["duplicate_executions"], "the write run twice is still found"


def test_redacting_twice_changes_nothing_more(tmp_path: Path) -> None:
    once, twice = tmp_path / "once.flows", tmp_path / "twice.flows"
    assert main(["redact", str(capture(tmp_path)), "-o", str(once)]) == 0
    assert main(["redact", str(once), "-o", str(twice)]) == 0
    assert [f.get_state() for f in read(once)] == [f.get_state() for f in read(twice)]


def test_redact_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    original = capture(tmp_path)
    before = original.read_bytes()
    assert main(["redact", str(original), "-o", str(original)]) == 2
    assert original.read_bytes() == before


def test_a_truncated_capture_is_redacted_as_far_as_it_reads_and_exit_2(tmp_path: Path) -> None:
    original = capture(tmp_path)
    cut = tmp_path / "cut.flows"
    cut.write_bytes(original.read_bytes()[:-40])
    out = tmp_path / "out.flows"
    assert main(["redact", str(cut), "-o", str(out)]) == 2
    assert len(read(out)) == len(read(original)) - 1
    assert TOKEN.encode() not in out.read_bytes()


def test_flows_that_are_not_http_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "mixed.flows"
    with path.open("wb") as f:
        writer = flow_io.FlowWriter(f)
        writer.add(tflow.ttcpflow())
        writer.add(exchange(tool_call(1), body=result(1, {}), request_headers={"authorization": f"Bearer {TOKEN}"}))
    out = io.BytesIO()
    done = redact_files([path], out)
    assert (done.flows_written, done.not_http) == (1, 1)
    assert TOKEN.encode() not in out.getvalue()


# ---------------------------------------------------------------- mcp_redact: -w writes the redacted copy


def test_mcp_redact_writes_the_copy_through_saves_writer_and_leaves_the_live_flow(tmp_path: Path) -> None:
    from mcp_blackbox.addon.mcp_recorder import McpRecorder

    save, recorder = Save(), McpRecorder()
    target = tmp_path / "rec.flows"
    with taddons.context(save, recorder) as tctx:
        tctx.configure(save, save_stream_file=str(target))
        tctx.configure(recorder, mcp_redact=True, mcp_console=False)
        live = planted_flow()
        before = live.get_state()
        save.response(live)  # what -w does when the response hook runs (before a plain answer is sent)
        assert live.get_state() == before, "the live flow (what the client gets) is not changed"
        tctx.configure(save, save_stream_file=str(tmp_path / "rotated-%Y.flows"))  # a new file, a new writer
        save.response(planted_flow())
        save.done()
    for path in (target, *tmp_path.glob("rotated-*.flows")):
        data = path.read_bytes()
        assert data, path
        assert not any(s.encode() in data for s in (TOKEN, API_KEY, PASSWORD, ACCESS, SESSION)), path
    names = pseudonyms_in(target.read_bytes().decode("utf-8", "replace"))
    assert names and names <= pseudonyms_in(next(tmp_path.glob("rotated-*.flows")).read_text("utf-8", "replace"))


def test_mcp_redact_refuses_a_har_dump_it_would_not_redact() -> None:
    from mitmproxy import exceptions
    from mitmproxy.addons.savehar import SaveHar

    from mcp_blackbox.addon.mcp_recorder import McpRecorder

    recorder = McpRecorder()
    with (
        taddons.context(Save(), SaveHar(), recorder) as tctx,
        pytest.raises(exceptions.OptionsError, match=re.escape("hardump")),
    ):
        tctx.configure(recorder, hardump="out.har", mcp_redact=True)


def test_mcp_redact_covers_the_addons_own_writer(tmp_path: Path) -> None:
    """``mcp_write`` (addon/rotation.py, what ``mcp-blackbox record -w`` uses) writes the redacted copy too."""
    from mcp_blackbox.addon.mcp_recorder import McpRecorder
    from mcp_blackbox.addon.rotation import CaptureWriter

    recorder, writer = McpRecorder(), CaptureWriter()
    target = tmp_path / "rec.flows"
    with taddons.context(recorder, writer) as tctx:
        tctx.configure(recorder, mcp_redact=True, mcp_console=False)
        tctx.configure(writer, mcp_write=str(target))
        writer.running()
        live = planted_flow()
        before = live.get_state()
        writer.request(live)
        writer.response(live)
        assert live.get_state() == before
        writer.done()
    (flow,) = read(target)
    assert flow.id == live.id
    data = target.read_bytes()
    assert not any(s.encode() in data for s in (TOKEN, API_KEY, PASSWORD, ACCESS, SESSION, SK))


SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_captures").glob("*.flows"))


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_every_sample_capture_redacted_keeps_its_analysis(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "shared.flows"
    assert main(["redact", str(sample), "-o", str(out)]) == 0
    assert verdicts(out) == verdicts(sample)
    sessions = {f.request.headers.get("mcp-session-id") for f in read(sample)} - {None}
    assert not any(s.encode() in out.read_bytes() for s in sessions if s)
