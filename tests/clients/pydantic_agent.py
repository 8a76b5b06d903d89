"""An agent as people write it: pydantic-ai with an MCP toolset over Streamable HTTP, nothing about recording.

    python -m tests.clients.pydantic_agent --url URL [--tool NAME ...]

The model is pydantic-ai's TestModel (no LLM): it calls the named tools once each with arguments made from
their schemas, then answers. Prints one JSON object: the tool returns the agent got and its output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.test import TestModel


async def run(url: str, tools: list[str]) -> dict[str, object]:
    agent = Agent(TestModel(call_tools=tools), toolsets=[MCPToolset(url, read_timeout=10)])
    result = await agent.run("Use the tools.")
    returns = [
        {"tool": part.tool_name, "outcome": part.outcome, "content": str(part.content)[:200]}
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    return {"tool_returns": returns, "output": str(result.output)[:500]}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.pydantic_agent")
    parser.add_argument("--url", required=True)
    parser.add_argument("--tool", action="append", default=None)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.url, args.tool or ["echo"]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
