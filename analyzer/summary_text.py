"""The terminal summary: counts, then the calls that did not succeed."""

from __future__ import annotations

import textwrap

from analyzer.analysis import Analysis
from analyzer.export import summarize

OK_OUTCOMES = {"SUCCESS", "TOOL_SUCCESS", "ACCEPTED", "INPUT_REQUIRED"}


def summary_text(analysis: Analysis, width: int = 80) -> str:
    summary = summarize(analysis, analysis.calls)
    lines = [
        f"{summary['calls']} calls in {summary['flows_analyzed']} exchanges "
        f"({summary['flows_read']} flows read, {summary['flows_skipped']} skipped)",
    ]
    for title, key in (("outcome", "by_outcome"), ("layer", "by_layer"), ("method", "by_method"), ("tool", "by_tool")):
        if summary[key]:
            lines.append(f"by {title}: " + ", ".join(f"{name} {count}" for name, count in summary[key].items()))
    if summary["flags"]:
        lines.append("flags: " + ", ".join(f"{name} {count}" for name, count in summary["flags"].items()))
    failing = [c for c in analysis.calls if c["outcome"] not in OK_OUTCOMES or c["flags"]]
    if failing:
        lines.append("")
        lines.append("calls to look at:")
        for call in failing:
            what = call["method"] or "(response)"
            if call["tool"]:
                what += f" {call['tool']}"
            flags = f" [{', '.join(call['flags'])}]" if call["flags"] else ""
            lines.append(f"  {call['call_id']} {what} id={call['jsonrpc_id']} {call['outcome']}{flags}")
            if call["evidence"]:
                lines.append(f"    {call['evidence'][-1]}")
    if analysis.retry_groups:
        lines.append("")
        lines.append("retry chains:")
        for group in analysis.retry_groups:
            record = group.record()
            safety = record["safety"] if record["failure_retry"] else "not a failure"
            lines.append(
                f"  {record['retry_group']} {record['origin']} [{record['confidence']}]: "
                f"{' -> '.join(record['members'])} = {record['final_outcome']}, {safety}"
            )
            if record["may_have_run_twice"]:
                lines.append("    the tool may have run twice")
    return "\n".join(_fit(line, width) for line in lines)


def _fit(line: str, width: int) -> str:
    """Counts wrap onto indented lines; anything else too long is cut with an ellipsis."""
    if len(line) <= width:
        return line
    if line.startswith(("by ", "flags: ")):
        return textwrap.fill(line, width, subsequent_indent="    ", break_long_words=True)
    return line[: width - 1] + "…"
