"""Record the stdio sample capture: one session of a stdio MCP server, through ``mcp-blackbox record --stdio``.

    .venv/bin/python sample_captures/record_stdio_sample.py
    make samples

The official Python SDK stdio client (tests/clients/py_stdio_client.py) starts ``mcp-blackbox record --stdio``
in place of the TypeScript SDK test server (tests/clients/ts/stdio_server.mjs, run as ``node
tests/clients/ts/stdio_server.mjs`` from the repository), and calls its tools: ``echo``; ``chatty``, which logs
an info line on stderr; ``swallow``, which logs an exception's stack on stderr and returns an empty success;
``log_to_stdout``, which prints a line on stdout (the protocol's channel) before its answer; ``echo`` again;
``crash``, which dies mid-call (exit 3). What the client saw is checked (every step answered but the crash)
before the capture is copied to ``sample_captures/stdio-faults.stdio.jsonl`` and the client's output to
``stdio-faults.stdio.client.json``.

Both are written with the checkout's absolute path (the wrapper's ``cwd``, Node's stack frames on stderr)
replaced by ``/repo``, each line's ``bytes`` counted again: a bundled sample names no machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NEUTRAL_REPO = "/repo"  # what the sample says instead of the checkout it was recorded in
NAME = "stdio-faults"
PAUSE = {"op": "pause", "seconds": 0.1}  # after a call that logs on stderr, as an application pauses between calls
STEPS = [
    {"op": "list_tools"},
    {"op": "call", "tool": "echo", "args": {"text": "hello stdio"}},
    {"op": "call", "tool": "chatty", "args": {"text": "a clean call that logs"}},
    PAUSE,
    {"op": "call", "tool": "swallow"},
    PAUSE,
    {"op": "call", "tool": "log_to_stdout"},
    {"op": "call", "tool": "echo", "args": {"text": "after the stray line"}},
    {"op": "call", "tool": "crash", "args": {"how": "exit"}},
]


def neutral(text: str) -> str:
    return text.replace(str(REPO), NEUTRAL_REPO)


def neutralise(capture: Path, client_output: Path) -> None:
    """The checkout's path out of both files, in place. A capture line keeps ``bytes`` equal to its text's
    length in UTF-8 (analyzer/wire/stdio_capture.py ``line_fields``): a truncated line's count moves by as
    much as its kept head did."""
    records = []
    for line in capture.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if isinstance(record.get("cwd"), str):
            record["cwd"] = neutral(record["cwd"])
        if isinstance(record.get("text"), str):
            text = neutral(record["text"])
            record["bytes"] += len(text.encode()) - len(record["text"].encode())
            record["text"] = text
        records.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    capture.write_text("".join(f"{r}\n" for r in records), encoding="utf-8")
    client_output.write_text(neutral(client_output.read_text(encoding="utf-8")), encoding="utf-8")


def main() -> int:
    wrapper = str(Path(sys.executable).with_name("mcp-blackbox"))
    with tempfile.TemporaryDirectory(prefix="stdio-sample-") as tmp:
        capture = Path(tmp) / f"{NAME}.stdio.jsonl"
        server = ["record", "--stdio", "-w", str(capture), "--", "node", "tests/clients/ts/stdio_server.mjs"]
        argv = [sys.executable, "-m", "tests.clients.py_stdio_client", "--command", wrapper]
        argv += ["--args", json.dumps(server), "--steps", json.dumps(STEPS)]
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        seen = json.loads(done.stdout)
        answered = [step["ok"] for step in seen["steps"]]
        calls = [step for step in STEPS if step is not PAUSE]
        if seen["fatal"] is not None or answered != [True] * (len(calls) - 1) + [False]:
            print(f"the client did not see what the sample shows: {answered} {seen['fatal']}", file=sys.stderr)
            return 1
        shutil.copyfile(capture, HERE / capture.name)
        output = {"runs": [{"client": seen["client"], "steps": STEPS, "output": seen}]}
        (HERE / f"{NAME}.stdio.client.json").write_text(json.dumps(output, indent=1) + "\n", encoding="utf-8")
    neutralise(HERE / f"{NAME}.stdio.jsonl", HERE / f"{NAME}.stdio.client.json")
    print(f"wrote sample_captures/{NAME}.stdio.jsonl and {NAME}.stdio.client.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
