"""The recorder under load: hundreds of concurrent streams and thousands of POSTs through real mitmdump.

Everything runs on 127.0.0.1: an asyncio upstream whose bodies are derivable from the request
(tests/support/load_http.py), mitmdump with the addon in reverse mode, and an asyncio client that
speaks HTTP/1.1 by hand. Each test checks that every byte reached every client, that every exchange
is in the flow file with the body the upstream sent, and what mitmdump's memory did.

About the memory figures (VmRSS of the mitmdump process): mitmdump keeps no flows once they are
written (it has no flow view; the ``-w`` writer drops each flow when it is saved), but glibc keeps
the heap pages freed after a burst of concurrent buffers, so after the first load RSS stays near its
high-water mark even though nothing is leaked (checked while writing this test: after the load a few
hundred flows were waiting in reference cycles for the garbage collector, ``gc.collect()`` inside
mitmdump left no HTTPFlow alive, and ``malloc_trim(0)`` then brought RSS back to about 7 MiB above
its cold baseline).
So the leak check runs the same load twice: the first round is the warm-up, the second must leave
RSS where the first left it, within a bound far below the bytes the streams carried. A leak of each
stream's buffer (or of its flow) would add all of them again. The readings it compares are taken
after a collection and a ``malloc_trim`` inside mitmdump (tests/support/heap_settle.py): read
without them, two identical rounds once differed by 5.4 MiB, all of it pages the trim gave back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.http import HTTPFlow

from tests.support.load_http import Exchange, StreamSpec, Upstream, open_stream, post_many, post_reply
from tests.support.proxy import Mitmdump, start_mitmdump

HEAP_SETTLE = Path(__file__).parents[1] / "support" / "heap_settle.py"

pytestmark = [pytest.mark.e2e, pytest.mark.load]

STREAMS = 200
EVENTS = 20  # per stream, 256 B to 8 KiB each: about 16 MiB over all streams
EVENT_LOW, EVENT_HIGH = 256, 8 * 1024
EVENT_INTERVAL_MS = 20
POSTS = 2000
POST_CONNECTIONS = 20
CONNECT_GATE = 50  # connections being set up at once (mitmdump listens with a backlog of 100)
PHASE_LIMIT = 60.0  # seconds any one phase may take
SETTLE = 2.0  # seconds between the end of a load and the "after" reading of RSS

Record = Callable[[str, object], None]


def sha(data: bytes | bytearray) -> str:
    return hashlib.sha256(data).hexdigest()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


async def settled_rss_mib(proxy: Mitmdump, workdir: Path) -> float:
    """mitmdump's RSS once it has collected its garbage and trimmed its heap (tests/support/heap_settle.py)."""
    report = workdir / "heap-settled.json"
    before = json.loads(report.read_text())["settled"] if report.exists() else 0
    proxy.process.send_signal(signal.SIGUSR1)
    await wait_until(lambda: report.exists() and json.loads(report.read_text())["settled"] > before, "heap settled", 10)
    return int(json.loads(report.read_text())["rss_kib"]) / 1024


def rpc_id(flow: HTTPFlow) -> int:
    return json.loads(flow.request.raw_content or b"{}")["id"]


def stream_record(flow: HTTPFlow) -> dict[str, Any]:
    return flow.metadata["mcp_blackbox"]["stream"]


def flows_by_id(proxy: Mitmdump) -> dict[int, HTTPFlow]:
    flows = proxy.flows()
    by_id = {rpc_id(flow): flow for flow in flows}
    assert len(by_id) == len(flows), "two flows with the same JSON-RPC id"
    return by_id


def assert_no_addon_errors(proxy: Mitmdump) -> None:
    log = proxy.log()
    assert "traffic is unaffected" not in log, log[-3000:]
    assert "the verdict worker stopped" not in log, "the verdicts were made on mitmdump's loop"


async def wait_until(condition: Callable[[], bool], what: str, limit: float = PHASE_LIMIT) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:.0f} s waiting until {what}")
        await asyncio.sleep(0.02)


@dataclass
class Round:
    """One load: STREAMS held streams and POSTS POSTs at once, and mitmdump's RSS around it."""

    first_id: int
    streams: list[StreamSpec] = field(default_factory=list)
    received: list[Exchange] = field(default_factory=list)
    posts: dict[int, Exchange] = field(default_factory=dict)
    rss_before: float = 0.0
    rss_held: float = 0.0
    rss_peak: float = 0.0
    rss_after: float = 0.0
    rss_settled: float = 0.0  # after a collection and malloc_trim
    open_at_hold: int = 0
    seconds: float = 0.0

    @property
    def post_ids(self) -> list[int]:
        return list(range(self.first_id + STREAMS, self.first_id + STREAMS + POSTS))

    @property
    def stream_bytes(self) -> int:
        return sum(len(e.received) for e in self.received)


async def run_round(proxy: Mitmdump, upstream: Upstream, first_id: int, workdir: Path) -> Round:
    pid = proxy.process.pid
    load = Round(first_id)
    load.streams = [
        StreamSpec(first_id + i, EVENTS, EVENT_LOW, EVENT_HIGH, EVENT_INTERVAL_MS, hold=True) for i in range(STREAMS)
    ]
    load.received = [Exchange() for _ in load.streams]
    # The point where every stream has all but its last event: the taps hold nearly every byte.
    held_bytes = sum(sum(spec.sizes()[:-1]) for spec in load.streams)
    load.rss_before = load.rss_peak = rss_mib(pid)
    started = time.monotonic()

    async def watch_rss() -> None:
        while True:
            load.rss_peak = max(load.rss_peak, rss_mib(pid))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch_rss())
    gate = asyncio.Semaphore(CONNECT_GATE)
    streams = [
        asyncio.create_task(open_stream(proxy.port, spec, exchange, gate))
        for spec, exchange in zip(load.streams, load.received, strict=True)
    ]
    ids = load.post_ids
    posters = [asyncio.create_task(post_many(proxy.port, ids[c::POST_CONNECTIONS])) for c in range(POST_CONNECTIONS)]
    try:
        await wait_until(lambda: load.stream_bytes >= held_bytes, "every stream had all but its last event")
        load.open_at_hold = upstream.held
        load.rss_held = rss_mib(pid)
        upstream.release()
        async with asyncio.timeout(PHASE_LIMIT):
            await asyncio.gather(*streams)
            answers = await asyncio.gather(*posters)
        for c, exchanges in enumerate(answers):
            load.posts.update(zip(ids[c::POST_CONNECTIONS], exchanges, strict=True))
        load.seconds = time.monotonic() - started
        await asyncio.sleep(SETTLE)
        load.rss_after = rss_mib(pid)
        load.rss_peak = max(load.rss_peak, load.rss_held, load.rss_after)
        load.rss_settled = await settled_rss_mib(proxy, workdir)
    finally:
        upstream.hold_again()
        watcher.cancel()
        for task in streams + posters:
            task.cancel()
    return load


def check_clients(load: Round) -> int:
    """Every byte reached every client; returns the bytes verified."""
    for spec, exchange in zip(load.streams, load.received, strict=True):
        assert exchange.error is None and exchange.complete, (spec.id, exchange.error)
        assert exchange.status == 200 and exchange.headers["content-type"] == "text/event-stream"
        assert sha(exchange.received) == spec.sha256(), f"stream {spec.id}: the client got other bytes"
    for request_id, exchange in load.posts.items():
        assert exchange.complete and exchange.status == 200, request_id
        assert sha(exchange.received) == sha(post_reply(request_id)), f"POST {request_id}: the client got other bytes"
    assert len(load.posts) == POSTS
    return load.stream_bytes + sum(len(e.received) for e in load.posts.values())


def check_flows(load: Round, flows: dict[int, HTTPFlow]) -> None:
    """Every exchange of the round is in the flow file, with the upstream's bytes."""
    for spec in load.streams:
        flow = flows[spec.id]
        body = spec.body()
        stream = stream_record(flow)
        assert sha(flow.response.raw_content) == sha(body), f"stream {spec.id}: the flow holds other bytes"
        assert stream["ended"] == "complete" and stream["error"] is None, (spec.id, stream["ended"], stream["error"])
        assert stream["bytes"] == stream["stored_bytes"] == len(body) and stream["dropped_bytes"] == 0
        assert sum(size for _, size in stream["chunks"]) == len(body)
        assert len(stream["event_times"]) == EVENTS and stream["tap_failures"] == 0
    for request_id in load.post_ids:
        flow = flows[request_id]
        assert sha(flow.response.raw_content) == sha(post_reply(request_id)), f"POST {request_id}"
        assert "stream" not in flow.metadata["mcp_blackbox"]


def test_many_streams_and_posts_at_once(tmp_path: Path, record_property: Record) -> None:
    started = time.monotonic()
    warmup_streams = [StreamSpec(900_000 + i, 5, EVENT_LOW, EVENT_HIGH) for i in range(10)]
    warmup_posts = list(range(910_000, 910_100))

    async def scenario() -> tuple[Mitmdump, float, float, list[Round]]:
        async with Upstream() as upstream:
            proxy = await asyncio.to_thread(
                start_mitmdump, f"reverse:http://127.0.0.1:{upstream.port}", tmp_path, scripts=[HEAP_SETTLE]
            )
            try:
                warm = [Exchange() for _ in warmup_streams]
                async with asyncio.timeout(PHASE_LIMIT):
                    await asyncio.gather(
                        *(open_stream(proxy.port, s, e) for s, e in zip(warmup_streams, warm, strict=True)),
                        post_many(proxy.port, warmup_posts),
                    )
                assert all(e.complete for e in warm)
                await asyncio.sleep(SETTLE)
                cold = rss_mib(proxy.process.pid)
                cold_settled = await settled_rss_mib(proxy, tmp_path)
                rounds = [await run_round(proxy, upstream, first_id, tmp_path) for first_id in (0, 100_000)]
                assert upstream.peak_open_streams >= STREAMS
            finally:
                await asyncio.to_thread(proxy.stop)
        return proxy, cold, cold_settled, rounds

    proxy, cold, cold_settled, rounds = asyncio.run(scenario())
    verified = [check_clients(load) for load in rounds]
    flows = flows_by_id(proxy)
    assert len(flows) == len(warmup_streams) + len(warmup_posts) + len(rounds) * (STREAMS + POSTS)
    for load in rounds:
        check_flows(load, flows)
    assert_no_addon_errors(proxy)

    warm_up, measured = rounds
    stream_mib = measured.stream_bytes / 2**20
    figures = {
        "streams_held": [load.open_at_hold for load in rounds],
        "bytes_verified": sum(verified),
        "stream_mib_per_round": round(stream_mib, 1),
        "rss_cold_mib": round(cold, 1),
        "rss_cold_settled_mib": round(cold_settled, 1),
        "rss_mib": [
            {
                "before": round(r.rss_before, 1),
                "held": round(r.rss_held, 1),
                "peak": round(r.rss_peak, 1),
                "after": round(r.rss_after, 1),
                "settled": round(r.rss_settled, 1),
            }
            for r in rounds
        ],
        "load_seconds": [round(load.seconds, 1) for load in rounds],
        "runtime_seconds": round(time.monotonic() - started, 1),
    }
    print(f"\nload: {STREAMS} streams held open at once and {POSTS} POSTs, twice; {json.dumps(figures)}")
    for name, value in figures.items():
        record_property(name, value)

    for load in rounds:
        assert load.open_at_hold == STREAMS, "every stream was open in the proxy at the same time"
    # The buffers were really in mitmdump's memory in the first round (RSS can see them) ...
    assert warm_up.rss_peak - cold > stream_mib / 2, figures
    # ... and a second round adds nothing alive: a leak of every stream's buffer would add stream_mib again.
    assert measured.rss_settled - warm_up.rss_settled < stream_mib / 3, figures
    assert measured.rss_settled - cold_settled < 60, figures


def test_stream_larger_than_the_memory_bound(tmp_path: Path, record_property: Record) -> None:
    bound, size = 256 * 1024, 5 * 2**20
    spec = StreamSpec(1, 160, 32 * 1024, 32 * 1024)  # 160 events of 32 KiB: 5 MiB
    received = Exchange()

    async def scenario() -> tuple[Mitmdump, float, float]:
        async with Upstream() as upstream:
            proxy = await asyncio.to_thread(
                start_mitmdump,
                f"reverse:http://127.0.0.1:{upstream.port}",
                tmp_path,
                options={"mcp_stream_max_body": "256k"},
            )
            try:
                before = rss_mib(proxy.process.pid)
                async with asyncio.timeout(PHASE_LIMIT):
                    await open_stream(proxy.port, spec, received)
                after = rss_mib(proxy.process.pid)
            finally:
                await asyncio.to_thread(proxy.stop)
        return proxy, before, after

    proxy, rss_before, rss_after = asyncio.run(scenario())
    body = spec.body()
    assert len(body) == size
    assert received.complete and sha(received.received) == sha(body), "the client got every byte"
    flow = flows_by_id(proxy)[spec.id]
    stream = stream_record(flow)
    # The head (up to the bound, cut after its last whole event) and the tail (the stream's last 256 KiB,
    # from an event boundary): the answer's place is kept, the middle is dropped and said so.
    start, end = stream["dropped_range"]
    kept = flow.response.raw_content
    assert kept == body[:start] + body[end:], "the flow holds the stream's head and tail, nothing else"
    assert bound - 32 * 1024 <= start <= bound and size - bound <= end <= size - bound + 32 * 1024, (start, end)
    assert kept.endswith(body[-32 * 1024 :]), "the last event is kept whole"
    assert stream["ended"] == "complete"
    assert stream["bytes"] == size and stream["stored_bytes"] == len(kept)
    assert stream["dropped_bytes"] == size - len(kept) == end - start
    assert sum(size for _, size in stream["chunks"]) == size
    assert_no_addon_errors(proxy)
    print(
        f"\nlarge stream: {size} bytes through, {len(kept)} kept (head and tail), {size - len(kept)} dropped; "
        f"mitmdump RSS {rss_before:.1f} MiB before, {rss_after:.1f} MiB after"
    )
    record_property("large_stream_rss_mib", [round(rss_before, 1), round(rss_after, 1)])


def test_sigterm_with_many_streams_open(tmp_path: Path, record_property: Record) -> None:
    count, events = 50, 400  # 400 events every 25 ms: far longer than the test waits
    specs = [StreamSpec(i, events, 256, 2048, interval_ms=25) for i in range(count)]
    exchanges = [Exchange() for _ in specs]
    three_events = [sum(spec.sizes()[:3]) for spec in specs]

    async def scenario() -> tuple[Mitmdump, list[bytes], int]:
        async with Upstream() as upstream:
            proxy = await asyncio.to_thread(start_mitmdump, f"reverse:http://127.0.0.1:{upstream.port}", tmp_path)
            gate = asyncio.Semaphore(CONNECT_GATE)
            readers = [
                asyncio.create_task(open_stream(proxy.port, spec, exchange, gate))
                for spec, exchange in zip(specs, exchanges, strict=True)
            ]
            try:
                await wait_until(
                    lambda: all(len(e.received) >= n for e, n in zip(exchanges, three_events, strict=True)),
                    "every stream had three events",
                )
                open_streams = upstream.open_streams
                at_stop = [bytes(e.received) for e in exchanges]
                await asyncio.to_thread(proxy.stop, signal.SIGTERM)
                async with asyncio.timeout(PHASE_LIMIT):
                    await asyncio.gather(*readers)
            finally:
                for task in readers:
                    task.cancel()
                if proxy.process.poll() is None:
                    proxy.process.kill()
                    proxy.process.wait()
        return proxy, at_stop, open_streams

    proxy, at_stop, open_streams = asyncio.run(scenario())
    assert open_streams == count
    flows = flows_by_id(proxy)
    assert len(flows) == count
    kept = late = after = 0
    for spec, exchange, before in zip(specs, exchanges, at_stop, strict=True):
        assert not exchange.complete, f"stream {spec.id} ended although mitmdump was stopped"
        flow = flows[spec.id]
        stream = stream_record(flow)
        body = flow.response.raw_content
        assert stream["ended"] == "proxy-shutdown", (spec.id, stream["ended"])
        # The file holds what the client had when the signal went, and only bytes the client got: the body is
        # kept when mitmproxy calls the recorder's done hook, and mitmproxy may still pass on chunks already in
        # flight before it closes the connections (seen under load: 1,762 bytes, some 100 ms of events), which the
        # client reads and the file does not hold (docs/ARCHITECTURE.md, "proxy-shutdown").
        assert body.startswith(before), f"stream {spec.id}: the flow lacks bytes the client had"
        assert bytes(exchange.received).startswith(body), (
            f"stream {spec.id}: the flow holds bytes the client never got: {len(body)} bytes in the flow, "
            f"{len(exchange.received)} received, {len(before)} at the signal"
        )
        assert spec.body().startswith(body), f"stream {spec.id}: the flow holds bytes the upstream did not send"
        assert stream["bytes"] == stream["stored_bytes"] == len(body) == sum(n for _, n in stream["chunks"])
        late += len(body) > len(before)
        after += len(exchange.received) - len(body)
        kept += len(body)
    assert_no_addon_errors(proxy)
    print(
        f"\nSIGTERM with {count} streams open: all {count} in the file, ended proxy-shutdown, {kept} bytes kept "
        f"(clients that read more after the signal: {late}; bytes clients read after the shutdown snapshot: {after})"
    )
    record_property("sigterm_streams", count)
    record_property("sigterm_bytes_kept", kept)
    record_property("sigterm_bytes_after_snapshot", after)
