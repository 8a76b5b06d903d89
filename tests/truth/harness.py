"""What every family of the truth corpus shares: the plan, the check that the clients saw what the labels
say, the recorder, and the labels a gateway or bridge adds.

A family (tests/truth/record_corpus.py, FAMILIES) records out/<name>.flows through real processes and
returns what each client saw. Every tools/call carries its label in params._meta (tests/truth/labels.py).
Where a gateway or bridge re-sends a request the client sent once, both copies carry the client's label;
the family then writes, from the gateway's or bridge's own log, the label of each copy it made into
out/<name>.relabel.json ({flow id: label}), which the scorer reads instead of the body's.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mitmproxy import io as flow_io
from mitmproxy.http import HTTPFlow

from tests.support.proxy import start_mitmdump
from tests.truth.labels import Label

if TYPE_CHECKING:
    from tests.truth.driver import Attempt

RELABEL_SUFFIX = ".relabel.json"


@dataclass(frozen=True)
class Plan:
    clients: int = 24  # family a: concurrent sessions per round
    failures: int = 8  # family a: how many of them get a 503
    rounds: int = 2  # family a
    runs: int = 3  # families b, c and d

    @classmethod
    def quick(cls) -> Plan:
        return cls(clients=10, failures=3, rounds=1, runs=1)


class ScenarioFailed(RuntimeError):
    """The clients did not see what the scenario is meant to show: its labels would not be the truth."""


def expect(condition: bool, what: str, attempts: list[Attempt]) -> None:
    if not condition:
        seen = [(a.label.key, a.outcome, a.error) for a in attempts]
        raise ScenarioFailed(f"{what}; the clients saw: {seen}")


@contextmanager
def recording(upstream: str, name: str, out: Path) -> Iterator[str]:
    """mitmdump with the addon in reverse mode in front of ``upstream`` (http://host:port); yields its base
    URL (no path), and on the way out stops mitmdump (SIGINT: the flow file is complete) and keeps its
    capture as out/<name>.flows."""
    with tempfile.TemporaryDirectory(prefix="mcp-truth-") as tmp:
        proxy = start_mitmdump(f"reverse:{upstream}", Path(tmp), name=name)
        try:
            yield proxy.url
        finally:
            code = proxy.stop()
        if code != 0:
            raise RuntimeError(f"mitmdump exited with {code}; log:\n{proxy.log()}")
        shutil.copyfile(proxy.flow_file, out / f"{name}.flows")


def write_relabels(out: Path, name: str, labels: dict[str, Label]) -> None:
    """The labels of copies a gateway or bridge made, by flow id (read from its log, not the analyzer)."""
    path = out / f"{name}{RELABEL_SUFFIX}"
    path.write_text(json.dumps({flow_id: asdict(label) for flow_id, label in labels.items()}, indent=1) + "\n")


def read_relabels(capture: Path) -> dict[str, Label]:
    path = capture.with_suffix(RELABEL_SUFFIX)
    if not path.exists():
        return {}
    raw: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return {flow_id: Label(**fields) for flow_id, fields in raw.items()}


def read_flows(capture: Path) -> list[HTTPFlow]:
    """Every HTTP flow of a capture, in the order the requests started (a capture holds them as they ended)."""
    with capture.open("rb") as stream:
        flows = [flow for flow in flow_io.FlowReader(stream).stream() if isinstance(flow, HTTPFlow)]
    return sorted(flows, key=lambda flow: flow.request.timestamp_start)


def tools_call(flow: HTTPFlow) -> tuple[dict[str, Any], Label | None] | None:
    """The tools/call a POST carries (the last one of a batch) with the truth label in its _meta, if any."""
    if flow.request.method != "POST":
        return None
    try:
        body = json.loads(flow.request.get_content(strict=False) or b"null")
    except ValueError:
        return None
    found = None
    for message in body if isinstance(body, list) else [body]:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            found = (message, Label.from_params(message.get("params")))
    return found
