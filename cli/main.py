"""The ``mcp-blackbox`` command line."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mcp_blackbox.analyzer.model.vocabulary import NOT_FAILURES
from mcp_blackbox.analyzer.outputs.analysis import DEFAULT_WINDOW, Analysis, CallStream, analyze
from mcp_blackbox.analyzer.outputs.export import write_csv, write_json
from mcp_blackbox.analyzer.read import progress
from mcp_blackbox.analyzer.read.collector import fewer_collections
from mcp_blackbox.analyzer.read.load import LoadReport
from mcp_blackbox.analyzer.read.time_range import RangeError, TimeRange, range_lines, resolve
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.review.check import DEFAULT_FAIL_ON, Allowance, parse_allow, parse_fail_on
from mcp_blackbox.analyzer.review.said import ran_twice_counts
from mcp_blackbox.analyzer.review.summary_text import summary_text
from mcp_blackbox.analyzer.version import NOT_INSTALLED, installed_version
from mcp_blackbox.analyzer.wire.inputs import expand_captures, recording_of
from mcp_blackbox.analyzer.wire.stdio_capture import is_stdio_capture
from mcp_blackbox.cli import run_command
from mcp_blackbox.cli.environment import addon_path, mitmdump_executable
from mcp_blackbox.cli.options import recording_options
from mcp_blackbox.cli.output_files import CANNOT_WRITE, STDOUT, Output, recording_refused, refused

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.redaction.sanitize import RedactResult

NOTHING_READ = 2  # the exit status when no capture could be read: the output would say nothing true


def record_command(args: argparse.Namespace) -> list[str]:
    """The mitmdump command line that ``record`` runs."""
    command = [
        mitmdump_executable(),
        "--scripts",
        str(addon_path()),
        "--mode",
        f"reverse:{args.upstream}",
        "--listen-host",
        args.listen_host,
        "--listen-port",
        str(args.port),
        # The addon's writer, not -w: owner-only files, each flow written whole as it ends, size rotation.
        "--set",
        f"mcp_write={args.write}",
    ]
    if args.rotate_size:
        command += ["--set", f"mcp_rotate_size={args.rotate_size}"]
    if args.keep:
        command += ["--set", f"mcp_keep={args.keep}"]
    if args.redact:
        command += ["--set", "mcp_redact=true"]
    if not any("connection_strategy" in arg for arg in args.mitmdump_args):
        # Connect upstream only once a request has come: a dead upstream is then a recorded flow with
        # its error (NO_RESPONSE, "Connect call failed"), where the default (eager) drops the client first.
        command += ["--set", "connection_strategy=lazy"]
    if args.listen_file:
        command += ["--set", f"mcp_listen_file={args.listen_file}"]
    if args.filter:
        command += ["--set", f"mcp_filter={args.filter}"]
    if args.quiet:
        command.append("--quiet")
    return command + list(args.mitmdump_args)


def port_in_use(host: str, port: int) -> bool:
    """Whether the proxy could not listen on host:port, tried as mitmproxy listens (SO_REUSEADDR)."""
    import socket

    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return False  # mitmdump says what is wrong with the host
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    return True
    return False


def run_record(args: argparse.Namespace) -> int:
    if args.stdio:
        return run_record_stdio(args)
    if not args.upstream:
        args.record_parser.error("--upstream is required (or --stdio, to record a stdio server)")
    command = record_command(args)
    if args.dry_run:
        print(" ".join(command))
        return 0
    # Said here, before mitmdump starts: it would print a traceback, and it writes the listen file itself.
    if recording_refused("record", args.write, rotating=bool(args.rotate_size or args.keep)):
        return CANNOT_WRITE
    if refused("record", args.listen_file):
        return CANNOT_WRITE
    if args.port and port_in_use(args.listen_host, args.port):
        # Said here, in the words of this command's options; nothing has been written yet.
        print(
            f"mcp-blackbox record: port {args.port} is in use: choose another with -p, or -p 0 for any free port",
            file=sys.stderr,
        )
        return 1
    sys.stdout.flush()
    # Become mitmdump: signals (Ctrl-C, SIGTERM) reach it directly and it writes the file on exit.
    os.execv(command[0], command)
    return 1  # not reached


def run_record_stdio(args: argparse.Namespace) -> int:
    """``record --stdio``: this process stands between the client and the server's stdio; no mitmdump."""
    options = {"--upstream": args.upstream, "--rotate-size": args.rotate_size, "--keep": args.keep}
    options |= {"--listen-file": args.listen_file, "--filter": args.filter, "--redact": args.redact}
    options |= {"--dry-run": args.dry_run}
    unused = [name for name, value in options.items() if value]
    if unused:
        args.record_parser.error(f"{', '.join(unused)}: not with --stdio")
    if not args.mitmdump_args:
        args.record_parser.error("--stdio needs the server's command after --: record --stdio -w FILE -- COMMAND ...")
    if recording_refused("record", args.write):  # as for HTTP: exit 2 and the one line, the server not started
        return CANNOT_WRITE
    # Imported here: the analysis commands never need it, and the wrapper must start quickly.
    from mcp_blackbox.addon import stdio_recorder

    return stdio_recorder.run(
        args.mitmdump_args, args.write, recorder=f"mcp-blackbox {installed_version() or NOT_INSTALLED}"
    )


def load_or_explain(paths: list[str], time_range: TimeRange | None = None) -> Analysis | None:
    """Analyze the captures (the calls in ``time_range``); say on stderr what could not be read. None when
    nothing could."""
    report = LoadReport()
    paths = expand_captures(paths)  # a directory of rotated files, a quoted glob
    size = progress.wanted(paths)
    with contextlib.nullcontext() if size is None else progress.ProgressLine(report, size):
        analysis = analyze(paths, report=report, time_range=time_range)
    tell_what_was_read(analysis)
    if analysis.flows_read == 0 and analysis.read_problems:
        return None
    return analysis


def tell_what_was_read(analysis: Analysis | CallStream) -> None:
    """On stderr: what could not be read, how many flows were skipped, what the capture could not show."""
    for problem in analysis.read_problems:
        where = f" at byte {problem['offset']}" if problem.get("offset") is not None else ""
        after = f" after {problem['flows_read']} flow(s)" if problem.get("flows_read") else ""
        explain(f"mcp-blackbox: {problem['source']}:", f"{problem['reason']}{where}{after}")
    if analysis.skipped:
        explain(
            f"mcp-blackbox: {len(analysis.skipped)} of {analysis.flows_read} flow(s) skipped; "
            'the export\'s "skipped" list says why'
        )
    for note in analysis.notes:
        explain(f"mcp-blackbox: note: {note}")


def tell_range(analysis: Analysis | CallStream) -> None:
    """On stderr, with --since/--until: the range, the calls straddling its edges, the files not read (for
    the outputs that have no place of their own for it: CSV, OTLP, HAR, the report's line)."""
    for line in range_lines(analysis.time_range, analysis.range_record()):
        explain(f"mcp-blackbox: {line}")


def explain(head: str, body: str | None = None, width: int = 80) -> None:
    """A message on stderr in ``width`` columns; with a body, the head (a file) on a line of its own if need be.

    Words are never broken, so a path stays whole (and overflows only if it alone is too long).
    """

    def fill(text: str, indent: str = "") -> str:
        return textwrap.fill(
            text, width, initial_indent=indent, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )

    if body is None:
        print(fill(head), file=sys.stderr)
    elif len(f"{head} {body}") <= width:
        print(f"{head} {body}", file=sys.stderr)
    else:
        print(fill(head), file=sys.stderr)
        print(fill(body, "  "), file=sys.stderr)


def run_export(args: argparse.Namespace) -> int:
    """JSON and CSV (the default) streamed, each call written once final; OTLP and HAR from the whole analysis.
    2: the export cannot be made, or no capture could be read."""
    problem = _cannot_export(args)
    if problem is not None:
        print(f"mcp-blackbox export: {problem}", file=sys.stderr)
        return 2
    if args.format == "parquet":  # files, not a stream: -o FILE or -o DIR/, checked there
        return _export_parquet(args)
    if refused("export", args.output):
        return CANNOT_WRITE
    if args.format == "otlp" or args.otlp_endpoint or args.format == "har":
        analysis = load_or_explain(args.captures, args.time_range)
        if analysis is not None:
            tell_range(analysis)
        return 2 if analysis is None else _export_other(args, analysis)
    return _export_json_or_csv(args)


def _cannot_export(args: argparse.Namespace) -> str | None:
    """Why the export cannot be made at all: --otlp-endpoint with another format, or OTLP without the
    OpenTelemetry packages. None: it can."""
    if args.otlp_endpoint and args.format not in (None, "otlp"):
        return f"--otlp-endpoint sends OTLP; it does not go with --format {args.format}"
    from mcp_blackbox.analyzer.outputs.extras import ExtraMissing

    try:  # before reading the captures: say at once what to install
        if args.format == "otlp" or args.otlp_endpoint:
            from mcp_blackbox.analyzer.outputs.otlp import require_otlp

            require_otlp()
        if args.format == "parquet":
            from mcp_blackbox.analyzer.outputs.parquet_export import require_parquet

            require_parquet()
    except ExtraMissing as e:
        return str(e)
    return None


def _export_parquet(args: argparse.Namespace) -> int:
    """Parquet: one file per recording, each written as its stream goes (``--window`` per recording). ``-o FILE``
    for the captures of one recording, ``-o DIR/`` (or an existing directory, made if missing) for any number:
    DIR/<first capture's name>.parquet. 2: the files cannot be written, or no capture could be read."""
    from mcp_blackbox.analyzer.outputs.parquet_export import files_in, recordings

    groups = recordings(args.captures)
    target = args.output
    if target is None or target == STDOUT:
        print(
            "mcp-blackbox export: --format parquet writes files, one per recording: "
            "-o FILE.parquet (one recording) or -o DIR/ (any number)",
            file=sys.stderr,
        )
        return 2
    if target.endswith(("/", os.sep)) or os.path.isdir(target):
        try:
            os.makedirs(target, exist_ok=True)
        except OSError as e:
            print(f"mcp-blackbox export: cannot write {target}: {e.strerror or e}", file=sys.stderr)
            return CANNOT_WRITE
        files = files_in(target, groups)
    elif len(groups) > 1:
        print(
            f"mcp-blackbox export: the captures are {len(groups)} recordings and --format parquet writes one file "
            f"per recording: give -o a directory ({target}/)",
            file=sys.stderr,
        )
        return 2
    else:
        files = {target: args.captures}
    if refused("export", *files):
        return CANNOT_WRITE
    written = {path: _parquet_file(args, path, captures) for path, captures in files.items()}
    read = [calls for calls in written.values() if calls is not None]
    if read:
        where = next(iter(files)) if len(files) == 1 else f"{target} ({len(read)} file(s), one per recording)"
        print(f"mcp-blackbox export: {sum(read)} call(s) written to {where}", file=sys.stderr)
    return 0 if read else NOTHING_READ


def _parquet_file(args: argparse.Namespace, path: str, captures: list[str]) -> int | None:
    """One recording's Parquet file, put in place once written; the calls written, None: nothing could be read."""
    from mcp_blackbox.analyzer.outputs.parquet_export import write_parquet

    written: list[int] = []
    with Output(path, mode=_file_mode(args)) as output:
        assert isinstance(output.stream, io.TextIOWrapper)  # a file's: written through its bytes
        sink = output.stream.buffer

        def export(stream: CallStream) -> None:
            written.append(write_parquet(stream, sink, redact=not args.no_redact))

        if _streamed(captures, args.window, export, args.time_range) == NOTHING_READ:
            output.discard()  # the writer wrote its header before the captures were read: no empty file in place
            return None
    return sum(written)


def _file_mode(args: argparse.Namespace) -> int | None:
    """How an output file is created: 0600 when it keeps the capture's secrets (--no-redact), as the flow file."""
    return Redactor.of(not getattr(args, "no_redact", False)).file_mode


def _export_json_or_csv(args: argparse.Namespace) -> int:
    """JSON (the default) or CSV, to ``--output`` or to stdout (the default, or ``-``)."""
    args.format = args.format or "json"
    write = write_json if args.format == "json" else write_csv
    with Output(args.output, newline="" if args.format == "csv" else None, mode=_file_mode(args)) as output:
        status = _export_streaming(args, write, output.stream)
        if status == NOTHING_READ:
            output.discard()  # the header is written before the captures are read: no empty export in place
    return status


def _export_streaming(args: argparse.Namespace, write: Any, out: IO[str]) -> int:
    """JSON and CSV: each call written once final (analysis.CallStream), within ``--window`` seconds."""

    def export(stream: CallStream) -> None:
        write(stream, out, redact=not args.no_redact)
        if args.format == "csv":  # its columns are the contract's: the range is said beside it
            tell_range(stream)

    return _streamed(args.captures, args.window, export, args.time_range)


def _streamed(captures: list[str], window: float, consume: Any, time_range: TimeRange | None = None) -> int:
    """``consume`` a CallStream of the captures, with a progress line; then say on stderr what was read.

    A window reads one recording (a file, or a recorder's rotated files) in the order it was written;
    several recordings are not in one time order, so they are read whole, and so are the stdio captures of
    one recording (servers run side by side: their files overlap in time)."""
    report = LoadReport()
    paths = expand_captures(captures)
    in_order = len(paths) == 1 or not any(is_stdio_capture(path) for path in paths)
    one_recording = in_order and len({recording_of(path) for path in paths}) == 1
    stream = CallStream(paths, window=(window or None) if one_recording else None, report=report, time_range=time_range)
    size = progress.wanted(paths)
    with contextlib.nullcontext() if size is None else progress.ProgressLine(report, size):
        consume(stream)
    tell_what_was_read(stream)
    return 2 if stream.flows_read == 0 and stream.read_problems else 0


def _export_other(args: argparse.Namespace, analysis: Analysis) -> int:
    """OTLP (a file, a collector, or both) and HAR."""
    redact = not args.no_redact
    if args.format == "har":
        from mcp_blackbox.analyzer.outputs.har_export import write_har

        with Output(args.output, mode=_file_mode(args)) as output:
            write_har(analysis, output.stream, redact=redact)
        return 0
    from mcp_blackbox.analyzer.outputs.otlp import send_otlp, traces_url, write_otlp_json

    if args.format == "otlp" and (args.output is not None or not args.otlp_endpoint):
        with Output(args.output, mode=_file_mode(args)) as output:
            write_otlp_json(analysis, output.stream, redact=redact)
    if args.otlp_endpoint:
        try:
            sent = send_otlp(analysis, args.otlp_endpoint, redact=redact)
        except RuntimeError as e:
            print(f"mcp-blackbox export: {e}", file=sys.stderr)
            return 1
        print(f"mcp-blackbox export: {sent} span(s) sent to {traces_url(args.otlp_endpoint)}", file=sys.stderr)
    return 0


def run_report(args: argparse.Namespace) -> int:
    """The page, read as export reads: each call kept once final (a window at a time), the page built from
    what it shows of them (review/report.py)."""
    # The report is always a file: -o - names a file "-" (the line below goes to stdout).
    path = os.path.join(os.curdir, STDOUT) if args.output == STDOUT else args.output
    if refused("report", path):
        return CANNOT_WRITE
    # jinja2 and the templates, only for this command
    from mcp_blackbox.analyzer.review.report import build_report, write_page

    built: list[dict[str, Any]] = []

    def page_of(stream: CallStream) -> None:
        built.append(build_report(args.captures, redact=not args.no_redact, analysis=stream))

    # Read problems are said once here; the report's own header says them again for its readers.
    if _streamed(args.captures, args.window, page_of, args.time_range) == NOTHING_READ:
        return NOTHING_READ
    (data,) = built
    with Output(path, mode=_file_mode(args)) as output:
        write_page(data, output.stream)
    meta = data["meta"]
    print(
        f"{args.output}: {meta['calls']} calls, {len(meta['findings'])} findings, {meta['retry_groups']} retry "
        f"chains, ran more than once: {ran_twice_counts(meta['ran_more_than_once_counts'])}"
        + ("" if meta["redacted"] else "; secrets NOT redacted")
        + ("" if args.time_range is None else f"; {args.time_range.describe()}")
    )
    return 0


def run_summary(args: argparse.Namespace) -> int:
    if refused("summary", args.output):
        return CANNOT_WRITE
    if args.format != "markdown":  # the terminal summary reads as export does: a window at a time
        with Output(args.output, mode=_file_mode(args)) as output:
            status = _streamed(
                args.captures,
                DEFAULT_WINDOW,
                lambda stream: output.stream.write(summary_text(stream) + "\n"),
                args.time_range,
            )
            if status == NOTHING_READ:
                output.discard()  # a summary of nothing is not put in a file (stdout still shows it)
        return status
    from mcp_blackbox.analyzer.review.summary_markdown import summary_markdown

    # Read as the terminal summary is, keeping only what the document prints; written once whole, and not at
    # all (stdout included) when nothing could be read.
    documents: list[str] = []
    status = _streamed(
        args.captures,
        DEFAULT_WINDOW,
        lambda stream: documents.append(summary_markdown(stream, args.captures, redact=not args.no_redact)),
        args.time_range,
    )
    if status == NOTHING_READ:
        return status
    with Output(args.output, mode=_file_mode(args)) as output:
        output.stream.write(documents[0])
    return 0


def run_check(args: argparse.Namespace) -> int:
    """The CI gate, read as export reads: each call judged once final (a window at a time), kept only if the
    output lists it (JUnit: what its testcase shows of every call)."""
    from mcp_blackbox.analyzer.review.check import Gate, judge
    from mcp_blackbox.analyzer.review.check_formats import render, step_summary, text

    if refused("check", args.output):  # exit 2, never 1: 1 is only "the gate failed"
        return CANNOT_WRITE
    gates: list[Gate] = []

    def gate_of(stream: CallStream) -> None:
        gates.append(
            judge(
                stream,
                args.captures,
                args.fail_on or DEFAULT_FAIL_ON,
                args.allow or (),
                min_calls=args.min_calls,
                allow_partial=args.allow_partial,
                strict=args.strict,
                testcases=args.format == "junit",
            )
        )

    # Nothing could be read: still judged (exit 2 whatever the options), so that the report CI keeps (JUnit,
    # JSON) says so instead of being missing.
    _streamed(args.captures, DEFAULT_WINDOW, gate_of, args.time_range)
    (gate,) = gates
    output = render(gate, args.format)
    if args.output in (None, "-"):
        sys.stdout.write(output)
    else:
        # The file for CI to keep (a JUnit report, say), also when nothing could be read (it says so); the
        # plain text still goes to the log.
        with Output(args.output, mode=_file_mode(args)) as out:
            out.stream.write(output)
        sys.stdout.write(text(gate))
    if args.format == "github" and os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8", errors="backslashreplace") as summary:
            summary.write(step_summary(gate))
    return gate.exit_code


def run_diff(args: argparse.Namespace) -> int:
    from mcp_blackbox.analyzer.review.diff import diff
    from mcp_blackbox.analyzer.review.diff_format import diff_json, diff_markdown, diff_text
    from mcp_blackbox.analyzer.review.diff_side import Side

    if refused("diff", args.output):
        return CANNOT_WRITE
    with contextlib.ExitStack() as open_sides:  # each side's calls are in a temporary file until the end
        sides: list[Side] = []
        cut = {}
        for name, path, time_range in (
            ("before", args.before, args.time_ranges[0]),
            ("after", args.after, args.time_ranges[1]),
        ):
            # Each side read through the export's stream, its calls kept on disk (review/diff_side.py).
            ranges: list[dict[str, Any] | None] = []

            def consume(stream: CallStream, into: list[dict[str, Any] | None] = ranges) -> None:
                sides.append(open_sides.enter_context(Side.of(stream, redact=not args.no_redact)))
                into.append(stream.range_record())

            if _streamed([path], DEFAULT_WINDOW, consume, time_range) != 0:
                return 2
            if time_range is not None:
                cut[name] = {"described": time_range.describe(), **(ranges[0] or {})}
        result = diff(*sides, latency_ratio=args.latency_ratio)
    if cut:  # --since/--until: both sides cut alike; the key only then (the output is unchanged without)
        result["range"] = cut
    render = {"text": diff_text, "markdown": diff_markdown, "json": diff_json}[args.format]
    with Output(args.output, mode=_file_mode(args)) as output:
        output.stream.write(render(result, args.before, args.after))
    return 1 if args.fail_on_regression and result["regressions"] else 0


def run_redact(args: argparse.Namespace) -> int:
    """A flow file to share: every HTTP flow of the captures with its secrets replaced by pseudonyms."""
    if refused("redact", args.output):
        return CANNOT_WRITE
    output = Path(args.output)
    refusal = _cannot_redact(args.captures, args.output)
    if refusal is not None:
        print(f"mcp-blackbox redact: {refusal}", file=sys.stderr)
        return 2
    result = _redact_into(list(args.captures), output)
    for problem in result.problems:
        explain("mcp-blackbox redact:", problem)
    print(f"{args.output}: " + "; ".join(_redaction_notes(result)))
    if result.problems:
        return 2  # what could be read is in the output, redacted; the rest is not
    return 0


def _cannot_redact(captures: list[str], output_name: str) -> str | None:
    """Why the captures cannot be redacted into the output: it is one of them, or one is a stdio capture.
    None: they can."""
    output = Path(output_name)
    if any(Path(c).resolve() == output.resolve() for c in captures if Path(c).exists()):
        return f"{output_name} is also an input: write to another file"
    from mcp_blackbox.analyzer.read.stdio_load import is_stdio_capture

    if stdio := [str(c) for c in captures if is_stdio_capture(str(c))]:
        # Its lines are no HTTP flows; the export and the report redact what they quote from it.
        return f"{stdio[0]} is a stdio capture: redact rewrites flow files only"
    return None


def _redact_into(captures: list[str | Path], output: Path) -> RedactResult:
    """The captures' flows redacted into ``output``, through a file beside it renamed when complete: an
    interrupted run leaves no half-written capture."""
    import tempfile

    from mcp_blackbox.analyzer.redaction.sanitize import redact_files

    fd, tmp = tempfile.mkstemp(dir=output.parent if str(output.parent) else ".", prefix=f".{output.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            result = redact_files(captures, out)
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return result


def _redaction_notes(result: RedactResult) -> list[str]:
    """What was written, and what was left out (flows that are not HTTP, bodies that could not be decoded)."""
    notes = [f"{result.flows_written} flow(s) written, secrets replaced by pseudonyms"]
    if result.not_http:
        notes.append(f"{result.not_http} flow(s) that are not HTTP left out")
    if result.dropped_bodies:
        notes.append(f"{result.dropped_bodies} body(ies) in an encoding that could not be decoded left out")
    return notes


def fail_on_names(text: str) -> list[str]:
    try:
        return parse_fail_on(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def allowances(text: str) -> list[Allowance]:
    try:
        return parse_allow(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def at_least_zero(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (0 or more)")
    return number


def range_options() -> argparse.ArgumentParser:
    """--since and --until, for every analysis command (analyzer/read/time_range.py)."""
    options = argparse.ArgumentParser(add_help=False)
    what = (
        "ISO-8601 (2026-12-01T19:30:00Z, 2026-12-01T19:30Z, an offset converted to UTC) or a UTC time of day "
        "(19:30, 19:30:15) when the captures span one UTC day"
    )
    options.add_argument("--since", metavar="TIME", help=f"only the calls that started at or after TIME: {what}")
    options.add_argument("--until", metavar="TIME", help=f"only the calls that started before TIME: {what}")
    return options


def _resolve_range(args: argparse.Namespace) -> None:
    """args.time_range (diff: args.time_ranges, a time of day placed on each side's own day) from
    --since/--until; RangeError for a value the command cannot use."""
    since, until = getattr(args, "since", None), getattr(args, "until", None)
    if getattr(args, "command", None) == "diff":
        args.time_ranges = tuple(resolve(since, until, expand_captures([side])) for side in (args.before, args.after))
    else:
        args.time_range = resolve(since, until, getattr(args, "captures", None) or [])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-blackbox", description="Record and analyze MCP traffic (HTTP and SSE).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version() or NOT_INSTALLED}")
    commands = parser.add_subparsers(dest="command", required=True)

    record = commands.add_parser(
        "record",
        parents=[recording_options()],
        help="run mitmdump with the recording addon as a reverse proxy in front of an MCP server, or "
        "(--stdio) run a stdio server and record its stdin, stdout and stderr",
        description="Run mitmdump with the mcp-blackbox addon in reverse mode. Point the MCP client at "
        "http://HOST:PORT/ instead of the server; every exchange is written to FILE, also those the upstream "
        "never answered (it connects upstream per request: connection_strategy=lazy). Stop with Ctrl-C. "
        "With --stdio: record --stdio -w FILE -- COMMAND ARGS... goes where the server's command was in the "
        "client's configuration; it runs COMMAND, passes its stdin, stdout and stderr through unchanged, "
        "records every line with its time in FILE (a .stdio.jsonl capture; a directory: one file per run) "
        "and exits with the server's status.",
    )
    record.add_argument("--upstream", metavar="URL", help="the MCP server, e.g. http://127.0.0.1:8000")
    record.add_argument(
        "--stdio",
        action="store_true",
        help="record a stdio server: run the COMMAND given after -- and stand between it and the client",
    )
    record.add_argument("--listen-host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    record.add_argument(
        "-w",
        "--write",
        required=True,
        metavar="FILE",
        help="flow file to write (created 0600; strftime fields start a new file when the name changes), or, "
        "with --rotate-size or --keep, the directory of the rotated files, mcp-<UTC start>-<n>.flows; with "
        "--stdio, the capture file (FILE.stdio.jsonl), or a directory for a new file per run",
    )
    record.add_argument(
        "--rotate-size",
        metavar="SIZE",
        help="start a new file in the -w directory once the current one has passed SIZE (e.g. 64m)",
    )
    record.add_argument(
        "--keep",
        metavar="N|SIZE",
        help="retention in the -w directory: the newest N files, or the newest that fit in SIZE (e.g. 1g); "
        "the oldest are deleted first",
    )
    record.add_argument("--listen-file", metavar="PATH", help="write the listening address here (JSON)")
    record.add_argument("-q", "--quiet", action="store_true", help="no console output")
    record.add_argument("--dry-run", action="store_true", help="print the mitmdump command instead of running it")
    record.add_argument(
        "mitmdump_args",
        nargs=argparse.REMAINDER,
        help="after --, more arguments passed to mitmdump as they are; with --stdio, the server's command",
    )
    record.set_defaults(run=run_record, record_parser=record, port=8080)
    run_command.add_parser(commands)

    where = commands.add_parser(
        "addon-path",
        help="print the path of the recording addon, for mitmdump -s or mitmweb -s",
        description='Print the installed addon\'s path: mitmweb -s "$(mcp-blackbox addon-path)" ...',
    )
    where.set_defaults(run=lambda args: print(addon_path()) or 0)

    export = commands.add_parser(
        "export",
        parents=[range_options()],
        help="one record per call, with its verdict and evidence, as JSON, CSV or Parquet; OpenTelemetry spans; HAR",
    )
    export.add_argument("captures", nargs="+", metavar="CAPTURE", help="flow files (addon, plain mitmdump or HAR)")
    export.add_argument(
        "--format",
        choices=["json", "csv", "otlp", "har", "parquet"],
        help="json (default), csv, otlp: OTLP/JSON, a span per call (needs the otlp extra: pip install "
        "'mcp-blackbox[otlp]'), har: HAR 1.2 of the analyzed flows, each entry's verdicts in _mcp, parquet: "
        "a file of typed call rows per recording, for DuckDB, Spark or pandas (needs the parquet extra: pip install "
        "'mcp-blackbox[parquet]'; -o FILE.parquet for one recording, -o DIR/ for one file each)",
    )
    export.add_argument(
        "-o", "--output", metavar="FILE", help="output file, - for stdout (default); parquet: a file, or DIR/"
    )
    export.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send the spans as OTLP/HTTP protobuf to URL/v1/traces (an OpenTelemetry Collector, Jaeger, Tempo: "
        "e.g. http://localhost:4318); headers from OTEL_EXPORTER_OTLP_HEADERS; with --format otlp -o FILE, "
        "the file is written too",
    )
    export.add_argument(
        "--window",
        type=float,
        default=DEFAULT_WINDOW,
        metavar="SECONDS",
        help=f"json, csv and parquet, one recording (a file or a recorder's rotated files; parquet: each "
        f"recording): write each call once nothing "
        f"later can change it, holding about four times this much capture time in memory (default "
        f"{DEFAULT_WINDOW:g}; flows open longer are paired late); 0, or several recordings: read them whole first",
    )
    export.add_argument("--no-redact", action="store_true", help="keep secrets in evidence and messages")
    export.set_defaults(run=run_export)

    report = commands.add_parser(
        "report",
        parents=[range_options()],
        help="one self-contained HTML file: timeline, calls, details, retry chains (open it offline)",
    )
    report.add_argument("captures", nargs="+", metavar="CAPTURE")
    report.add_argument("-o", "--output", default="report.html", metavar="FILE", help="default report.html")
    report.add_argument(
        "--window",
        type=float,
        default=DEFAULT_WINDOW,
        metavar="SECONDS",
        help=f"one recording (a file or a recorder's rotated files): keep each call once nothing later can change "
        f"it, holding about four times this much capture time in memory besides what the page shows (default "
        f"{DEFAULT_WINDOW:g}; flows open longer are paired late); 0, or several recordings: read them whole first",
    )
    report.add_argument(
        "--no-redact", action="store_true", help="keep Authorization, cookies, tokens and keys (the report says so)"
    )
    report.set_defaults(run=run_report)

    summary = commands.add_parser(
        "summary",
        parents=[range_options()],
        help="counts by outcome, layer, method and tool, and the failing calls; or Markdown for an incident document",
    )
    summary.add_argument("captures", nargs="+", metavar="CAPTURE")
    summary.add_argument(
        "--format",
        choices=["text", "markdown"],
        default="text",
        help="text (80 columns, default) or markdown: the findings, what was captured, what failed by layer, "
        "retries and who made them, the writes that ran more than once, top errors, calls without an answer, "
        "what the capture could not show; calls named by their stable ids",
    )
    summary.add_argument("--no-redact", action="store_true", help="keep secrets in quoted errors (markdown)")
    summary.add_argument("-o", "--output", default="-", metavar="FILE", help="output file, - for stdout (default)")
    summary.set_defaults(run=run_summary)

    compare = commands.add_parser(
        "diff",
        parents=[range_options()],
        help="what changed between two captures (before and after a fix): verdicts, failures, retries, latency",
        description="Match the calls of two captures by server (host and path), method, tool, arguments digest "
        "and order, and report the verdicts that changed, new and fixed failures, retry chains and writes that "
        "ran more than once that appeared or went away, and p50/p95 latency per tool.",
    )
    compare.add_argument("before", metavar="BEFORE", help="capture before the change")
    compare.add_argument("after", metavar="AFTER", help="capture after the change")
    compare.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    compare.add_argument("-o", "--output", default=STDOUT, metavar="FILE", help="output file, - for stdout (default)")
    compare.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when something got worse: a new failure, retry chain or write run more than once, "
        "or a tool slower than --latency-ratio",
    )
    compare.add_argument(
        "--latency-ratio",
        type=float,
        default=2.0,
        metavar="R",
        help="a tool with 5 or more calls on each side whose p95 grew more than R times is worse (default 2; 0: "
        "latency never counts)",
    )
    compare.add_argument("--no-redact", action="store_true", help="keep secrets in quoted errors")
    compare.set_defaults(run=run_diff)

    redact = commands.add_parser(
        "redact",
        help="a flow file to share: secrets replaced by consistent pseudonyms, the analysis unchanged",
        description="Write the HTTP flows of the captures to OUT, a mitmproxy flow file (mitmweb and every "
        "mcp-blackbox command read it), with every secret the report's rules find (Authorization, cookies, "
        "API keys, tokens and passwords in headers, query strings, JSON bodies, event-stream data, the "
        "recorder's metadata) and the session ids replaced by REDACTED-<8 hex digits>: the same secret, the "
        "same pseudonym, in every place and file of this run, so the verdicts, retry chains and duplicate "
        "executions are those of the original. A secret found by its name is also replaced wherever else it "
        "appears. Exit 2 when a capture could not be read to its end (what was read is written).",
    )
    redact.add_argument("captures", nargs="+", metavar="CAPTURE", help="flow files (addon, plain mitmdump or HAR)")
    redact.add_argument("-o", "--output", required=True, metavar="OUT", help="the sanitized flow file to write")
    redact.set_defaults(run=run_redact)

    *successes, last = sorted(NOT_FAILURES)
    check = commands.add_parser(
        "check",
        parents=[range_options()],
        help="CI gate: exit 1 and list the calls with the outcomes, flags or layers named",
        description="Exit 1 and list the failing calls, one line each (call id, method, tool, JSON-RPC id, "
        "outcome, flags, capture, then the reason: the last evidence line, redacted) when any call has a named "
        "outcome or flag, or failed in a named layer, and no --allow excuses it; also exit 1 when fewer calls "
        "than --min-calls were analyzed (no evidence is not success). Exit 2 on a usage error, or when a capture "
        "could not be read completely (an empty or truncated file) unless --allow-partial. Exit 0 with one OK "
        "line otherwise. A 401 that an auth-retry chain answered and that ended in success (the normal start "
        "of MCP OAuth) is allowed by default and listed as answered by authorization. No color.",
    )
    check.add_argument("captures", nargs="+", metavar="CAPTURE", help="flow files (addon, plain mitmdump or HAR)")
    check.add_argument(
        "--fail-on",
        type=fail_on_names,
        action="extend",
        metavar="NAME,...",
        help="outcomes (HTTP_ERROR, JSONRPC_ERROR, ...), flags (UNSAFE_RETRY, HTTP_STATUS_MISMATCH, ...) or "
        "layers (transport, protocol, interaction, application), comma separated, any case, and the option "
        "may be repeated; a layer matches its calls that did not succeed. Default: UNSAFE_RETRY, "
        f"DUPLICATE_EXECUTION and every outcome but {', '.join(successes)} and {last}",
    )
    check.add_argument(
        "--allow",
        type=allowances,
        action="extend",
        metavar="SPEC,...",
        help="failures a test expects, listed as allowed and not counted: [SELECTOR[+SELECTOR...]:]NAME, where "
        "SELECTOR is tool=NAME, method=METHOD, call=CALL_ID or capture=FILE and NAME one outcome, flag or "
        "layer as in --fail-on (alone: on every call). E.g. tool=nope:TOOL_ERROR, "
        "method=tools/call+capture=faults.flows:JSONRPC_ERROR. Comma separated; may be repeated",
    )
    check.add_argument(
        "--min-calls",
        type=at_least_zero,
        default=1,
        metavar="N",
        help="fail (exit 1) when fewer than N calls were analyzed: a capture without MCP calls is no "
        "evidence that they worked (default 1; 0 turns this off)",
    )
    check.add_argument(
        "--allow-partial",
        action="store_true",
        help="judge what could be read of an empty, truncated or missing capture instead of exiting 2",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="count as failures what is how the protocol begins: a 401 that authorization answered (an auth-retry "
        "chain that succeeded) and a refused probe the client negotiated past (a protocol-fallback chain)",
    )
    check.add_argument(
        "--format",
        choices=["text", "junit", "github", "json"],
        default="text",
        help="text (default): a line per listed call and a verdict line; junit: JUnit XML, a testsuite per "
        "capture and a testcase per call (GitLab, Jenkins); github: ::error workflow commands per failing "
        "call and a Markdown table appended to $GITHUB_STEP_SUMMARY; json: one object with the verdict",
    )
    check.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the --format output to FILE (the plain text then goes to stdout); default: stdout",
    )
    check.set_defaults(run=run_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        # A captured name may hold a lone surrogate (a JSON "\\ud800"): printed as an escape, not a traceback.
        sys.stdout.reconfigure(errors="backslashreplace")
    if getattr(args, "mitmdump_args", None) and args.mitmdump_args[0] == "--":
        args.mitmdump_args = args.mitmdump_args[1:]
    if getattr(args, "captures", None):
        # A directory (rotated files) or a quoted glob as the files it names, for every reader of the list.
        args.captures = expand_captures(args.captures)
    try:
        _resolve_range(args)
    except RangeError as e:  # a usage error, said before anything is analyzed
        print(f"mcp-blackbox {args.command}: {e}", file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except BrokenPipeError:  # `mcp-blackbox export ... | head` closed the pipe: not an error
        sys.stderr.close()
        return 0


def command() -> int:
    """The installed ``mcp-blackbox``: ``main`` in a process of its own, a batch job that makes little cyclic
    garbage, so it is collected less often (analyzer/read/collector.py). Not in ``main``, which programs and
    tests call inside their own processes."""
    fewer_collections()
    return main()


if __name__ == "__main__":
    sys.exit(command())
