"""What a prompt or resource request names reaches the export and the OpenTelemetry spans."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_blackbox.analyzer.outputs.analysis import analyze
from mcp_blackbox.analyzer.outputs.export import iter_records
from tests.analyzer.flows import exchange, result, rpc, write

KEY = "sk-live-0123456789abcdef0123"


def capture(tmp_path: Path) -> str:
    flows = [
        exchange(rpc(1, "prompts/get", {"name": "greet", "arguments": {"who": "x"}}), body=result(1, {"messages": []})),
        exchange(rpc(2, "resources/read", {"uri": f"https://files.example/doc.txt?api_key={KEY}"}),
                 body=result(2, {"contents": []})),
        exchange(rpc(3, "tools/call", {"name": "echo", "arguments": {}}), body=result(3, {"content": []})),
    ]  # fmt: skip
    return str(write(tmp_path, *flows))


def test_the_export_names_the_prompt_and_the_resource(tmp_path: Path) -> None:
    analysis = analyze([capture(tmp_path)])
    prompt, resource, tool = analysis.calls
    assert (prompt["prompt"], prompt["resource_uri"], prompt["tool"]) == ("greet", None, None)
    assert resource["prompt"] is None and resource["resource_uri"].startswith("https://files.example/doc.txt?")
    assert (tool["prompt"], tool["resource_uri"], tool["tool"]) == (None, None, "echo")
    redacted = list(iter_records(analysis))
    assert KEY not in str(redacted[1]["resource_uri"]) and "api_key=" in redacted[1]["resource_uri"]
    assert KEY in resource["resource_uri"], "unredacted in the analysis itself, as the rest of the records"


def test_spans_carry_them_as_the_conventions_name_them(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from mcp_blackbox.analyzer.outputs.otlp import iter_spans

    spans = [span for batch in iter_spans(analyze([capture(tmp_path)])) for span in batch]
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"prompts/get greet", "resources/read", "tools/call echo"}
    assert by_name["prompts/get greet"].attributes["gen_ai.prompt.name"] == "greet"
    uri = by_name["resources/read"].attributes["mcp.resource.uri"]
    assert uri.startswith("https://files.example/doc.txt?") and KEY not in uri
