"""TLS for end-to-end tests: a test CA with a certificate for 127.0.0.1 (trustme), and the test MCP server
served over it by hypercorn (h2 and http/1.1)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import trustme

from tests.support.processes import REPO_ROOT, child_env, stop_process, wait_listening
from tests.support.proxy import free_port


@dataclass
class Tls:
    ca: trustme.CA
    ca_file: Path
    cert_file: Path  # the server's certificate, then its chain
    key_file: Path


def make_tls(folder: Path) -> Tls:
    """A CA and a server certificate for 127.0.0.1 and localhost, written as PEM files into ``folder``."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    tls = Tls(ca, folder / "ca.pem", folder / "server.pem", folder / "server.key")
    ca.cert_pem.write_to_path(str(tls.ca_file))
    cert.private_key_pem.write_to_path(str(tls.key_file))
    for n, pem in enumerate(cert.cert_chain_pems):
        pem.write_to_path(str(tls.cert_file), append=n > 0)
    return tls


@contextmanager
def https_mcp_server(tls: Tls, log_dir: Path) -> Iterator[int]:
    """The test MCP server (stateless) served by hypercorn over TLS on a free port: the port."""
    port, log = free_port(), log_dir / "hypercorn.log"
    argv = [sys.executable, "-m", "hypercorn", "--bind", f"127.0.0.1:{port}", "--certfile", str(tls.cert_file)]
    argv += ["--keyfile", str(tls.key_file), "tests.support.mcp_server:build_app('stateless')"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(process, port, log, 30, "hypercorn")
        yield port
    finally:
        stop_process(process)
