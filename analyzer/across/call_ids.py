"""Stable call ids: a call is named after the flow that carried its request.

A link to ``c3f9a2b7c1d04`` must open the same call whichever captures are loaded
beside it, so the id depends on nothing but that flow: the first 12 hex digits of
its id (mitmproxy's flow ids are random UUIDs), and ``.2``, ``.3``... for the
second and later calls one flow carried (a batch, server requests on a stream).
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections import Counter
from typing import TYPE_CHECKING

from mcp_blackbox.analyzer.model.records import flow_key

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.model.records import Call


class CallIds:
    """Suffixes given one call at a time, in analysis order.

    Two flows whose ids share DIGITS digits, or a capture loaded twice, would give two calls one id:
    the later ones get a further ``~2``, ``~3``, so ids stay unique within one analysis. Every id given
    is remembered for that (``TakenIds``: a million calls in some 8 MB); a flow's own count only until
    ``forget_flow``.
    """

    def __init__(self) -> None:
        self.per_flow: Counter[str] = Counter()
        self.taken = TakenIds()
        self.again: Counter[int] = Counter()  # ids given more than once: rare

    def assign(self, call: Call) -> None:
        flow_id = call.request.exchange.flow_id
        self.per_flow[flow_id] += 1
        nth = self.per_flow[flow_id]
        suffix = f".{nth}" if nth > 1 else ""
        key = _number(flow_id, nth)
        if not self.taken.add(key):
            self.again[key] += 1
            suffix += f"~{self.again[key] + 1}"
        call.id_suffix = suffix

    def forget_flow(self, flow_id: str) -> None:
        self.per_flow.pop(flow_id, None)


def _number(flow_id: str, nth: int) -> int:
    """A call's id as a number: 48 bits of its flow's id and its place in the flow, in 64 bits unless its
    place is past 65,535 (then above them)."""
    prefix = int(flow_key(flow_id), 16)
    return prefix << 16 | nth if nth < 1 << 16 else 1 << 96 | prefix << 32 | nth


class TakenIds:
    """The ids given, as numbers (a flow id's 48 bits, shifted, and the call's place in its flow): exact, in
    8 bytes each. A set held them in some 60 bytes each, the one structure of a windowed stream that still
    grew with every call. The latest are in a set; every MERGE_AT of them join a sorted array, searched
    by bisection."""

    MERGE_AT = 1 << 16

    def __init__(self) -> None:
        self.sorted = array("Q")
        self.latest: set[int] = set()
        self.wide: set[int] = set()  # the few that do not fit in 64 bits (a place in its flow past 65,535)

    def add(self, key: int) -> bool:
        """Take ``key``: False if it was taken already."""
        if key >= 1 << 64:
            if key in self.wide:
                return False
            self.wide.add(key)
            return True
        if key in self.latest or self._in_sorted(key):
            return False
        self.latest.add(key)
        if len(self.latest) >= self.MERGE_AT:
            self.sorted = array("Q", heapq.merge(self.sorted, sorted(self.latest)))
            self.latest.clear()
        return True

    def _in_sorted(self, key: int) -> bool:
        at = bisect.bisect_left(self.sorted, key)
        return at < len(self.sorted) and self.sorted[at] == key
