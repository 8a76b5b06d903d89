"""Who sent a connection's requests: the local process that owns a loopback client's socket (issue 21).

When a client connects from this machine, the process at the other end of its socket is looked up once, by
a helper process (addon/peer_lookup.py) that a worker thread feeds, so no request waits for it and the scan
does not hold mitmdump's GIL: its pid, executable name, start time and parent chain. Each
MCP flow of the connection carries what was found (``FlowRecord.client_process``) once the lookup is done;
a flow that ends before it is written without it, and the analyzer takes the process from the connection's
other flows. A lookup that fails (the process already gone, another user's process we may not read) gives
None, and never fails or delays the connection.

What this does not say: one process can host many independent clients (an agent host, a worker pool), and
a peer that is itself a proxy (nginx, HAProxy, Caddy, Envoy, an MCP gateway) carries other processes'
requests: it is recorded with ``gateway`` set, and the analysis does not take it as the client. A remote
client's process is unknown: nothing is invented.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import queue
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from mcp_blackbox.analyzer.wire.metadata import ProcessRecord

logger = logging.getLogger("mcp_blackbox")

Address = tuple[str, int]
REMEMBERED = 4096  # connections whose lookup is kept; the oldest are dropped first


def is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


Lookup = Callable[[list[tuple[Address, Address]]], list[ProcessRecord | None]]
_Pending = tuple[Address, Address, "Future[ProcessRecord | None]"]


HELPER = Path(__file__).with_name("peer_lookup.py")


class HelperProcess:
    """The lookup as users run it: batches answered by addon/peer_lookup.py in a process of its own, started
    with the worker (``PeerProcesses.start``). If it cannot run (psutil missing beside a script-loaded recorder) or
    dies, every later connection is unknown, said once in mitmdump's log."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.failed = False

    def __call__(self, wanted: list[tuple[Address, Address]]) -> list[ProcessRecord | None]:
        if self.failed:
            return [None] * len(wanted)
        try:
            process = self._started()
            if process.stdin is None or process.stdout is None:
                raise OSError("the helper has no pipes")
            process.stdin.write(json.dumps([[*peer, *local] for peer, local in wanted]) + "\n")
            process.stdin.flush()
            answer = process.stdout.readline()  # waits outside the GIL
            found: list[ProcessRecord | None] = json.loads(answer)
            if len(found) != len(wanted):
                raise ValueError(f"{len(found)} answers to {len(wanted)} sockets")
            return found
        except (OSError, ValueError):
            self.failed = True
            logger.warning("mcp_blackbox: the client process lookup stopped (%s); processes are not recorded", HELPER)
            self.close()
            return [None] * len(wanted)

    def warm(self) -> None:
        """Start the helper now, from the worker thread (never mitmdump's event loop)."""
        if not self.failed:
            try:
                self._started()
            except OSError:
                self.failed = True

    def _started(self) -> subprocess.Popen[str]:
        if self.process is None:
            self.process = subprocess.Popen(
                [sys.executable, str(HELPER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        return self.process

    def close(self) -> None:
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
            self.process = None


class PeerProcesses:
    """The lookups of the connections seen, by mitmproxy's client connection id, answered by one worker
    thread: it takes every connection queued since its last scan and answers them with one more, so a burst
    of short-lived connections does not become a burst of scans competing with the traffic for the GIL."""

    def __init__(self, lookup: Lookup | None = None) -> None:
        """``lookup``: answers a batch of sockets (tests give one); by default the helper process."""
        self.helper: HelperProcess | None = None
        if lookup is None:
            self.helper = lookup = HelperProcess()
        self.lookup: Lookup = lookup
        self.queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self.worker: threading.Thread | None = None
        self.found: OrderedDict[str, Future[ProcessRecord | None]] = OrderedDict()
        self.told: OrderedDict[str, None] = OrderedDict()  # connections whose parent chain a flow carries
        self.owed: OrderedDict[str, None] = OrderedDict()  # connections a flow of was written without it
        self.enabled = True  # mcp_client_process
        self.scans = 0  # lookups made, each a batch
        self.count = 0  # connections they answered

    def start(self) -> None:
        """Start the worker, and with it the helper, before the first client: a helper started by the first
        connection takes a Python start-up, and a short connection's socket is gone by then."""
        if self.enabled and self.worker is None:
            self.worker = threading.Thread(target=self._work, name="mcp-blackbox-peer", daemon=True)
            self.worker.start()

    def connected(self, connection_id: str, peer: Address | None, local: Address | None) -> None:
        """Queue the lookup of a loopback peer's process; a remote one's stays unknown."""
        if not self.enabled or peer is None or local is None or not is_loopback(str(peer[0])):
            return
        self.start()
        future: Future[ProcessRecord | None] = Future()
        self.found[connection_id] = future
        self.queue.put(((str(peer[0]), peer[1]), (str(local[0]), local[1]), future))
        while len(self.found) > REMEMBERED:
            self.found.popitem(last=False)

    def _work(self) -> None:
        if self.helper is not None:
            self.helper.warm()
        stopping = False
        while not stopping:
            batch = [self.queue.get()]  # wait for one, then take every one queued since
            with contextlib.suppress(queue.Empty):
                while True:
                    batch.append(self.queue.get_nowait())
            stopping = None in batch
            if pending := [entry for entry in batch if entry is not None]:
                self._answer(pending)

    def _answer(self, batch: list[_Pending]) -> None:
        try:
            owners = self.lookup([(peer, local) for peer, local, _ in batch])
        except Exception:  # the lookup failed: unknown, never a failed connection
            logger.debug("mcp_blackbox: no processes for %d connections", len(batch), exc_info=True)
            owners = [None] * len(batch)
        self.scans += 1
        self.count += len(batch)
        for (_, _, future), owner in zip(batch, owners, strict=True):
            if future.set_running_or_notify_cancel():
                future.set_result(owner)

    def of(self, connection_id: str) -> tuple[bool, ProcessRecord | None]:
        """(known, the process): known is False while the lookup is queued or runs, or for a connection never
        looked up. The first flow of a connection to ask gets the parent chain too; the later ones get the
        process alone, which is all a flow needs to name it (every flow written is a few bytes shorter)."""
        future = self.found.get(connection_id)
        if future is None or not future.done() or future.cancelled():  # cancelled: the recorder is stopping
            if future is not None and not future.cancelled():
                self.owed[connection_id] = None
                while len(self.owed) > REMEMBERED:
                    self.owed.popitem(last=False)
            return False, None
        self.owed.pop(connection_id, None)
        found = future.result()
        if found is None or connection_id in self.told:
            return True, _without_parents(found)
        self.told[connection_id] = None
        while len(self.told) > REMEMBERED:
            self.told.popitem(last=False)
        return True, found

    def settled(self) -> dict[str, ProcessRecord | None]:
        """The processes found since for connections a flow of was written without one, said once: the next
        flow written carries them (``FlowRecord.earlier_connections``)."""
        done = {}
        for connection_id in list(self.owed):
            future = self.found.get(connection_id)
            if future is None or future.cancelled():
                del self.owed[connection_id]
            elif future.done():
                del self.owed[connection_id]
                done[connection_id] = _without_parents(future.result())
        return done

    def close(self) -> None:
        """Stop the worker after its current scan; lookups still queued are cancelled."""
        for future in self.found.values():
            future.cancel()
        self.queue.put(None)
        if self.helper is not None:
            worker = self.worker
            if worker is not None:
                worker.join(1)  # its current scan, if any, before the helper goes
            self.helper.close()

    def close_after_pending(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the lookups queued, then close (for tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        for future in list(self.found.values()):
            # A lookup's own failure is already None; a timeout leaves it pending.
            with contextlib.suppress(Exception):
                future.result(timeout=max(0.0, deadline - time.monotonic()))
        self.close()


def _without_parents(found: ProcessRecord | None) -> ProcessRecord | None:
    if found is None:
        return None
    slim = found.copy()
    slim.pop("parents", None)
    return slim
