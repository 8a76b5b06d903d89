"""How long the recorder's helper takes to name the process behind a client socket, against psutil's scan.

    .venv/bin/python tests/benchmarks/bench_peer_lookup.py [--processes N] [--rounds R]

A benchmark, not a test: it prints numbers and exits 0.

Why it matters: the helper (addon/peer_lookup.py) looks a connection up after it opened; a connection that
closes before the answer (a client that opens one per request) is recorded without its process. On a loaded
2-core machine ``psutil.net_connections`` took 20 to 75 ms per batch, and half the runs of a TypeScript SDK
client through ``run`` had a call without its process.

Setup: N idle processes (``sleep``, each with a few descriptors, as a busy CI machine has: browsers, servers,
proxies), and one client process holding 3 connections to a listener of this process. Measured, over R
rounds, the time to answer that batch of 3:

  (psutil)  ``psutil.net_connections`` and a match, as the helper did before;
  (cold)    a new ``SocketOwners`` every time: sock_diag, then every process's descriptors, newest first;
  (warm)    one ``SocketOwners`` kept: the client, found before, is looked at first.

Each includes describing the owner (its name, start time and parent chain). The ratios are against psutil.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mcp_blackbox.addon.peer_lookup import SocketOwners, _owners_by_psutil  # noqa: E402

HOLDER = """
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(3)]
print(" ".join(str(s.getsockname()[1]) for s in held), flush=True)
time.sleep(600)
"""

Lookup = Callable[[list[tuple[tuple[str, int], tuple[str, int]]]], list[object]]


def timed(lookup: Lookup, wanted: list[tuple[tuple[str, int], tuple[str, int]]], pid: int, rounds: int) -> float:
    """The median milliseconds per batch; every answer must name the client."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        found = lookup(wanted)
        times.append((time.perf_counter() - started) * 1000)
        assert all(isinstance(f, dict) and f["pid"] == pid for f in found), found
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    idle = [subprocess.Popen(["sleep", "600"]) for _ in range(args.processes)]
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        client = subprocess.Popen([sys.executable, "-c", HOLDER, str(port)], stdout=subprocess.PIPE, text=True)
        try:
            assert client.stdout is not None
            ends = [int(p) for p in client.stdout.readline().split()]
            held = [server.accept()[0] for _ in ends]
            wanted = [(("127.0.0.1", end), ("127.0.0.1", port)) for end in ends]
            warm = SocketOwners()
            figures = {
                "psutil": timed(_owners_by_psutil, wanted, client.pid, args.rounds),
                "cold": timed(lambda w: SocketOwners()(w), wanted, client.pid, args.rounds),
                "warm": timed(warm, wanted, client.pid, args.rounds),
            }
            for sock in held:
                sock.close()
        finally:
            for process in [client, *idle]:
                process.kill()
                process.wait()
    print(f"{args.processes} other processes, a batch of 3 sockets, median of {args.rounds} rounds")
    for name, ms in figures.items():
        print(f"  {name:7} {ms:7.2f} ms   ({ms / figures['psutil']:.3f} x psutil)")


if __name__ == "__main__":
    main()
