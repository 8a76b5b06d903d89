"""One capture as ``diff`` reads it, kept on disk: memory bounded by the output, not by the recording.

A side held every call's matching fields in memory (about 1.1 KB a call: 511 MB for a 200,000-call capture
against itself). Matching needs every request of both sides at once, in order, grouped by key; the retry
chains that say how a request ended are known only at the end of the stream. So each side's calls go to an
SQLite file of their own (the standard library's; a bounded page cache, sorting spilled to disk), the chains
after them, and ``diff`` asks for the pairs in order with one query (``pairs``, ``unmatched_after``): what
stays in memory is what the output lists.

The order is the one matching has always had: the n-th request with a key before pairs with the n-th with
that key after, listed in the before side's order; the requests after with no counterpart by start time,
ties in the order their keys first appeared and then in call order.
"""

from __future__ import annotations

import json
import math
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, Self
from urllib.parse import urlsplit

from mcp_blackbox.analyzer.model.vocabulary import is_failure
from mcp_blackbox.analyzer.outputs.analysis import Analysis, CallStream
from mcp_blackbox.analyzer.outputs.export import iter_calls_and_records

# The fields of an export record that matching, states, latency and the outputs read.
SLIM_FIELDS = ("call_id", "method", "tool", "arguments_digest", "outcome", "flags", "reason", "started_at",
               "t_start", "duration_ms")  # fmt: skip
CallRecord = dict[str, Any]  # SLIM_FIELDS of an export record (method, tool and digest "" where it has none)
KEY = ("server", "method", "tool", "digest")  # a request's key: server (host and path), method, tool, arguments
CALL_COLUMNS = ("seq", "call_id", *KEY, "outcome", "flags", "reason", "started_at", "t_start", "duration_ms")
CHAIN_COLUMNS = ("final_outcome", "failure_retry", "attempts")
KEPT_COLUMNS = tuple(name for name in CALL_COLUMNS if name not in ("seq", "server"))  # SLIM_FIELDS, in order
SCHEMA = f"""
CREATE TABLE calls ({", ".join(CALL_COLUMNS)}, PRIMARY KEY (seq));
CREATE TABLE chains (call_id PRIMARY KEY, {", ".join(CHAIN_COLUMNS)}) WITHOUT ROWID;
CREATE TABLE later (call_id PRIMARY KEY) WITHOUT ROWID;
"""
BATCH = 2_000  # calls written per statement
IDS_PER_QUERY = 500
TEXT_FIELDS = frozenset(("call_id", "method", "tool", "arguments_digest", "outcome", "reason", "started_at"))


def stored(text: str | None) -> bytes | None:
    """Text as a side keeps it: its UTF-8 bytes, lone surrogates too. Captured text may hold them (a server
    that cut an emoji in half, sent as ``"\\ud83d"``), and ``sqlite3`` refuses them in a ``str``."""
    return None if text is None else text.encode("utf-8", "surrogatepass")


def loaded(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "surrogatepass")


class Request(NamedTuple):
    """A logical request as ``call`` (its first attempt) shows it, with its chain when it has one."""

    call: CallRecord
    chain: dict[str, Any] | None  # final_outcome, failure_retry, attempts

    @property
    def state(self) -> str:
        """How the request ended: failed, recovered (after a retry of a failure) or ok."""
        chain = self.chain
        if is_failure(chain["final_outcome"] if chain else self.call["outcome"]):
            return "failed"
        return "recovered" if chain and chain["failure_retry"] and chain["attempts"] > 1 else "ok"


def nearest_rank(count: int, q: float) -> int | None:
    """Where the q-th percentile (q in 0..100) of ``count`` sorted values is: a value that was measured, not
    an interpolation."""
    return max(0, math.ceil(q / 100 * count) - 1) if count else None


def server_of(endpoint: str) -> str:
    """A server as the diff names it: host and path, not port (a test server listens on a new port each run)."""
    parts = urlsplit(endpoint)
    return f"{parts.hostname or ''}{parts.path}"


def what(call: CallRecord) -> str:
    return " ".join(part for part in (call["method"] or "(response)", call["tool"]) if part)


class Side:
    """One capture's calls in an SQLite file (removed by ``close`` or when the side goes), with the counts
    its output quotes."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="mcp-blackbox-diff-")
        self.path = Path(self._folder.name) / "side.sqlite"
        # Autocommit, so that a side can be attached to the other's connection; writes in explicit transactions.
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;" + SCHEMA)
        self.calls = 0
        self.failures = 0
        self.requests = 0
        self.retries: Counter[tuple[str, str]] = Counter()  # (origin, what) of failure retries
        # (tool, arguments digest, certainty) of each write that ran more than once
        self.twice: Counter[tuple[str, str, str]] = Counter()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()
        self._folder.cleanup()

    @classmethod
    def of(cls, analysis: Analysis | CallStream, *, redact: bool = True) -> Side:
        """One capture's side, from the whole analysis or from the export's stream (read to its end here:
        its retry groups and writes run twice are known then)."""
        side = cls()
        side._write_calls(analysis, redact=redact)
        side._write_chains(analysis)
        for entry in analysis.ran_more_than_once:
            side.twice[(entry.tool, entry.arguments_digest, entry.certainty.value)] += 1
        return side

    def _write_calls(self, analysis: Analysis | CallStream, *, redact: bool) -> None:
        insert = f"INSERT INTO calls VALUES ({', '.join('?' * len(CALL_COLUMNS))})"
        batch: list[tuple[Any, ...]] = []
        self.db.execute("BEGIN")
        for call, record in iter_calls_and_records(analysis, redact=redact):
            batch.append((
                self.calls, stored(record["call_id"]), stored(server_of(call.exchange.endpoint)),
                stored(record["method"] or ""), stored(record["tool"] or ""),
                stored(record["arguments_digest"] or ""), stored(record["outcome"]), json.dumps(record["flags"]),
                stored(record["reason"]), stored(record["started_at"]), record["t_start"], record["duration_ms"],
            ))  # fmt: skip
            self.calls += 1
            self.failures += is_failure(record["outcome"])
            if len(batch) == BATCH:
                self.db.executemany(insert, batch)
                batch.clear()
        self.db.executemany(insert, batch)
        # For the chains' members, then for latency (ties in call order, as a stable sort leaves them).
        self.db.execute("CREATE INDEX calls_by_id ON calls (call_id)")
        self.db.execute("CREATE INDEX durations ON calls (method, tool, duration_ms)")
        self.db.execute("COMMIT")

    def _write_chains(self, analysis: Analysis | CallStream) -> None:
        self.db.execute("BEGIN")
        for group in (g.record() for g in analysis.retry_groups):
            # With --since/--until a chain's earlier attempts may be outside the range: its first attempt
            # in the range stands for it.
            ids = group["members"]
            found = self._method_and_tool(ids)
            members = [m for m in ids if m in found]
            self.db.execute(  # a call in two chains (it cannot be) would stand for the last, as in a dict
                "INSERT OR REPLACE INTO chains VALUES (?, ?, ?, ?)",
                (stored(members[0]), group["final_outcome"], group["failure_retry"], group["attempts"]),
            )
            self.db.executemany("INSERT OR IGNORE INTO later VALUES (?)", ((stored(m),) for m in members[1:]))
            if group["failure_retry"]:
                method, tool = found[members[0]]
                self.retries[(group["origin"], what({"method": method, "tool": tool}))] += 1
        self.db.execute("COMMIT")
        self.requests = self.calls - self.db.execute("SELECT COUNT(*) FROM later").fetchone()[0]

    def _method_and_tool(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """(method, tool) of each of ``ids`` this side holds; asked a slice at a time (a statement takes at
        most 32,766 values, and a retry storm's chain may hold more attempts)."""
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(ids), IDS_PER_QUERY):
            part = [stored(call_id) for call_id in ids[start : start + IDS_PER_QUERY]]
            query = f"SELECT call_id, method, tool FROM calls WHERE call_id IN ({', '.join('?' * len(part))})"
            for call_id, method, tool in self.db.execute(query, part):
                found[str(loaded(call_id))] = (str(loaded(method)), str(loaded(tool)))
        return found

    def latency(self) -> dict[str, tuple[int, float | None, float | None]]:
        """Each tool's ``tools/call`` count, p50 and p95 (nearest rank: a duration that was measured)."""
        query = "SELECT tool, COUNT(*) FROM calls WHERE method = ? AND tool != ? AND duration_ms IS NOT NULL"
        counts = self.db.execute(query + " GROUP BY tool", (stored("tools/call"), stored(""))).fetchall()
        return {
            str(loaded(tool)): (count, self._duration(tool, count, 50), self._duration(tool, count, 95))
            for tool, count in counts
        }

    def _duration(self, tool: bytes, count: int, q: float) -> float | None:
        rank = nearest_rank(count, q)
        query = (
            "SELECT duration_ms FROM calls WHERE method = ? AND tool = ? AND duration_ms IS NOT NULL "
            "ORDER BY method, tool, duration_ms LIMIT 1 OFFSET ?"
        )
        return None if rank is None else self.db.execute(query, (stored("tools/call"), tool, rank)).fetchone()[0]

    def requests_in_order(self) -> Iterator[Request]:
        """The logical requests (each call but a chain's later attempts), in order: for tests and readers."""
        query = f"SELECT {_fields('c', 'h')} FROM calls c LEFT JOIN chains h USING (call_id) "
        query += "WHERE c.call_id NOT IN (SELECT call_id FROM later) ORDER BY c.seq"
        for row in self.db.execute(query):
            yield _request(row, 0)


def _fields(calls: str, chains: str) -> str:
    return ", ".join([f"{calls}.{name}" for name in KEPT_COLUMNS] + [f"{chains}.{name}" for name in CHAIN_COLUMNS])


FIELD_COUNT = len(SLIM_FIELDS) + len(CHAIN_COLUMNS)


def _request(row: tuple[Any, ...], start: int) -> Request:
    values = row[start : start + FIELD_COUNT]
    call: CallRecord = {
        name: loaded(value) if name in TEXT_FIELDS else value
        for name, value in zip(SLIM_FIELDS, values[: len(SLIM_FIELDS)], strict=True)
    }
    call["flags"] = json.loads(call["flags"])
    final_outcome, failure_retry, attempts = values[len(SLIM_FIELDS) :]
    chain = None if final_outcome is None else {
        "final_outcome": final_outcome, "failure_retry": bool(failure_retry), "attempts": attempts
    }  # fmt: skip
    return Request(call, chain)


def _requests_of(schema: str) -> str:
    """The rows of one side's (``main`` or ``other``) requests: every call but a chain's later attempts."""
    return f"{schema}.calls c WHERE c.call_id NOT IN (SELECT call_id FROM {schema}.later)"


def _requests(schema: str) -> str:
    """The requests of one side, numbered within their key in call order, with the first call number of their
    key."""
    key = ", ".join(KEY)
    return (
        f"SELECT c.*, ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY c.seq) AS nth, "
        f"MIN(c.seq) OVER (PARTITION BY {key}) AS first FROM {_requests_of(schema)}"
    )


class Attached:
    """The after side attached to the before side's connection, for the queries that read both."""

    def __init__(self, before: Side, after: Side) -> None:
        self.db = before.db
        self.db.execute("ATTACH DATABASE ? AS other", (str(after.path),))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.db.execute("DETACH DATABASE other")

    def pairs(self) -> Iterator[tuple[Request, Request | None]]:
        """Each request before, in order, with its counterpart after (the n-th with its key) or None."""
        query = (
            f"WITH b AS ({_requests('main')}), a AS ({_requests('other')}) "
            f"SELECT {_fields('b', 'bh')}, {_fields('a', 'ah')} FROM b "
            f"LEFT JOIN a USING ({', '.join(KEY)}, nth) "
            "LEFT JOIN main.chains bh ON bh.call_id = b.call_id LEFT JOIN other.chains ah ON ah.call_id = a.call_id "
            "ORDER BY b.seq"
        )
        for row in self.db.execute(query):
            yield _request(row, 0), (None if row[FIELD_COUNT] is None else _request(row, FIELD_COUNT))

    def unmatched_after(self) -> Iterator[Request]:
        """The requests after with no counterpart before, by start time (ties: their keys' first
        appearance, then call order)."""
        key = ", ".join(KEY)
        query = (
            f"WITH a AS ({_requests('other')}), "
            f"n AS (SELECT {key}, COUNT(*) AS count FROM {_requests_of('main')} GROUP BY {key}) "
            f"SELECT {_fields('a', 'ah')} FROM a LEFT JOIN n USING ({key}) "
            "LEFT JOIN other.chains ah ON ah.call_id = a.call_id "
            "WHERE a.nth > COALESCE(n.count, 0) ORDER BY a.t_start, a.first, a.seq"
        )
        for row in self.db.execute(query):
            yield _request(row, 0)
