"""In-memory EventStore for the stateful test server.

The SDK defines the `EventStore` ABC but ships no implementation, and without one
a cut POST stream cannot be resumed (no SSE ids, no replay). This one keeps every
event of every stream for the life of the process: the test bed is short-lived, so
unbounded growth is fine and keeps replay exact.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import anyio
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage


@dataclass(frozen=True)
class _Stored:
    event_id: EventId
    stream_id: StreamId
    message: JSONRPCMessage | None  # None = priming event (id only, empty data)


class InMemoryEventStore(EventStore):
    def __init__(self) -> None:
        self._events: list[_Stored] = []
        self._index: dict[EventId, int] = {}
        # Sequential ids make captures readable and ordering obvious when debugging.
        self._ids = itertools.count(1)
        self._lock = anyio.Lock()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        async with self._lock:
            event_id = str(next(self._ids))
            self._index[event_id] = len(self._events)
            self._events.append(_Stored(event_id, stream_id, message))
            return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        async with self._lock:
            position = self._index.get(last_event_id)
            if position is None:
                return None
            stream_id = self._events[position].stream_id
            later = [e for e in self._events[position + 1 :] if e.stream_id == stream_id]
        # Send outside the lock: the callback writes to a client socket and may block.
        for event in later:
            if event.message is not None:  # priming events carry no message to replay
                await send_callback(EventMessage(event.message, event.event_id))
        return stream_id
