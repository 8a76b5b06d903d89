"""Truth family "agent": a pydantic-ai agent against a FastMCP server, both real ecosystem peers.

    record_family(name, out, plan)   (the RecordFamily of tests/truth/record_corpus.py)

The server is tests/truth/peers/fastmcp_server.py (the `fastmcp` package) in its own process; the client
is pydantic-ai's MCPToolset (built on the fastmcp client) driven by a scripted FunctionModel, so no LLM
decides anything and the scenario is the same every time. pydantic-ai turns an isError result into a
ModelRetry, and the model re-calls the tool: an agent's retry with changed arguments, which nothing in
this family sends on purpose; the framework does it. Per round (plan.runs rounds):

  1. one conversation: lookup(unknown order) -> isError; the agent re-calls lookup(known order)
     (retry, agent-retry); then add_note (a write, no readOnlyHint) once;
  2. ~0.2 s later a separate conversation (its own toolset: a new connection and session) asks the
     same thing and does the same: look-alikes of 1, never linked to it (independent);
  3. CONCURRENT_RUNS conversations at once, each with its own toolset, all with the same arguments:
     each one's re-call is a retry of its own first call only.

Labels: every tools/call goes through MCPToolset's process_tool_call hook, which passes the label as
request-level ``_meta`` (``call_tool(name, args, metadata=...)``); the hook derives it from what this
conversation already sent (a call after an isError of the same tool is its retry) and logs each call
with what the client saw, which `expect` then checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.mcp import CallToolFunc, MCPToolset, ToolResult
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.processes import stop_process, wait_for_port_file, wait_listening
from tests.truth.driver import Attempt, Outcome
from tests.truth.harness import Plan, ScenarioFailed, expect, recording
from tests.truth.labels import Kind, Label

SERVER_SCRIPT = Path(__file__).resolve().parent / "peers" / "fastmcp_server.py"
SERVER_START_TIMEOUT_S = 20.0
LOOKALIKE_GAP_S = 0.2  # step 2 starts a little after step 1 ended
CONCURRENT_RUNS = 5  # step 3
DONE = "done"


# ---------------------------------------------------------------- one conversation


@dataclass
class Conversation:
    """One agent run: what the scripted model asks for, and the log of the tools/call it made.

    Passed as the run's deps, so that the process_tool_call hook labels and logs its calls.
    """

    request: str  # label prefix: "<family>/r<round>/<conversation>"
    unknown: str  # the order the model tries first (isError)
    known: str  # the order it tries after the retry prompt
    note: str
    first_kind: Kind = "first"
    calls: list[Attempt] = field(default_factory=list)
    framework_retries: list[int] = field(default_factory=list)  # ctx.retry per call, as pydantic-ai counted

    def prompt(self) -> str:
        return json.dumps({"unknown": self.unknown, "known": self.known, "note": self.note})

    def label_for(self, tool: str) -> Label:
        """The next call of ``tool``: a retry if this conversation's last call of it answered isError."""
        earlier = [a for a in self.calls if a.tool == tool]
        request = f"{self.request}/{tool}"
        if not earlier:
            return Label(request, 1, self.first_kind)
        if earlier[-1].outcome != "ok":
            return Label(request, len(earlier) + 1, "retry", origin="agent-retry")
        raise ScenarioFailed(f"{request}: the script never calls a tool again after it succeeded")


def _user_prompt(messages: list[ModelMessage]) -> str:
    """The run's prompt: the conversation's plan as JSON (a FunctionModel sees messages, not deps)."""
    for message in messages:
        for part in message.parts if isinstance(message, ModelRequest) else []:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    raise ValueError("no user prompt")


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The "LLM": lookup(unknown); after the retry prompt lookup(known); then add_note; then done.

    pydantic-ai 2 hands a tool's ModelRetry back as that call's ToolReturnPart with outcome "retried"
    (RetryPromptPart is deprecated).
    """
    plan = json.loads(_user_prompt(messages))
    last = messages[-1]
    returns = {(p.tool_name, p.outcome) for p in last.parts if isinstance(p, ToolReturnPart)}
    if ("lookup", "retried") in returns:
        return ModelResponse(parts=[ToolCallPart("lookup", {"order": plan["known"]})])
    if ("lookup", "success") in returns:
        return ModelResponse(parts=[ToolCallPart("add_note", {"order": plan["known"], "note": plan["note"]})])
    if ("add_note", "success") in returns:
        return ModelResponse(parts=[TextPart(DONE)])
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("lookup", {"order": plan["unknown"]})])
    return ModelResponse(parts=[TextPart(f"unexpected turn: {last!r}")])


async def label_and_log(
    ctx: RunContext[Conversation], call_tool: CallToolFunc, name: str, args: dict[str, Any]
) -> ToolResult:
    """MCPToolset's process_tool_call hook: the label goes out as the request's ``_meta``."""
    conversation = ctx.deps
    label = conversation.label_for(name)
    conversation.framework_retries.append(ctx.retry)
    outcome: Outcome = "ok"
    error: str | None = None
    t_start = time.time()
    try:
        return await call_tool(name, args, metadata=label.meta())
    except ModelRetry as exc:  # pydantic-ai's mapping of an isError result (or a protocol error)
        outcome, error = "tool-error", str(exc)
        raise
    except Exception as exc:
        outcome, error = "error", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        conversation.calls.append(Attempt(label, name, dict(args), outcome, error, t_start, time.time()))


async def converse(url: str, conversation: Conversation) -> str:
    """One agent run with its own MCPToolset, so its own fastmcp Client: its own connection and session."""
    toolset: MCPToolset[Conversation] = MCPToolset(url, process_tool_call=label_and_log, read_timeout=10)
    agent = Agent(FunctionModel(scripted_model), deps_type=Conversation, toolsets=[toolset])
    result = await agent.run(conversation.prompt(), deps=conversation)
    return result.output


def check(conversation: Conversation, output: str) -> None:
    """The run did what its labels say: isError, a re-call with other arguments that succeeded, one write."""
    calls = conversation.calls
    seen = [(a.tool, a.outcome) for a in calls]
    expect(output == DONE, f"{conversation.request}: the run ends with {DONE!r}, not {output!r}", calls)
    want = [("lookup", "tool-error"), ("lookup", "ok"), ("add_note", "ok")]
    expect(seen == want, f"{conversation.request}: calls {want}", calls)
    expect(calls[0].arguments != calls[1].arguments, f"{conversation.request}: the re-call changes arguments", calls)
    # pydantic-ai's own count agrees: the second lookup is its first retry of that tool.
    expect(conversation.framework_retries == [0, 1, 0], f"{conversation.request}: ctx.retry 0, 1, 0", calls)


# ---------------------------------------------------------------- the scenario


async def scenario(url: str, name: str, plan: Plan) -> list[Conversation]:
    done: list[Conversation] = []
    for round_no in range(1, plan.runs + 1):
        unknown, known = f"B-{round_no}", f"A-{round_no}"  # other orders per round: rounds do not look alike
        first = Conversation(f"{name}/r{round_no}/first", unknown, known, f"call customer (r{round_no})")
        check(first, await converse(url, first))
        await anyio.sleep(LOOKALIKE_GAP_S)
        later = Conversation(f"{name}/r{round_no}/later", unknown, known, f"refund (r{round_no})", "independent")
        check(later, await converse(url, later))
        done += [first, later]

        crowd = [
            Conversation(f"{name}/r{round_no}/crowd{i}", f"C-{round_no}", f"A-{100 + round_no}", f"crowd {i}")
            for i in range(1, CONCURRENT_RUNS + 1)
        ]
        outputs = await converse_at_once(url, crowd)
        for conversation in crowd:
            check(conversation, outputs[conversation.request])
        done += crowd
    return done


async def converse_at_once(url: str, conversations: list[Conversation]) -> dict[str, str]:
    """Every conversation at the same moment, each with its own toolset; their outputs by request."""
    outputs: dict[str, str] = {}

    async def run_one(conversation: Conversation) -> None:
        outputs[conversation.request] = await converse(url, conversation)

    async with anyio.create_task_group() as tg:
        for conversation in conversations:
            tg.start_soon(run_one, conversation)
    return outputs


@contextmanager
def fastmcp_server() -> Iterator[int]:
    """tests/truth/peers/fastmcp_server.py in its own process; yields its port once it accepts connections."""
    with tempfile.TemporaryDirectory(prefix="mcp-truth-fastmcp-") as tmp:
        port_file, log_file = Path(tmp) / "port", Path(tmp) / "server.log"
        with log_file.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(SERVER_SCRIPT), "--port-file", str(port_file)], stdout=log, stderr=log
            )
        try:
            with log_file.open("rb") as log_reader:
                port = wait_for_port_file(port_file, proc, log_reader, SERVER_START_TIMEOUT_S)
            wait_listening(proc, port, log_file, SERVER_START_TIMEOUT_S, "the FastMCP server")
            yield port
            if proc.poll() is not None:
                raise RuntimeError(f"the FastMCP server exited with {proc.returncode}; log:\n{log_file.read_text()}")
        finally:
            stop_process(proc)


def record_family(name: str, out: Path, plan: Plan) -> list[dict[str, Any]]:
    """Record out/<name>.flows: the FastMCP server behind mitmdump, pydantic-ai agents in this process."""
    with fastmcp_server() as port, recording(f"http://127.0.0.1:{port}", name, out) as url:
        conversations = anyio.run(scenario, f"{url}/mcp", name, plan)
    return [attempt.record() for conversation in conversations for attempt in conversation.calls]
