"""The properties the fuzz tests check, as plain functions: the tests and long_fuzz.py both call them.

Each takes what a strategy drew and raises AssertionError (or the analyzer's own exception) on failure.
"""

from __future__ import annotations

import contextlib
import csv
import html.parser
import io
import json
import logging
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from mitmproxy import flow as mflow
from mitmproxy import http
from mitmproxy import io as flow_io
from mitmproxy.test import taddons

from mcp_blackbox.addon.mcp_recorder import METADATA_KEY, McpRecorder, is_event_stream, stream_end_reason
from mcp_blackbox.addon.stream_tap import TAIL_LIMIT
from mcp_blackbox.analyzer.model.vocabulary import Outcome
from mcp_blackbox.analyzer.outputs.analysis import Analysis, analyze
from mcp_blackbox.analyzer.outputs.export import write_csv, write_json
from mcp_blackbox.analyzer.read.extract import extract_messages
from mcp_blackbox.analyzer.read.load import LoadReport, read_exchanges
from mcp_blackbox.analyzer.review.report import build_report, render_report, script_json, write_report
from mcp_blackbox.cli import main as cli
from tests.fuzz import strategies
from tests.fuzz.strategies import describe_flow

REPORT_JS = (Path(__file__).resolve().parents[2] / "templates" / "report.js").read_text(encoding="utf-8")

PAYLOAD_OPEN = '<script type="application/json" id="report-data">'

# ---------------------------------------------------------------- the analyzer


@contextlib.contextmanager
def capture_file(data: bytes, name: str = "capture.flows") -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        yield path


def check_analysis(paths: list[Path]) -> Analysis:
    """analyze() returns; every flow is analyzed or skipped; every call has a known outcome and evidence;
    the exports, the summary, the check lines and the report are all produced and readable."""
    analysis = analyze(paths)
    assert analysis.flows_read == analysis.analyzed + len(analysis.skipped), (
        analysis.flows_read,
        analysis.analyzed,
        analysis.skipped,
    )
    for skipped in analysis.skipped:
        assert isinstance(skipped["reason"], str) and skipped["reason"], skipped
    for problem in analysis.read_problems:
        assert isinstance(problem["reason"], str) and problem["reason"], problem
    for call in analysis.calls:
        assert call["outcome"] in tuple(Outcome), call
        assert call["layer"] == Outcome(call["outcome"]).layer, call
        assert call["evidence"] and all(isinstance(line, str) and line for line in call["evidence"]), call
    with tempfile.TemporaryDirectory(prefix="fuzz-out-") as tmp:
        out = Path(tmp)
        for redact in (True, False):
            # Written as `mcp-blackbox export -o FILE` writes them.
            with open(out / "calls.json", "w", encoding="utf-8") as f:
                write_json(analysis, f, redact=redact)
            exported = strict_json((out / "calls.json").read_text(encoding="utf-8"))
            assert len(exported["calls"]) == len(analysis.calls)
            assert len(exported["skipped"]) == len(analysis.skipped)
            with open(out / "calls.csv", "w", newline="", encoding="utf-8") as f:
                write_csv(analysis, f, redact=redact)
            with open(out / "calls.csv", newline="", encoding="utf-8") as f:
                # A field may be as long as what a client sent (a 200 kB method name): valid CSV all the same,
                # past the csv module's default limit of 128 kB per field (pandas has none).
                csv.field_size_limit(2**31 - 1)
                rows = list(csv.DictReader(f))
            assert len(rows) == len(analysis.calls)
        write_report(paths, out / "report.html", analysis=analysis)
        page = (out / "report.html").read_text(encoding="utf-8")
        start = page.index(PAYLOAD_OPEN) + len(PAYLOAD_OPEN)
        strict_json(page[start : page.index("</script>", start)])  # what the page's JSON.parse reads
        # What `summary`, `summary --format markdown` and `check` print, onto a strict UTF-8 stdout. summary
        # gives up (2) only when nothing could be read; check, a gate, whenever a capture was not read whole.
        nothing_read = analysis.flows_read == 0 and bool(analysis.read_problems)
        for command, gives_up in (
            (["summary"], nothing_read),
            (["summary", "--format", "markdown"], nothing_read),
            (["check"], bool(analysis.read_problems)),
        ):
            code, _ = run_cli([*command, *map(str, paths)])
            assert code in (0, 1, 2) and (code == 2) == gives_up, (command, code)
    return analysis


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def strict_json(text: str) -> Any:
    """JSON as a browser's JSON.parse and other strict readers take it: no NaN, no Infinity."""
    return json.loads(text, parse_constant=_not_json)


def run_cli(argv: list[str]) -> tuple[int, str]:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # strict, like a UTF-8 terminal's
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(argv)
    out.flush()
    return code, out.buffer.getvalue().decode("utf-8")


def check_reading(data: bytes) -> int:
    """The loader and the extractor alone, over raw bytes: nothing raises, the counts add up."""
    with capture_file(data) as path:
        report = LoadReport()
        exchanges = 0
        for exchange in read_exchanges([path], report, keep_all=True):
            exchanges += 1
            extract_messages(exchange, whole=True)
            extract_messages(exchange)
        assert report.flows_read == exchanges + len(report.skipped)
        return exchanges


def check_flows(flows: Iterable[mflow.Flow]) -> Analysis:
    """A capture written by mitmproxy's own writer."""
    buffer = io.BytesIO()
    writer = flow_io.FlowWriter(buffer)
    for f in flows:
        writer.add(f)
    with capture_file(buffer.getvalue()) as path:
        analysis = check_analysis([path])
        assert analysis.flows_read == len(list(flows)), (analysis.flows_read, analysis.read_problems)
        return analysis


def check_event_streams(flows: Iterable[mflow.Flow], body: bytes) -> Analysis:
    """Every response an event stream with the same random framing."""
    for f in flows:
        if isinstance(f, http.HTTPFlow) and f.response is not None:
            f.response.headers["content-type"] = "text/event-stream"
            f.response.raw_content = body
    return check_flows(flows)


def check_bytes(data: bytes) -> Analysis:
    with capture_file(data) as path:
        check_reading(data)
        return check_analysis([path])


# ---------------------------------------------------------------- the addon


@dataclass
class StreamPlan:
    """One exchange through the recorder: what the server sends and how the exchange ends."""

    flow: http.HTTPFlow
    chunks: list[bytes]
    upstream: str | None  # a stream callable another addon set first: None, "same", "split", "raise"
    end: str  # "response", "error" or "done"
    error: str = ""

    def __repr__(self) -> str:  # what a failing example needs to be replayed, not mitmproxy's one-line summary
        return f"StreamPlan({describe_flow(self.flow)}, chunks={self.chunks!r}, upstream={self.upstream!r}, " + (
            f"end={self.end!r}, error={self.error!r})"
        )


@dataclass
class HookRun:
    plans: list[StreamPlan]
    max_body: str = "64m"
    console: bool = False
    filter: str | None = None
    logged: list[logging.LogRecord] = field(default_factory=list)


class _Collect(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


def _upstream(kind: str | None) -> Any:
    if kind == "same":
        return lambda chunk: chunk
    if kind == "split":
        return lambda chunk: [chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]]
    if kind == "raise":

        def broken(chunk: bytes) -> bytes:
            raise RuntimeError("an addon before us failed")

        return broken
    return None


def _expected_forward(kind: str | None, chunk: bytes) -> list[bytes]:
    if kind == "split":
        return [chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]]
    return [chunk]


def _flat(out: bytes | list[bytes]) -> list[bytes]:
    return [out] if isinstance(out, bytes) else list(out)


def roundtrip(f: http.HTTPFlow) -> http.HTTPFlow:
    buffer = io.BytesIO()
    flow_io.FlowWriter(buffer).add(f)
    buffer.seek(0)
    (read,) = list(flow_io.FlowReader(buffer).stream())
    return read


def check_hooks(run: HookRun) -> None:
    """The hooks neither raise nor log a swallowed exception; streams pass through byte for byte; the
    body is restored up to the bound; the metadata survives mitmproxy's writer and reader."""
    logger = logging.getLogger("mcp_blackbox")
    handler = _Collect(run.logged)
    logger.addHandler(handler)
    recorder = McpRecorder()
    tctx = taddons.context(recorder)
    try:
        with tctx, contextlib.redirect_stdout(io.StringIO()):
            tctx.configure(recorder, mcp_console=run.console, mcp_stream_max_body=run.max_body, mcp_filter=run.filter)
            bound = recorder.max_body
            streamed: dict[str, bytes] = {}
            for plan in run.plans:
                f = plan.flow
                if f.response is not None and is_event_stream(f.response):
                    if plan.upstream is not None:
                        f.response.stream = _upstream(plan.upstream)
                    recorder.responseheaders(f)
                    tap = f.response.stream
                    assert callable(tap), "an event stream gets the stream callable"
                    given = b""
                    for chunk in [*plan.chunks, b""]:
                        out = tap(chunk)
                        if plan.upstream in (None, "raise"):
                            assert out is chunk, "the chunk is forwarded as it came"
                        else:
                            assert _flat(out) == _expected_forward(plan.upstream, chunk)
                        given += b"".join(_flat(out))
                    assert given == b"".join(plan.chunks), "the client gets every byte, in order"
                    streamed[f.id] = given
                else:
                    recorder.responseheaders(f)
                    assert f.response is None or not callable(f.response.stream)
                if plan.end == "response" and f.response is not None:
                    recorder.response(f)
                elif plan.end in ("error", "response"):
                    f.error = mflow.Error(plan.error or "peer closed connection")
                    recorder.error(f)
            recorder.done()
            assert recorder.open_streams == {}
            for plan in run.plans:
                _check_recorded(plan, streamed.get(plan.flow.id), bound)
    finally:
        logger.removeHandler(handler)
        # Each test context installs mitmproxy's log handler on the root logger, bound to its (now closed)
        # event loop: take it off again, or thousands of examples leave thousands of them behind.
        tctx.master._legacy_log_events.uninstall()
    swallowed = [r for r in run.logged if r.levelno >= logging.WARNING]
    assert not swallowed, "\n".join(r.getMessage() + "\n" + str(r.exc_text or r.exc_info) for r in swallowed)


def _check_recorded(plan: StreamPlan, sent: bytes | None, bound: int | None) -> None:
    f = plan.flow
    saved = roundtrip(f)
    assert saved.metadata == f.metadata, (saved.metadata, f.metadata)
    if sent is None:
        return
    assert f.response is not None and saved.response is not None
    kept = f.response.raw_content or b""
    assert saved.response.raw_content == kept
    if bound is None:
        assert kept == sent
    else:
        # Past the bound: a head of at most `bound` bytes and a tail of at most TAIL_LIMIT (never more than
        # the bound) of the stream's last bytes, nothing else, nothing reordered (addon/stream_tap.py).
        gap = f.metadata[METADATA_KEY]["stream"]["dropped_range"]
        if gap is None:  # all of it, or (no event boundary in the tail, an encoded body) its head alone
            assert kept == sent or (kept == sent[: len(kept)] and len(kept) <= bound), (kept, sent, bound)
        else:
            start, end = gap
            assert kept == sent[:start] + sent[end:], (gap, kept, sent)
            assert start <= bound and len(sent) - end <= min(bound, TAIL_LIMIT), (gap, bound)
    stream = f.metadata[METADATA_KEY]["stream"]
    assert stream["bytes"] == len(sent)
    assert stream["stored_bytes"] == len(kept) and stream["dropped_bytes"] == len(sent) - len(kept)
    assert sum(size for _, size in stream["chunks"]) == len(sent)
    expected_end = {
        "response": "complete",
        "error": stream_end_reason(plan.error or "peer closed connection"),
        "done": "proxy-shutdown",
    }[plan.end]
    assert stream["ended"] == expected_end, (stream["ended"], plan.end)
    if stream["event_times"] is not None:
        assert all(t is None or isinstance(t, float) for t in stream["event_times"])


# ---------------------------------------------------------------- the report: escaping


@dataclass
class Captured:
    """Random strings, each placed in one captured field that the report shows."""

    rpc_method: str
    tool: str
    rpc_id: str
    header_name: str
    header_value: str
    response_header_name: str
    response_header_value: str
    path: str
    query_key: str
    query_value: str
    request_text: str
    result_text: str
    sse_data: str
    sse_text: str
    error_message: str
    flow_error: str
    user_agent: str
    client_name: str
    server_name: str
    version: str
    file_name: str

    def fields(self) -> dict[str, str]:
        return dict(vars(self))


def _file_name(text: str) -> str:
    """The text as a file name Linux takes: no "/" or NUL, at most 200 bytes, not "." or ".."."""
    name = text.replace("/", "_").replace("\x00", "_").encode("utf-8")[:200].decode("utf-8", "ignore")
    return name if name not in ("", ".", "..") else "capture"


def _line(text: str) -> str:
    """One SSE line: its line ends would frame other fields or events."""
    return text.replace("\r", " ").replace("\n", " ")


def captured_capture(c: Captured, directory: Path) -> Path:
    """Five exchanges that carry every string: initialize, a tools/call, an error, an SSE stream, a lost call."""
    from urllib.parse import urlencode

    from tests.analyzer.flows import error, exchange, result, text_result, tool_call, write

    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": c.version, "clientInfo": {"name": c.client_name, "version": "1"}},
    }
    first = exchange(
        initialize,
        body=result(0, {"protocolVersion": c.version, "serverInfo": {"name": c.server_name, "version": "1"}}),
    )
    first.request.headers.add(c.header_name or "x", c.header_value)
    first.request.headers.add("user-agent", c.user_agent)
    first.response.headers.add(c.response_header_name or "x", c.response_header_value)
    call = tool_call(c.rpc_id, c.tool)
    call["params"]["arguments"] = {"note": c.request_text}
    second = exchange(call, body=result(c.rpc_id, text_result(c.result_text)))
    second.request.path = "/" + c.path.replace("?", "") + "?" + urlencode({c.query_key: c.query_value})
    third = exchange({"jsonrpc": "2.0", "id": 3, "method": c.rpc_method}, body=error(3, -32000, c.error_message))
    events = f"data: {_line(c.sse_data)}\n\n" + "data: " + json.dumps(result(4, text_result(c.sse_text))) + "\n\n"
    fourth = exchange(tool_call(4, "stream"), body=events.encode(), content_type="text/event-stream")
    fifth = exchange(tool_call(5, "lost"), status=None, error_message=c.flow_error)
    return write(directory, first, second, third, fourth, fifth, name=_file_name(c.file_name))


def expected_forms(field: str, text: str) -> set[str]:
    """How a captured string may legitimately appear once decoded: as itself, or as the JSON, URL or
    header-name form the analyzer shows it in (a body is shown as pretty JSON, a query re-encoded)."""
    from urllib.parse import quote_plus

    forms = {text, json.dumps(text, ensure_ascii=False)[1:-1]}
    if field in ("header_name", "response_header_name"):
        forms.add(text.lower())
    if field in ("query_key", "query_value"):
        forms.add(quote_plus(text))
    if field == "sse_data":
        forms.add(_line(text))
    if field == "path":
        forms |= expected_forms("", text.replace("?", ""))  # a "?" would start the query
    if field == "file_name":
        forms.add(_file_name(text))
    return forms


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class _Markup(html.parser.HTMLParser):
    """Every element, attribute, comment and declaration of a page, and the text of its scripts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.elements: list[tuple[str, tuple[tuple[str, str | None], ...]]] = []
        self.comments: list[str] = []
        self.declarations: list[str] = []
        self.scripts: list[str] = []
        self.raw_text: list[str] = []  # text outside <script> and <style>, character references not resolved
        self.inside: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, tuple(attrs)))
        if tag in ("script", "style"):
            self.inside.append(tag)
            if tag == "script":
                self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if self.inside and self.inside[-1] == tag:
            self.inside.pop()

    def handle_data(self, data: str) -> None:
        if self.inside and self.inside[-1] == "script":
            self.scripts[-1] += data
        elif not self.inside:
            self.raw_text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_decl(self, decl: str) -> None:
        self.declarations.append(decl)

    def unknown_decl(self, data: str) -> None:
        self.declarations.append(data)

    def handle_pi(self, data: str) -> None:
        self.declarations.append(data)


def markup(page: str) -> _Markup:
    parser = _Markup()
    parser.feed(page)
    parser.close()
    return parser


def _shape(elements: list[tuple[str, tuple[tuple[str, str | None], ...]]]) -> set[tuple[str, tuple]]:
    """Elements by tag and attributes; the numbers in the time range's data attributes do not count."""
    return {
        (tag, tuple((name, "N" if name in ("data-start", "data-end") else value) for name, value in attrs))
        for tag, attrs in elements
    }


_TEMPLATE_SHAPE: set[tuple[str, tuple]] | None = None


def template_shape() -> set[tuple[str, tuple]]:
    """The elements the report's template makes, from a report of plain content."""
    global _TEMPLATE_SHAPE
    if _TEMPLATE_SHAPE is None:
        plain = Captured(**{name: "plain" for name in Captured.__dataclass_fields__})
        with tempfile.TemporaryDirectory(prefix="fuzz-plain-") as tmp:
            page = render_report(build_report([captured_capture(plain, Path(tmp))], redact=False))
        _TEMPLATE_SHAPE = _shape(markup(page).elements)
    return _TEMPLATE_SHAPE


def check_escaping(c: Captured) -> str:
    """Every captured string reaches the page's data, and none of it makes an element, an attribute, a
    comment or a script: the page parses into the template's own structure."""
    with tempfile.TemporaryDirectory(prefix="fuzz-report-") as tmp:
        capture = captured_capture(c, Path(tmp))
        data = build_report([capture], redact=False)
        page = render_report(data)
    parsed = markup(page)
    assert parsed.declarations == ["doctype html"] and parsed.comments == [], (parsed.declarations, parsed.comments)
    assert [tag for tag, _ in parsed.elements].count("script") == 2, "the data and the code, nothing else"
    assert _shape(parsed.elements) <= template_shape(), _shape(parsed.elements) - template_shape()
    # Outside the scripts, captured text is escaped: no markup character is left raw in it.
    for text in parsed.raw_text:
        assert "<" not in text and ">" not in text, text
    start = page.index(PAYLOAD_OPEN) + len(PAYLOAD_OPEN)
    payload = page[start : page.index("</script>", start)]
    assert parsed.scripts[0] == payload
    assert parsed.scripts[1].strip() == REPORT_JS.strip(), "the page's code is the template's, unchanged"
    for character in "<>&\u2028\u2029":
        assert character not in payload, character
    decoded = json.loads(payload)
    assert decoded == json.loads(json.dumps(data, default=str)), "the payload is the report's data"
    shown = "\x01".join(_strings(decoded))
    for field_name, text in c.fields().items():
        assert any(form in shown for form in expected_forms(field_name, text)), (field_name, text)
    return page


def not_shown(c: Captured, text: str) -> list[str]:
    """The fields whose captured string the page's text does not show."""
    return [name for name, value in c.fields().items() if not any(form in text for form in expected_forms(name, value))]


# ---------------------------------------------------------------- the report and the exports: redaction


@dataclass
class Secrets:
    """Secret values in every place the redaction promises to cover, and how the tool's answer carries them."""

    authorization: str
    cookie: str
    api_key_header: str
    api_key_query: str
    token_query: str
    password: str
    access_token: str
    client_secret: str
    padding: int  # characters of the tool's JSON text before the secret: past 100 the analyzer cuts into it
    reads_like_error: bool  # the text has an "error" member: quoted in the evidence as a soft error
    is_error: bool  # isError: true, so the cut text becomes the call's error_message
    stream: bool  # the answer comes as an SSE event, not a JSON body

    def values(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if isinstance(v, str)}


def secret_capture(s: Secrets, directory: Path) -> Path:
    from urllib.parse import urlencode

    from tests.analyzer.flows import exchange, result, tool_call, write

    call = tool_call(1, "login")
    call["params"]["arguments"] = {"user": "ada", "password": s.password}
    answer = {"note": "n" * s.padding, "client_secret": s.client_secret}
    if s.reads_like_error:
        answer["error"] = "denied"
    tool_result = {
        "content": [{"type": "text", "text": json.dumps(answer)}],
        "structuredContent": {"access_token": s.access_token},
        "isError": s.is_error,
    }
    body: Any = result(1, tool_result)
    if s.stream:
        body = ("data: " + json.dumps(body) + "\n\n").encode()
    f = exchange(call, body=body, content_type="text/event-stream" if s.stream else "application/json")
    f.request.path = "/mcp?" + urlencode({"api_key": s.api_key_query, "token": s.token_query, "page": "1"})
    f.request.headers.add("authorization", f"Bearer {s.authorization}")
    f.request.headers.add("cookie", f"session={s.cookie}")
    f.request.headers.add("x-api-key", s.api_key_header)
    return write(directory, f)


def leak_forms(secret: str) -> set[str]:
    """The ways a secret could be written into a page or an export: as itself, JSON-, HTML- or URL-escaped."""
    import html as html_module
    from urllib.parse import quote, quote_plus

    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        script_json(secret)[1:-1],
        html_module.escape(secret),
        html_module.escape(secret, quote=False),
        quote(secret, safe=""),
        quote_plus(secret),
        secret.replace('"', '""'),  # a CSV cell
        repr(secret)[1:-1],
    }
    return {form for form in forms if form}


MARKER = re.compile(r"\[redacted \d+ chars\]")


def redacted_outputs(s: Secrets) -> list[str]:
    """The report and the JSON and CSV exports of the secrets' capture, redacted, markers taken out."""
    with tempfile.TemporaryDirectory(prefix="fuzz-secrets-") as tmp:
        capture = secret_capture(s, Path(tmp))
        data = build_report([capture])
        data["meta"]["generated"] = ""  # a clock in the page is no secret, and changes between two renderings
        analysis = analyze([capture])
        as_json, as_csv = io.StringIO(), io.StringIO()
        write_json(analysis, as_json, redact=True)
        write_csv(analysis, as_csv, redact=True)
    page = render_report(data)
    decoded = "\x01".join(
        _strings(json.loads(page[page.index(PAYLOAD_OPEN) + len(PAYLOAD_OPEN) :].split("</script>")[0]))
    )
    exported = "\x01".join(_strings(json.loads(as_json.getvalue())))
    cells = "\x01".join(cell for row in csv.reader(io.StringIO(as_csv.getvalue())) for cell in row)
    return [MARKER.sub("", text) for text in (page, decoded, as_json.getvalue(), exported, as_csv.getvalue(), cells)]


def secrets_found(s: Secrets) -> list[tuple[str, str]]:
    """The secrets (name, form) that reach the report or an export; [] when redaction holds.

    A secret that a rendering of the same capture without it shows too (a secret "    " is in any page's
    indentation) cannot be told from the page's own text: such examples are rejected with ``assume``.
    """
    from hypothesis import assume

    plain = Secrets(**{k: ("\u2603" * len(v) if isinstance(v, str) else v) for k, v in vars(s).items()})
    baseline = "\x02".join(redacted_outputs(plain))
    for value in s.values().values():
        assume(not any(form in baseline for form in leak_forms(value)))
    outputs = redacted_outputs(s)
    return [
        (name, form)
        for name, value in s.values().items()
        for form in leak_forms(value)
        if any(form in text for text in outputs)
    ]


def check_secrets(s: Secrets) -> None:
    assert secrets_found(s) == []


# ---------------------------------------------------------------- strategies of the report's inputs

captured = st.builds(Captured, **{name: strategies.captured_text for name in Captured.__dataclass_fields__})

# A secret of one to three characters is not drawn: so short a string occurs in any page or export for
# reasons of its own ("a", "20", "to", JSON punctuation, the page's code), so a leak could not be told
# from a coincidence; and the redaction of key=value pairs in free text asks for four characters too.
secret_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=4, max_size=24)
secrets = st.builds(
    Secrets,
    **{name: secret_text for name in Secrets.__dataclass_fields__ if Secrets.__dataclass_fields__[name].type == "str"},
    padding=st.sampled_from([0, 5, 60, 75, 90, 200]),
    reads_like_error=st.booleans(),
    is_error=st.booleans(),
    stream=st.booleans(),
)
