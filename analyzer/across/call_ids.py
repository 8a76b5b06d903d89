"""Stable call ids: a call is named after the flow that carried its request.

A link to ``c3f9a2b7c1d04`` must open the same call whichever captures are loaded
beside it, so the id depends on nothing but that flow: the first 12 hex digits of
its id (mitmproxy's flow ids are random UUIDs), and ``.2``, ``.3``... for the
second and later calls one flow carried (a batch, server requests on a stream).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from mcp_blackbox.analyzer.model.records import flow_key

if TYPE_CHECKING:
    from mcp_blackbox.analyzer.model.records import Call


class CallIds:
    """Suffixes given one call at a time, in analysis order.

    Two flows whose ids share DIGITS digits, or a capture loaded twice, would give two calls one id:
    the later ones get a further ``~2``, ``~3``, so ids stay unique within one analysis. Every id given
    is remembered for that, as one number (its 48 bits and its place in the flow: a million calls in
    some 60 MB); a flow's own count only until ``forget_flow``.
    """

    def __init__(self) -> None:
        self.per_flow: Counter[str] = Counter()
        self.taken: set[int] = set()
        self.again: Counter[int] = Counter()  # ids given more than once: rare

    def assign(self, call: Call) -> None:
        flow_id = call.request.exchange.flow_id
        self.per_flow[flow_id] += 1
        nth = self.per_flow[flow_id]
        suffix = f".{nth}" if nth > 1 else ""
        key = (int(flow_key(flow_id), 16) << 32) | nth
        if key in self.taken:
            self.again[key] += 1
            suffix += f"~{self.again[key] + 1}"
        else:
            self.taken.add(key)
        call.id_suffix = suffix

    def forget_flow(self, flow_id: str) -> None:
        self.per_flow.pop(flow_id, None)
