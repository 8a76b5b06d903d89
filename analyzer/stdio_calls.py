"""A stdio session as the verdicts read it: its stderr lines, how it ended, and which call a line belongs to.

A stdio capture (``mcp-blackbox record --stdio``, addon/stdio_capture.py) is one run of one server: one scope.
``StdioSession`` is what the analysis keeps of it besides its JSON-RPC messages (analyzer/stdio_load.py makes
them): the server's stderr lines, when the client closed the server's stdin, when the server closed its
stdout, and its exit. Every exchange read from the capture refers to it (``Exchange.stdio``).

stderr lines belong to the calls during which they were written (``stderr_of``). The wrapper reads each pipe
in its own thread and dates a line when it reads it, so a line the server wrote just before an answer can be
dated just after it (docs/ARCHITECTURE.md, "stdio capture format"). A line belongs to a call when its first
byte was read after the call's request was (the server cannot have seen the request before) and before the
call ended, or up to ``SKEW`` after its end, unless another request came in between: then it is that
request's. Calls in flight at once share the lines written meanwhile (the capture cannot tell which one of
them wrote it).

``exception_in`` finds an exception or a traceback in lines: STDERR_DURING_CALL (analyzer/classify.py).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcp_blackbox.analyzer.records import C2S
from mcp_blackbox.analyzer.vocabulary import Ending

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.records import Call

SKEW = 0.05  # seconds a stderr line may be read after the answer it came before (the e2e tests' allowance)
KEPT_CHARS = 500  # characters of a stderr line the analysis keeps (a report reads the capture again)

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


@dataclass(frozen=True, slots=True)
class StderrLine:
    t: float  # when the wrapper read its end
    t_first: float  # when the wrapper read its first byte
    text: str  # at most KEPT_CHARS characters of it (undecodable bytes replaced)
    cut: bool = False  # longer than what is kept


@dataclass(slots=True)
class StdioSession:
    """One run of a stdio server, as its capture recorded it."""

    source: str
    scope: str
    command: list[str]
    command_text: str
    pid: int | None
    stderr: list[StderrLine] = field(default_factory=list)  # in the order read
    request_times: list[float] = field(default_factory=list)  # the client's requests (stdin), in order
    stdin_eof: float | None = None  # the client closed the server's stdin
    stdout_eof: float | None = None  # the server closed its stdout
    exit_t: float | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    spawn_error: str | None = None
    _firsts: list[float] = field(default_factory=list)

    def add_stderr(self, line: StderrLine) -> None:
        self.stderr.append(line)
        self._firsts.append(line.t_first)

    def exit_words(self) -> str:
        if self.spawn_error:
            return f"the server could not start: {self.spawn_error}"
        if self.exit_signal:
            return f"the server was killed by {self.exit_signal}"
        return f"the server exited with code {self.exit_code}"

    def end_after(self, t: float) -> tuple[Ending, float, str] | None:
        """What ended the session for a request sent at ``t`` (the first of: the server's exit, the server
        closing its stdout, the client closing the server's stdin), or None when the capture ended first."""
        ends = []
        if self.exit_t is not None and self.exit_t >= t:
            ends.append((self.exit_t, 1, Ending.SERVER_CUT, self.exit_words()))
        if self.stdout_eof is not None and self.stdout_eof >= t:
            ends.append((self.stdout_eof, 0, Ending.SERVER_CUT, "the server closed its stdout"))
        if self.stdin_eof is not None and self.stdin_eof >= t:
            ends.append((self.stdin_eof, 2, Ending.CLIENT_CLOSE, "the client closed the server's stdin"))
        if not ends:
            return None
        at, _, how, words = min(ends)
        if how is Ending.SERVER_CUT and self.exit_t is not None and self.exit_t <= at + SKEW and self.exit_t >= t:
            words = self.exit_words()  # stdout closed as the process died: say how it died
        elif how is Ending.CLIENT_CLOSE and self.exit_t is not None and self.exit_t > at:
            # A client that pipes its requests closes stdin and still reads: what the server did next is said too.
            words += f", then {self.exit_words()} {_ms(self.exit_t - at)} later"
        return how, at, words

    def lines_between(self, start: float, end: float) -> list[StderrLine]:
        """Lines whose first byte was read in [start, end]."""
        low = bisect.bisect_left(self._firsts, start)
        high = bisect.bisect_right(self._firsts, end)
        return self.stderr[low:high]

    def next_request_after(self, t: float) -> float | None:
        n = bisect.bisect_right(self.request_times, t)
        return self.request_times[n] if n < len(self.request_times) else None


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


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
