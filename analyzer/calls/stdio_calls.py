"""A stdio session as the verdicts read it: its stderr lines, how it ended, and which call a line belongs to.

A stdio capture (``mcp-blackbox record --stdio``, analyzer/wire/stdio_capture.py) is one run of one server: one scope.
``StdioSession`` (analyzer/model/stdio_session.py) is what the analysis keeps of it besides its JSON-RPC
messages.

stderr lines belong to the calls during which they were written (``stderr_of``). The wrapper reads each pipe
in its own thread and dates a line when it reads it, so a line the server wrote just before an answer can be
dated just after it (docs/ARCHITECTURE.md, "stdio capture format"). A line belongs to a call when its first
byte was read after the call's request was (the server cannot have seen the request before) and before the
call ended, or up to ``SKEW`` after its end, unless another request came in between: then it is that
request's. Calls in flight at once share the lines written meanwhile (the capture cannot tell which one of
them wrote it).

``exception_in`` finds an exception or a traceback in lines: STDERR_DURING_CALL (analyzer/calls/classify.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mcp_blackbox.analyzer.model.records import C2S
from mcp_blackbox.analyzer.model.stdio_session import SKEW, StderrLine

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.model.records import Call

# What an exception or a traceback looks like on stderr, line by line. Log levels (INFO, WARNING, ERROR) are
# not exceptions: a server that logs "ERROR could not reach X" and says so to the client is no swallowed one.
EXCEPTION_PATTERNS = (
    re.compile(r"^Traceback \(most recent call last\):"),  # Python
    re.compile(r"^\s+at \S.*(\(\S*:\d+:\d+\)|:\d+:\d+)$"),  # a JavaScript stack frame (err.stack)
    re.compile(r"^\s+at [\w$.<>/]+\([\w$.-]*\.(java|kt|scala):\d+\)$"),  # a JVM stack frame
    re.compile(r"^(Exception|Error) in thread "),  # the JVM's uncaught exception
    re.compile(r"^Uncaught (\w+)?(Error|Exception)\b"),  # Node's uncaught exception
    re.compile(r"^panic: |^goroutine \d+ \[\w+"),  # Go
    re.compile(r"^thread '.*' panicked at "),  # Rust
    re.compile(r"^([A-Za-z_][\w]*\.)*[A-Za-z_]*(Error|Exception)(\s*\[\w+\])?: \S"),  # "FileNotFoundError: ..."
)


def short_command(text: str, limit: int = 100) -> str:
    """A command line for an evidence line: its first line, at most ``limit`` characters."""
    first = text.split("\n", 1)[0]
    return first if len(first) <= limit and first == text else first[: limit - 1] + "…"


def stderr_of(call: Call) -> tuple[StderrLine, ...]:
    """The stderr lines written during a client's request to a stdio server (see the module's doc)."""
    session = call.exchange.stdio
    if session is None or call.request.kind != "request" or call.direction != C2S:
        return ()
    start = call.request.t
    end = call.t_end
    if end is None or end < start:
        ended = session.end_after(start)
        end = ended[1] if ended is not None else float("inf")
    following = session.next_request_after(end)
    tail = end + SKEW if following is None else min(end + SKEW, following)
    lines = session.lines_between(start, end)
    if tail > end:
        lines += [line for line in session.lines_between(end, tail) if line.t_first > end and line.t_first < tail]
    return tuple(lines)


def exception_in(lines: tuple[StderrLine, ...]) -> StderrLine | None:
    """The line that best shows an exception or a traceback: the exception's own line ("FileNotFoundError:
    ...", "Error: ENOENT ...") if there is one, else the first line of a traceback or stack."""
    found = [line for line in lines if any(pattern.search(line.text) for pattern in EXCEPTION_PATTERNS)]
    named = [line for line in found if EXCEPTION_PATTERNS[-1].search(line.text)]
    best = named or found
    return best[0] if best else None
