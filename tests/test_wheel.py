"""The thing users install: the wheel built by ``python -m build``, installed into a fresh venv.

One module-scoped fixture builds the sdist and the wheel from it (out of tree), creates a venv
with this Python, installs the wheel there (pip fetches its dependencies) and prepares a working
directory with a local ``templates/`` folder and an ``analyzer.py`` that raises on import: names
the package once installed at top level, so shadowing by either would show. A second fixture
records a real MCP session through that venv's ``mcp-blackbox record``; the other tests run the
venv's console script and Python in that directory, never the checkout's code.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import run_py_client, start_server
from tests.support.raw_http import Control

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
DIST_INFO = f"mcp_blackbox-{VERSION}.dist-info"
TEMPLATE_FILES = ("report.html.j2", "report.js", "report.css")
BOGUS_TEMPLATE = "BOGUS TEMPLATE FROM THE WORKING DIRECTORY"
OUTPUT_TAIL = 4000  # characters of a command's output quoted in a failure

# The fault layer answers the first write_record with a bare 503 (HTTP_ERROR); tool_error is a
# tool-level failure (TOOL_ERROR). Both are failures `check` reports by default.
STEPS: list[dict[str, Any]] = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "hello wheel"}},
    {"op": "call", "tool": "add", "args": {"a": 2, "b": 3}},
    {"op": "call", "tool": "tool_error", "args": {"message": "tool says no"}},
    {"op": "call", "tool": "write_record", "args": {"key": "order-1", "value": "paid"}},
]
WRITE_RECORD_503 = {"match": {"rpc_method": "tools/call", "tool": "write_record"}, "action": {"status": 503}}
# initialize, notifications/initialized, tools/list and the four tools/call.
EXPECTED_CALLS = 7
EXPECTED_TOOL_OUTCOMES = {
    "echo": "TOOL_SUCCESS",
    "add": "TOOL_SUCCESS",
    "tool_error": "TOOL_ERROR",
    "write_record": "HTTP_ERROR",
}


def quoted(done: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{done.args!r} exited with {done.returncode}\n"
        f"stdout:\n{done.stdout[-OUTPUT_TAIL:]}\nstderr:\n{done.stderr[-OUTPUT_TAIL:]}"
    )


def run(
    argv: Sequence[str | Path], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def succeeded(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, quoted(done)
    return done


def tree_snapshot(root: Path) -> dict[str, int] | None:
    """Every file under root with its modification time, or None if root does not exist."""
    if not root.exists():
        return None
    return {str(path.relative_to(root)): path.stat().st_mtime_ns for path in root.rglob("*")}


@dataclass
class Installed:
    checkout_build_before: dict[str, int] | None  # build/ in the checkout before the build ran (snapshot)
    build_output: str
    wheel: Path
    wheel_names: list[str]
    package_sources: dict[str, set[str]]  # the checkout's files per mapped folder, listed just before the build
    venv: Path
    site_packages: Path
    workdir: Path  # the tests' cwd, with the shadowing traps in it

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self) -> dict[str, str]:
        """An activated venv's environment, without anything that would put the checkout on the path."""
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH"}}
        env["VIRTUAL_ENV"] = str(self.venv)
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        return env

    def cli(self, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run([self.bin / "mcp-blackbox", *args], cwd=self.workdir, env=self.env(), timeout=timeout)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        # `python -c` puts the cwd first on sys.path: exactly where a local analyzer.py would win.
        return run([self.bin / "python", "-c", code], cwd=self.workdir, env=self.env())


def package_sources() -> dict[str, set[str]]:
    """Every file of the package's folders and their sub-packages that the wheel must hold, by path."""
    return {
        folder: {
            p.relative_to(REPO / folder).as_posix()
            for p in (REPO / folder).rglob("*")
            if (p.suffix in {".py", ".j2", ".js", ".css", ".mjs"} or p.name == "py.typed")
            and not p.name.startswith(".")  # not editors' lock files
            and "__pycache__" not in p.parts
        }
        for folder in ("addon", "analyzer", "cli", "templates")
    }


def plant_shadowing_traps(workdir: Path) -> None:
    templates = workdir / "templates"
    templates.mkdir()
    # An importable package of that name, as another distribution's `templates` would be.
    (templates / "__init__.py").write_text("")
    (templates / "report.html.j2").write_text(f"<html><body>{BOGUS_TEMPLATE}</body></html>\n")
    (workdir / "analyzer.py").write_text('raise RuntimeError("the working directory\'s analyzer.py was imported")\n')


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    with tempfile.TemporaryDirectory(prefix="mcp-blackbox-wheel-") as tmp:
        root = Path(tmp)
        dist, venv, workdir = root / "dist", root / "venv", root / "work"
        workdir.mkdir()
        checkout_build_before = tree_snapshot(REPO / "build")
        sources = package_sources()
        # Plain `python -m build`: the sdist, then the wheel built from the unpacked sdist in a temp
        # dir, so a file missing from the sdist would be missing from the wheel too. It still writes
        # mcp_blackbox.egg-info into the checkout (the sdist step), which .gitignore covers.
        build = succeeded(run([sys.executable, "-m", "build", "--outdir", dist], cwd=REPO, timeout=600))
        [wheel] = dist.glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
        succeeded(run([sys.executable, "-m", "venv", venv], cwd=root, timeout=300))
        pip = [venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel]
        succeeded(run(pip, cwd=root, timeout=900))
        purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
        site_packages = Path(succeeded(run([venv / "bin" / "python", "-c", purelib], cwd=root)).stdout.strip())
        plant_shadowing_traps(workdir)
        yield Installed(
            checkout_build_before=checkout_build_before,
            build_output=build.stdout + build.stderr,
            wheel=wheel,
            wheel_names=names,
            package_sources=sources,
            venv=venv,
            site_packages=site_packages,
            workdir=workdir,
        )


def stop_recorder(recorder: subprocess.Popen[bytes], log: Path) -> int:
    """Ctrl-C, as a user stops `record`: mitmdump writes out the flow file on the way."""
    if recorder.poll() is None:
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(timeout=20)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()
            raise AssertionError(
                f"mcp-blackbox record ignored SIGINT; log:\n{log.read_text(errors='replace')}"
            ) from None
    return recorder.returncode


def listening_port(listen_file: Path, recorder: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while not listen_file.exists():
        if recorder.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"mcp-blackbox record did not start; log:\n{log.read_text(errors='replace')}")
        time.sleep(0.05)
    return json.loads(listen_file.read_text())["listen_addrs"][0][1]


@contextlib.contextmanager
def recording(installed: Installed, argv: Sequence[str | Path], listen_file: Path, log: Path) -> Iterator[int]:
    """Run a recorder (``mcp-blackbox record`` or ``mitmdump -s``) from the venv; hand over its port; stop it
    with Ctrl-C as a user does and require a clean exit (it writes the flow file on the way)."""
    with log.open("wb") as out:
        recorder = subprocess.Popen(
            [str(a) for a in argv],
            cwd=installed.workdir,
            env=installed.env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    try:
        yield listening_port(listen_file, recorder, log)
        returncode = stop_recorder(recorder, log)
        assert returncode == 0, f"the recorder exited with {returncode}; log:\n{log.read_text(errors='replace')}"
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()


@pytest.fixture(scope="module")
def capture(installed: Installed) -> dict[str, Any]:
    """Record one SDK client session through the venv's `mcp-blackbox record`; return what the client saw."""
    workdir = installed.workdir
    log = workdir.parent / "record.log"  # outside the cwd: the analysis commands see only the capture
    with start_server("stateful") as server:
        Control(server.port).faults(WRITE_RECORD_503)
        argv = [installed.bin / "mcp-blackbox", "record", "--upstream", server.url(""), "-p", "0"]
        argv += ["--listen-file", "listen.json", "-w", "capture.flows", "-q"]
        with recording(installed, argv, workdir / "listen.json", log) as port:
            client = run_py_client(f"http://127.0.0.1:{port}/mcp", STEPS, mode="legacy", timeout=30, step_timeout=10)
        server.assert_alive()
    recorded = log.read_text(errors="replace")
    assert "traffic is unaffected" not in recorded, f"an addon hook failed:\n{recorded}"
    assert (workdir / "capture.flows").stat().st_size > 0
    return client


# ---------------------------------------------------------------- the build


def test_build_makes_sdist_then_wheel_from_it_and_leaves_no_build_directory(installed: Installed) -> None:
    assert "Building wheel from sdist" in installed.build_output, installed.build_output[-OUTPUT_TAIL:]
    assert len(list(installed.wheel.parent.glob("*.tar.gz"))) == 1
    # A build/ left by someone else before may stay; the build must neither create nor touch one.
    assert tree_snapshot(REPO / "build") == installed.checkout_build_before, "python -m build wrote build/"


def test_wheel_installs_only_mcp_blackbox_at_top_level(installed: Installed) -> None:
    top_level = {name.split("/", 1)[0] for name in installed.wheel_names}
    assert top_level == {"mcp_blackbox", DIST_INFO}, sorted(top_level)


def test_wheel_holds_every_module_the_templates_and_the_license(installed: Installed) -> None:
    names = set(installed.wheel_names)
    for folder, files in installed.package_sources.items():
        missing = sorted(f for f in files if f"mcp_blackbox/{folder}/{f}" not in names)
        assert not missing, f"{folder}/ files missing from the wheel: {missing}"
    for template in TEMPLATE_FILES:
        assert f"mcp_blackbox/templates/{template}" in names
    licenses = [n for n in names if n.startswith(f"{DIST_INFO}/") and n.endswith("/LICENSE")]
    assert licenses, f"no LICENSE in {DIST_INFO}: {sorted(n for n in names if n.startswith(DIST_INFO))}"


# ---------------------------------------------------------------- the installed command


def test_version_is_the_one_in_pyproject(installed: Installed) -> None:
    done = succeeded(installed.cli("--version"))
    assert done.stdout.strip() == f"mcp-blackbox {VERSION}"


def test_addon_path_is_the_installed_addon(installed: Installed) -> None:
    addon = Path(succeeded(installed.cli("addon-path")).stdout.strip())
    assert addon.is_file(), addon
    assert addon.is_relative_to(installed.site_packages), f"{addon} is not in {installed.site_packages}"
    assert addon.relative_to(installed.site_packages).as_posix() == "mcp_blackbox/addon/mcp_recorder.py"


def test_record_runs_the_venvs_own_mitmdump_with_the_installed_addon(installed: Installed) -> None:
    done = succeeded(installed.cli("record", "--upstream", "http://127.0.0.1:9", "-w", "x.flows", "--dry-run"))
    command = done.stdout.split()
    assert command[0] == str(installed.bin / "mitmdump")
    assert command[command.index("--scripts") + 1] == succeeded(installed.cli("addon-path")).stdout.strip()


def test_run_uses_the_installed_monitor_and_node_preload(installed: Installed) -> None:
    """`run` from the wheel: the recorder starts with the installed run_monitor.py, and COMMAND gets the
    installed Node preload in NODE_OPTIONS (package data: addon/node/*.mjs)."""
    assert "mcp_blackbox/addon/node/proxy-preload.mjs" in installed.wheel_names
    code = "import os; print(os.environ['NODE_OPTIONS']); print(os.environ['SSL_CERT_FILE'])"
    done = succeeded(installed.cli("run", "-w", "run.flows", "--", installed.bin / "python", "-c", code))
    options, bundle = done.stdout.splitlines()
    preload = installed.site_packages / "mcp_blackbox" / "addon" / "node" / "proxy-preload.mjs"
    assert options.endswith(f'--import="{preload.as_uri()}"') and preload.is_file(), options
    assert bundle.endswith("ca-bundle.pem") and "no MCP exchange was seen" in done.stderr, done.stderr
    assert not Path(bundle).exists(), "the run's CA and bundle are removed with it"


def test_client_session_through_the_recorder_went_as_scripted(capture: dict[str, Any]) -> None:
    assert capture["fatal"] is None, capture["fatal"]
    steps = {step["tool"] or step["op"]: step for step in capture["steps"]}
    assert all(steps[name]["ok"] for name in ("list_tools", "echo", "add", "tool_error")), capture["steps"]
    assert steps["tool_error"]["result"].get("isError") is True
    assert not steps["write_record"]["ok"], "the injected 503 did not reach the client"


# ---------------------------------------------------------------- analysis, from the installed package


def test_report_renders_the_installed_templates_not_the_working_directorys(
    installed: Installed, capture: dict[str, Any]
) -> None:
    done = succeeded(installed.cli("report", "capture.flows", "-o", "report.html"))
    assert done.stdout.startswith(f"report.html: {EXPECTED_CALLS} calls"), done.stdout
    html = (installed.workdir / "report.html").read_text(encoding="utf-8")
    assert "<title>MCP incident report" in html
    assert BOGUS_TEMPLATE not in html
    shipped = installed.site_packages / "mcp_blackbox" / "templates"
    for asset in ("report.js", "report.css"):
        assert (shipped / asset).read_text(encoding="utf-8") in html, f"{asset} is not inlined in the report"


def test_summary_names_the_calls(installed: Installed, capture: dict[str, Any]) -> None:
    summary = succeeded(installed.cli("summary", "capture.flows")).stdout
    assert summary.startswith(f"{EXPECTED_CALLS} calls in "), summary
    for tool in EXPECTED_TOOL_OUTCOMES:
        assert tool in summary, summary
    for outcome in ("TOOL_ERROR", "HTTP_ERROR"):
        assert outcome in summary, summary


def test_check_fails_on_the_injected_failures_and_passes_on_an_absent_one(
    installed: Installed, capture: dict[str, Any]
) -> None:
    failed = installed.cli("check", "capture.flows")
    assert failed.returncode == 1, quoted(failed)
    lines = failed.stdout.splitlines()
    assert any(" tools/call write_record " in line and "HTTP_ERROR" in line for line in lines), failed.stdout
    assert any(" tools/call tool_error " in line and "TOOL_ERROR" in line for line in lines), failed.stdout
    assert lines[-1].startswith(f"FAIL: 2 of {EXPECTED_CALLS} calls match"), failed.stdout

    passed = installed.cli("check", "capture.flows", "--fail-on", "MALFORMED_JSON,UNSAFE_RETRY")
    assert passed.returncode == 0, quoted(passed)
    assert passed.stdout.startswith(f"OK: none of {EXPECTED_CALLS} calls match"), passed.stdout


def test_export_json_has_each_call_with_its_outcome(installed: Installed, capture: dict[str, Any]) -> None:
    succeeded(installed.cli("export", "capture.flows", "--format", "json", "-o", "calls.json"))
    exported = json.loads((installed.workdir / "calls.json").read_text(encoding="utf-8"))
    calls = exported["calls"]
    assert [c["method"] for c in calls if c["method"] != "tools/call"] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
    ]
    outcomes = {c["tool"]: c["outcome"] for c in calls if c["method"] == "tools/call"}
    assert outcomes == EXPECTED_TOOL_OUTCOMES
    [write] = [c for c in calls if c["tool"] == "write_record"]
    assert write["http_status"] == 503
    assert exported["skipped"] == []


def test_library_imports_the_installed_package_despite_a_local_analyzer_py(
    installed: Installed, capture: dict[str, Any]
) -> None:
    code = (
        "import json, mcp_blackbox.analyzer, mcp_blackbox.templates\n"
        "from mcp_blackbox.analyzer import analyze\n"
        "result = analyze(['capture.flows'])\n"
        "print(json.dumps({'analyzer': mcp_blackbox.analyzer.__file__, 'templates': mcp_blackbox.templates.__file__,\n"
        "                  'version': mcp_blackbox.analyzer.__version__,\n"
        "                  'outcomes': sorted(call['outcome'] for call in result.calls)}))\n"
    )
    seen = json.loads(succeeded(installed.python(code)).stdout)
    for module in ("analyzer", "templates"):
        assert Path(seen[module]).is_relative_to(installed.site_packages), seen
    assert seen["version"] == VERSION
    assert seen["outcomes"] == sorted(["SUCCESS", "ACCEPTED", "SUCCESS", *EXPECTED_TOOL_OUTCOMES.values()])


# ---------------------------------------------------------------- the compiled decoder, and none


COMPILED_DECODER = "mcp_blackbox/analyzer/wire/_tnetstring_compiled."
READER_STATE = (
    "import json\n"
    "from mcp_blackbox.analyzer.wire import tnetstring_reader as r\n"
    "from mcp_blackbox.analyzer import analyze\n"
    "result = analyze(['capture.flows'])\n"
    "print(json.dumps({'compiled': r.COMPILED, 'reader': r.__file__, 'calls': len(result.calls)}))\n"
)


def test_the_wheel_holds_the_compiled_decoder_and_uses_it(installed: Installed, capture: dict[str, Any]) -> None:
    """Built here, where a C compiler is: mypyc's extension is in the wheel (tagged for this platform) and the
    installed reader runs it."""
    assert any(n.startswith(COMPILED_DECODER) and n.endswith(".so") for n in installed.wheel_names)
    assert not installed.wheel.name.endswith("-none-any.whl"), installed.wheel.name
    seen = json.loads(succeeded(installed.python(READER_STATE)).stdout)
    assert seen["compiled"] is True and Path(seen["reader"]).is_relative_to(installed.site_packages), seen
    assert seen["calls"] == EXPECTED_CALLS


def test_without_a_c_compiler_the_sdist_builds_a_wheel_that_runs_the_source(
    installed: Installed, capture: dict[str, Any], tmp_path: Path
) -> None:
    """The sdist on a machine without a compiler (CC that fails): the build says why and goes on; the wheel has no
    extension, and its reader decodes the capture in Python."""
    [sdist] = installed.wheel.parent.glob("*.tar.gz")
    env = {**installed.env(), "CC": "/bin/false", "LDSHARED": "/bin/false"}
    wheel_dir = tmp_path / "wheel"
    build = run(
        [installed.bin / "python", "-m", "pip", "wheel", "--no-deps", "--verbose", "-w", wheel_dir, sdist],
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    succeeded(build)
    assert "no compiled decoder" in build.stdout + build.stderr, quoted(build)
    [wheel] = wheel_dir.glob("*.whl")
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if n.endswith(".so")], archive.namelist()
        archive.extractall(unpacked)
    # The unpacked wheel first on the path: its modules, with the installed venv's dependencies.
    source_env = {**installed.env(), "PYTHONPATH": str(unpacked)}
    done = run([installed.bin / "python", "-c", READER_STATE], cwd=installed.workdir, env=source_env)
    seen = json.loads(succeeded(done).stdout)
    assert seen["compiled"] is False and Path(seen["reader"]).is_relative_to(unpacked), seen
    assert seen["calls"] == EXPECTED_CALLS


# ---------------------------------------------------------------- the checkout's addon without the package


def test_checkout_addon_runs_in_a_mitmproxy_without_mcp_blackbox(installed: Installed) -> None:
    """`mitmdump -s addon/mcp_recorder.py` from a checkout needs only mitmproxy: the package and the
    dependencies mitmproxy does not share are removed from the venv first (this test runs last), and the
    addon must still record and judge."""
    pip = [installed.bin / "python", "-m", "pip"]
    # jinja2 stays: mitmproxy needs it too (through flask), as `pip check` confirms.
    succeeded(run([*pip, "uninstall", "-y", "mcp-blackbox", "jsonschema", "pandas", "psutil"], cwd=installed.workdir))
    succeeded(run([*pip, "check"], cwd=installed.workdir))
    for module in ("mcp_blackbox.analyzer", "jsonschema", "pandas", "psutil"):
        gone = installed.python(f"import {module}")
        assert gone.returncode != 0 and "ModuleNotFoundError" in gone.stderr, quoted(gone)
    workdir = installed.workdir
    log, listen, flows = workdir.parent / "checkout-addon.log", workdir / "listen2.json", workdir / "checkout.flows"
    with start_server("stateful") as server:
        argv = [installed.bin / "mitmdump", "-s", REPO / "addon" / "mcp_recorder.py", "--mode"]
        argv += [f"reverse:{server.url('')}", "-p", "0", "--set", f"mcp_listen_file={listen}", "-w", flows]
        with recording(installed, argv, listen, log) as port:
            steps = [{"op": "call", "tool": "tool_error", "args": {"message": "no"}}]
            run_py_client(f"http://127.0.0.1:{port}/mcp", steps, mode="legacy", timeout=30, step_timeout=10)
    console = log.read_text(errors="replace")
    assert "traffic is unaffected" not in console and "Traceback" not in console, console
    assert "tools/call tool_error" in console and "FAILED: TOOL_ERROR" in console, console
    # Without psutil the process lookup cannot run: said once, and the traffic is recorded all the same.
    assert console.count("processes are not recorded") == 1, console
    from mcp_blackbox.analyzer import analyze  # the checkout's analyzer reads what the checkout's addon wrote

    calls = analyze([flows]).calls
    assert {call["tool"]: call["outcome"] for call in calls if call["tool"]} == {"tool_error": "TOOL_ERROR"}
    assert all(call["client"]["process"] is None for call in calls)
