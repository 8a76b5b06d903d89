"""``mcp-blackbox run -w CAPTURE -- COMMAND ARGS...``: record an agent without touching its configuration.

It starts the recorder (mitmdump with the addon, and ``addon/run_monitor.py``) in regular mode on a
free 127.0.0.1 port, with a confdir and so a CA made for this run; runs COMMAND with the environment that
makes common clients use the recorder as their proxy and trust that CA (see :func:`client_environment`);
passes SIGINT, SIGTERM and SIGHUP on to COMMAND; stops the recorder when COMMAND exits, so the capture is
written and closed; prints one line per MCP server seen, and what it could not see; and exits with
COMMAND's status (128 + N when a signal N ended it). docs/ARCHITECTURE.md, "Recording an agent: run".
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from mcp_blackbox.analyzer.wire.recording import ENV as RECORDING_ENV
from mcp_blackbox.analyzer.wire.recording import recording_id
from mcp_blackbox.cli.environment import addon_path, mitmdump_executable
from mcp_blackbox.cli.options import recording_options
from mcp_blackbox.cli.output_files import CANNOT_WRITE, recording_refused

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # Debian, Ubuntu, Alpine, Arch (with ca-certificates)
LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]", "127.0.0.0/8", "::1/128", ".localhost", "*.localhost"}
PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
CA_NAMES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
START_TIMEOUT = 30.0  # seconds for mitmdump to listen (it makes its CA first)
STOP_TIMEOUT = 30.0  # seconds for mitmdump to write the capture once asked to stop
PROG = "mcp-blackbox run"
# Why a run saw no MCP exchange, and what to do about each cause. The SDKs' stdio clients start a server with
# only a default set of variables (PATH, HOME, ...) unless given env: the proxy variables never reach a stdio
# bridge (mcp-remote, say), whose HTTP then goes around the recorder although the agent itself honours them.
NO_MCP_CAUSES = (
    "The client may ignore the proxy settings (HTTP_PROXY, HTTPS_PROXY) or pin certificates. Record it in "
    "reverse mode (mcp-blackbox record --upstream URL, and point the client at the recorder) or set the client's "
    "own proxy option to the recorder. Or a stdio server was started with a bare environment (the SDKs' stdio "
    "clients pass only a default set of variables unless given env, e.g. mcp-remote under the Python SDK's "
    "stdio_client), so its HTTP bypassed the recorder: pass the environment through to it (env=dict(os.environ) "
    "in its StdioServerParameters, the env of its configuration) or record the stdio server with "
    "mcp-blackbox record --stdio."
)


def say(text: str) -> None:
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def preload_path() -> Path:
    """The Node preload shipped in the package (addon/node/proxy-preload.mjs)."""
    return addon_path().parent / "node" / "proxy-preload.mjs"


def monitor_path() -> Path:
    return addon_path().parent / "run_monitor.py"


def system_ca_bundle() -> tuple[Path, str]:
    """The CAs the system trusts (OpenSSL's default file, what SSL_CERT_FILE replaces), else certifi's."""
    if SYSTEM_BUNDLE.is_file():
        return SYSTEM_BUNDLE, f"the system's CAs ({SYSTEM_BUNDLE})"
    import certifi  # a dependency of mitmproxy

    return Path(certifi.where()), f"certifi's CAs ({certifi.where()})"


def write_bundle(target: Path, *parts: Path) -> None:
    with target.open("wb") as out:
        for part in parts:
            data = part.read_bytes()
            out.write(data if data.endswith(b"\n") else data + b"\n")


def without_loopback(no_proxy: str) -> str:
    """NO_PROXY without the entries that keep local servers off the recorder."""
    entries = [e.strip() for e in no_proxy.replace(" ", ",").split(",") if e.strip()]
    return ",".join(e for e in entries if e.lower() not in LOOPBACK)


def node_version() -> tuple[int, ...] | None:
    node = shutil.which("node")
    if node is None:
        return None
    try:
        text = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout
        return tuple(int(part) for part in text.strip().lstrip("v").split(".")[:3])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def node_has_env_proxy(version: tuple[int, ...]) -> bool:
    """NODE_USE_ENV_PROXY: Node 24 (fetch from 24.0, node:http from 24.5) and 22.21 (backported)."""
    return version[0] >= 24 or (version[0] == 22 and version[1] >= 21)


def client_environment(
    base: Mapping[str, str], proxy_url: str, bundle: Path, node: tuple[int, ...] | None
) -> tuple[dict[str, str], list[str]]:
    """COMMAND's environment, and what was done for Node (said at start)."""
    env = dict(base)
    for name in PROXY_NAMES:
        env[name] = proxy_url
    for name in ("NO_PROXY", "no_proxy"):
        if name in env:
            kept = without_loopback(env[name])
            if kept:
                env[name] = kept
            else:
                del env[name]
    for name in CA_NAMES:
        env[name] = str(bundle)
    notes: list[str] = []
    env["NODE_USE_ENV_PROXY"] = "1"
    if node is not None and node < (18, 18):  # --import: Node 19.0 and 18.18
        notes.append(f"Node {'.'.join(map(str, node))} has no --import: its fetch will not use the proxy")
    else:
        # Quoted: NODE_OPTIONS splits on spaces unless quoted.
        preload = f'--import="{preload_path().as_uri()}"'
        env["NODE_OPTIONS"] = " ".join(filter(None, [base.get("NODE_OPTIONS", ""), preload]))
        if node is not None and node_has_env_proxy(node):
            notes.append(f"Node {'.'.join(map(str, node))}: NODE_USE_ENV_PROXY=1")
        elif node is not None:
            notes.append(f"Node {'.'.join(map(str, node))}: fetch through the preload {preload_path().name}")
    return env, notes


@dataclass
class Recorder:
    process: subprocess.Popen[bytes]
    port: int
    ca_file: Path
    log_file: Path

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                say(f"the recorder did not stop within {STOP_TIMEOUT:.0f} s; killed (the capture may lack open flows)")
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def recorder_command(args: argparse.Namespace, workdir: Path, upstream_bundle: Path | None) -> list[str]:
    command = [mitmdump_executable(), "--scripts", str(addon_path()), "--scripts", str(monitor_path())]
    mode = f"upstream:{args.upstream_proxy}" if args.upstream_proxy else "regular"
    command += ["--mode", mode, "--listen-host", "127.0.0.1", "--listen-port", str(args.port)]
    command += ["--set", f"confdir={workdir / 'confdir'}", "--set", f"mcp_write={args.write}"]
    command += ["--set", f"mcp_listen_file={workdir / 'listen.json'}"]
    command += ["--set", f"mcp_run_stats={workdir / 'stats.json'}"]
    command += ["--set", "connection_strategy=lazy", "--set", f"mcp_write_all={str(args.all).lower()}"]
    if upstream_bundle is not None:
        command += ["--set", f"ssl_verify_upstream_trusted_ca={upstream_bundle}"]
    if args.insecure_upstream:
        command += ["--set", "ssl_insecure=true"]
    if args.filter:
        command += ["--set", f"mcp_filter={args.filter}"]
    if args.redact:
        command += ["--set", "mcp_redact=true"]
    for pattern in args.passthrough or []:
        command += ["--ignore-hosts", pattern]
    return command


def start_recorder(command: list[str], workdir: Path, recording: str) -> Recorder:
    log_file = workdir / "recorder.log"
    listen_file = workdir / "listen.json"
    ca_file = workdir / "confdir" / "mitmproxy-ca-cert.pem"
    with log_file.open("wb") as log:
        # A session of its own: a Ctrl-C at the terminal is COMMAND's to handle; the recorder stops after it.
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, RECORDING_ENV: recording},
        )
    recorder = Recorder(process, 0, ca_file, log_file)
    deadline = time.monotonic() + START_TIMEOUT
    # mitmproxy makes its CA in the confdir when it starts; the listen file is written once it listens.
    while not (listen_file.exists() and ca_file.exists()):
        if process.poll() is not None or time.monotonic() > deadline:
            recorder.stop()
            raise RuntimeError(f"the recorder did not start; its log:\n{recorder.log_tail()}")
        time.sleep(0.05)
    recorder.port = int(json.loads(listen_file.read_text())["listen_addrs"][0][1])
    return recorder


@contextlib.contextmanager
def foreground(pgid: int) -> Iterator[int | None]:
    """Give the terminal to COMMAND's process group while it runs (as a shell does), so it reads the
    terminal and gets its Ctrl-C itself; give it back after. Yields the terminal, or None when run has none
    (or is not in its foreground)."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        yield None
        return
    try:
        try:
            ours = os.tcgetpgrp(tty)
        except OSError:
            ours = -1
        if ours != os.getpgrp():
            yield None  # we are not in the foreground ourselves (a background job): leave the terminal alone
            return
        previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty, pgid)
                os.killpg(pgid, signal.SIGCONT)  # in case it read the terminal before it was its own
            yield tty
        finally:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty, ours)
            signal.signal(signal.SIGTTOU, previous)
    finally:
        os.close(tty)


def wait_for(child: subprocess.Popen[bytes], tty: int | None) -> int:
    """COMMAND's status (negative: killed by that signal). With the terminal, a COMMAND stopped by Ctrl-Z
    stops run too, so its shell sees the job stopped; `fg` continues run, which hands the terminal back to
    COMMAND and continues it."""
    while True:
        _, status = os.waitpid(child.pid, os.WUNTRACED if tty is not None else 0)
        if tty is not None and os.WIFSTOPPED(status):
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty, os.getpgrp())
            os.kill(os.getpid(), signal.SIGSTOP)
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty, child.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGCONT)
            continue
        child.returncode = os.waitstatus_to_exitcode(status)
        return child.returncode


class Forwarding:
    """SIGINT, SIGTERM and SIGHUP, received by run from the moment the recorder starts until it has
    reported, go to COMMAND's process group once: at once while it runs, as soon as it has started when they
    came before, nowhere after it ended (the recorder is still stopped and the capture written)."""

    def __init__(self) -> None:
        self.pgid: int | None = None
        self.pending: list[int] = []
        self.previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> Forwarding:
        self.previous = {sig: signal.signal(sig, self.forward) for sig in FORWARDED}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def forward(self, number: int, frame: FrameType | None) -> None:
        if self.pgid is None:
            self.pending.append(number)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, number)

    def started(self, pgid: int) -> None:
        self.pgid = pgid
        for number in self.pending:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, number)
        self.pending.clear()


class CannotStart(Exception):
    """COMMAND could not be started: why, and the status a shell gives for it (127: not found; 126: found
    but not runnable)."""

    def __init__(self, program: str, reason: str, status: int) -> None:
        super().__init__(f"cannot start {program}: {reason}")
        self.status = status

    @classmethod
    def of(cls, program: str, error: OSError) -> CannotStart:
        reason = error.strerror or str(error)
        return cls(program, reason, 127 if error.errno == errno.ENOENT else 126)


def cannot_start(program: str) -> CannotStart | None:
    """Why COMMAND will not start, found before the recorder is started for it (no capture is touched);
    None when it looks runnable (its exec may still fail: :func:`run_child` says so then). A bare name is
    looked up in PATH as exec does; not found is a shell's "command not found"."""
    if os.sep not in program:
        return None if shutil.which(program) else CannotStart(program, "command not found", 127)
    try:
        mode = os.stat(program).st_mode
    except OSError as e:
        return CannotStart.of(program, e)
    if stat.S_ISDIR(mode):
        return CannotStart(program, os.strerror(errno.EISDIR), 126)
    if not os.access(program, os.X_OK):
        return CannotStart(program, os.strerror(errno.EACCES), 126)
    return None


def run_child(argv: list[str], env: dict[str, str], signals: Forwarding) -> int:
    """Run COMMAND in a process group of its own, its signals passed on by ``signals``, and return its status
    as a shell would (128 + N for a signal N). :class:`CannotStart` when it could not be started."""
    try:
        child = subprocess.Popen(argv, env=env, process_group=0)
    except OSError as e:  # not found, not executable, not a format the system runs
        raise CannotStart.of(argv[0], e) from e
    signals.started(child.pid)
    with foreground(child.pid) as tty:
        status = wait_for(child, tty)
    return 128 - status if status < 0 else status


def read_stats(path: Path) -> dict[str, Any]:
    try:
        stats: dict[str, Any] = json.loads(path.read_text())
        return stats
    except (OSError, ValueError):
        return {}


def report(
    capture: str, stats: dict[str, Any], recorded_all: bool, passthrough: bool = False, started: bool = True
) -> None:
    """One line per MCP server seen; what the run could not see; where the capture is. ``started``: False
    when COMMAND never ran, so its not reaching the recorder says nothing about its proxy settings."""
    servers = _calls_by_server(capture)
    for server, (calls, failed) in sorted(servers.items()):
        say(f"MCP server {server}: {calls} call{'s' * (calls != 1)}, {failed} failed")
    _say_tls_failures(stats)
    if not servers and started:
        seen = _what_came_through(stats, passthrough)
        say(f"no MCP exchange was seen: {seen}. {NO_MCP_CAUSES}")
    elif not recorded_all and stats.get("other_hosts"):
        other = sum(stats["other_hosts"].values())
        say(f"{other} other HTTP exchange(s) passed through unrecorded (--all records them)")
    say(f"capture: {capture}")


def _calls_by_server(capture: str) -> dict[str, list[int]]:
    """[calls, failed calls] per server the capture's calls went to; none when the capture could not be
    analyzed (which is said: it is still where it is)."""
    from mcp_blackbox.analyzer.model.vocabulary import is_failure
    from mcp_blackbox.analyzer.outputs.analysis import analyze

    servers: dict[str, list[int]] = {}
    try:
        analysis = analyze([capture])
    except Exception as e:  # a capture the analysis cannot read is still where it is
        say(f"the capture could not be analyzed: {e}")
        return servers
    for call in analysis.call_objects:
        counts = servers.setdefault(call.exchange.server or "(unknown)", [0, 0])
        counts[0] += 1
        counts[1] += is_failure(str(call.outcome))
    return servers


def _say_tls_failures(stats: dict[str, Any]) -> None:
    """The TLS handshakes that failed (the recorder's stats): with the client (its requests were not recorded),
    and with each server the recorder could not verify; what to do about each."""
    failed_tls = stats.get("tls_failed", {})
    counts = stats.get("tls_failed_count", {})
    if counts.get("client"):
        hosts = sorted({f"{f['host']}" for f in failed_tls.get("client", []) if f.get("host")})
        say(
            f"{counts['client']} TLS handshake(s) with the client failed ({', '.join(hosts) or 'no server name'}): "
            "the client does not trust the run's CA or pins certificates, and those requests were not recorded. "
            "Record it in reverse mode (mcp-blackbox record --upstream URL) or through the client's own proxy "
            "and CA options; a host that is no MCP server can be left alone with --passthrough HOST."
        )
    if counts.get("server"):
        for failure in failed_tls.get("server", []):
            say(
                f"the recorder could not verify the server {failure.get('host')}:{failure.get('port')} "
                f"({failure.get('error')}): pass its CA with --upstream-ca FILE (or --insecure-upstream)"
            )


def _what_came_through(stats: dict[str, Any], passthrough: bool) -> str:
    """When no MCP exchange was seen: whether any HTTP exchange came through the recorder, and to which hosts."""
    if not stats.get("exchanges"):
        return "no HTTP request came through the recorder" + (" (hosts passed through aside)" if passthrough else "")
    others = stats.get("other_hosts", {})
    return f"{stats['exchanges']} HTTP exchange(s) came through ({', '.join(sorted(others)[:5])}), none MCP"


def run(args: argparse.Namespace) -> int:
    """Record COMMAND through a recorder started for it; its status (125: the recorder did not start; 2: the
    capture cannot be written; 127 or 126: COMMAND cannot be started, as a shell says)."""
    argv = _command_to_run(args)
    # Both said before the recorder starts: mitmdump would print a traceback for the one, and create or
    # truncate the capture for nothing for the other.
    if recording_refused("run", args.write):
        return CANNOT_WRITE
    if (unstartable := cannot_start(argv[0])) is not None:
        say(str(unstartable))
        return unstartable.status
    with tempfile.TemporaryDirectory(prefix="mcp-blackbox-run-") as tmp, Forwarding() as signals:
        workdir = Path(tmp)
        system_bundle, system_words = system_ca_bundle()
        upstream_bundle = _upstream_bundle(args, workdir, system_bundle)
        # One recording: the recorder's flow files and every stdio capture a wrapper under COMMAND writes.
        recording = recording_id()
        try:
            recorder = start_recorder(recorder_command(args, workdir, upstream_bundle), workdir, recording)
        except RuntimeError as e:
            say(str(e))
            return 125
        started = True
        try:
            env = _client_setup(args, workdir, recorder, system_bundle, system_words) | {RECORDING_ENV: recording}
            status = run_child(argv, env, signals)
        except CannotStart as e:  # found runnable above, refused by exec (a format the system does not run)
            say(str(e))
            status, started = e.status, False
        finally:
            stopped = recorder.stop()
        if stopped not in (0, None):
            say(f"the recorder exited with {stopped}; its log:\n{recorder.log_tail()}")
        report(args.write, read_stats(workdir / "stats.json"), args.all, bool(args.passthrough), started)
    return status


def _command_to_run(args: argparse.Namespace) -> list[str]:
    """COMMAND and its arguments, after ``--``; a usage error (argparse's exit) when there is none, or when
    --upstream-ca names no file."""
    argv = list(args.command)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        args.run_parser.error("the command to run goes after --: run -w CAPTURE -- COMMAND ARGS...")
    if args.upstream_ca and not Path(args.upstream_ca).is_file():
        args.run_parser.error(f"--upstream-ca {args.upstream_ca}: no such file")
    return argv


def _upstream_bundle(args: argparse.Namespace, workdir: Path, system_bundle: Path) -> Path | None:
    """With --upstream-ca, the CAs the recorder trusts for the servers; None: the system's alone."""
    if not args.upstream_ca:
        return None
    # The servers' CA beside the public ones: the agent may also talk to public servers.
    upstream_bundle = workdir / "upstream-ca.pem"
    write_bundle(upstream_bundle, system_bundle, Path(args.upstream_ca))
    return upstream_bundle


def _client_setup(
    args: argparse.Namespace, workdir: Path, recorder: Recorder, system_bundle: Path, system_words: str
) -> dict[str, str]:
    """COMMAND's environment, with a CA bundle of the system's CAs and the run's, said as it is set up: the
    recorder's address, what was done for Node, and a proxy already set that the recorder does not use."""
    bundle = workdir / "ca-bundle.pem"
    write_bundle(bundle, system_bundle, recorder.ca_file)
    proxy_url = f"http://127.0.0.1:{recorder.port}"
    env, notes = client_environment(os.environ, proxy_url, bundle, node_version())
    say(f"recording through {proxy_url} into {args.write}; CAs trusted: {system_words} and the run's CA")
    for note in notes:
        say(note)
    earlier = next((os.environ[n] for n in PROXY_NAMES if os.environ.get(n)), None)
    if earlier and not args.upstream_proxy:
        shown = earlier.rpartition("@")[2]  # without credentials
        say(f"a proxy was set ({shown}): the recorder connects directly; --upstream-proxy goes through it")
    return env


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "run",
        parents=[recording_options()],
        help="run a command (an agent, an MCP client) with every MCP exchange it makes recorded: its HTTP(S) "
        "traffic goes through the recorder as a proxy, with a CA made for the run",
        description="Start the recorder as an HTTP(S) proxy on a free 127.0.0.1 port with a CA made for this "
        "run, then run COMMAND with HTTP_PROXY/HTTPS_PROXY pointing at it (NO_PROXY without its loopback "
        "entries) and a CA bundle (the system's CAs and the run's) in SSL_CERT_FILE, REQUESTS_CA_BUNDLE, "
        "CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS; Node's fetch is made to honour the proxy. SIGINT, SIGTERM "
        "and SIGHUP go to COMMAND; when it exits the capture is written, one line per MCP server seen is "
        "printed, and run exits with COMMAND's status. Only MCP exchanges are recorded unless --all.",
    )
    parser.add_argument("-w", "--write", required=True, metavar="CAPTURE", help="the flow file to write (0600)")
    parser.add_argument(
        "--upstream-ca",
        metavar="FILE",
        help="also trust this CA (PEM) for the servers' certificates (ssl_verify_upstream_trusted_ca, "
        "with the system's CAs)",
    )
    parser.add_argument(
        "--insecure-upstream", action="store_true", help="do not verify the servers' certificates (ssl_insecure)"
    )
    parser.add_argument("--all", action="store_true", help="record every HTTP exchange, not only MCP ones")
    parser.add_argument(
        "--passthrough",
        action="append",
        metavar="REGEX",
        help="HTTPS to hosts matching REGEX (host:port) is tunnelled untouched, its TLS not intercepted and "
        "nothing recorded: hosts that are not MCP servers and whose clients pin certificates (repeatable; "
        "mitmproxy's ignore_hosts)",
    )
    parser.add_argument(
        "--upstream-proxy",
        metavar="URL",
        help="send the traffic on through this HTTP proxy (a corporate proxy; mitmproxy's upstream mode) "
        "instead of to the servers directly",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --, the command and its arguments")
    parser.set_defaults(run=run, run_parser=parser, port=0)
