"""One run of a stdio server, as its capture recorded it: what the analysis keeps of a stdio capture besides
its JSON-RPC messages (analyzer/read/stdio_load.py fills it; analyzer/calls/stdio_calls.py reads it).

Every exchange read from the capture refers to it (``Exchange.stdio``): the server's stderr lines, when the
client closed the server's stdin, when the server closed its stdout, and its exit.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from mcp_blackbox.analyzer.model.identity import ClientProcess
from mcp_blackbox.analyzer.model.vocabulary import Ending

SKEW = 0.05  # seconds a stderr line may be read after the answer it came before (the e2e tests' allowance)
KEPT_CHARS = 500  # characters of a stderr line the analysis keeps (a report reads the capture again)


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
    client: ClientProcess | None = None  # the process that started the server (the wrapper's parent)
    stderr: list[StderrLine] = field(default_factory=list)  # in the order read
    request_times: list[float] = field(default_factory=list)  # the client's requests (stdin), in order
    stdin_eof: float | None = None  # the client closed the server's stdin
    stdout_eof: float | None = None  # the server closed its stdout
    exit_t: float | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    # The wrapper forwarded a signal its parent sent it (SIGTERM from the client that started the server):
    # the client ended the server, as closing its stdin would.
    signaled_t: float | None = None
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
        # When each end came (None: it did not), its rank among ends at one instant (stdout's close first),
        # how it ended the session and in whose words.
        candidates: tuple[tuple[float | None, int, Ending, str], ...] = (
            (self.exit_t, 1, Ending.SERVER_CUT, self.exit_words()),
            (self.stdout_eof, 0, Ending.SERVER_CUT, "the server closed its stdout"),
            (self.stdin_eof, 2, Ending.CLIENT_CLOSE, "the client closed the server's stdin"),
        )
        ends = [(at, rank, how, words) for at, rank, how, words in candidates if at is not None and at >= t]
        if not ends:
            return None
        at, _, how, words = min(ends)
        return how, at, self._end_words(how, at, words, t)

    def _end_words(self, how: Ending, at: float, words: str, t: float) -> str:
        """The words of the end at ``at``, with the server's exit told when it came with or after that end."""
        exit_t = self.exit_t
        if how is Ending.SERVER_CUT and exit_t is not None and exit_t <= at + SKEW and exit_t >= t:
            return self.exit_words()  # stdout closed as the process died: say how it died
        if how is Ending.CLIENT_CLOSE and exit_t is not None and exit_t > at:
            # A client that pipes its requests closes stdin and still reads: what the server did next is said too.
            return words + f", then {self.exit_words()} {_ms(exit_t - at)} later"
        return words

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
