"""The CI gate: which calls have an outcome, flag or failing layer named in ``--fail-on``.

Names are case-insensitive. An outcome or a flag matches the calls that have it. A layer
stands for the layer that failed: it matches the calls whose outcome is in that layer and is
not a success, so ``--fail-on transport`` does not fail on every accepted notification.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable
from typing import Any

from mcp_blackbox.analyzer.vocabulary import Flag, Layer, Outcome, is_failure

OUTCOMES = tuple(Outcome)
LAYERS = tuple(Layer)
FLAGS = tuple(Flag)
DEFAULT_FAIL_ON = (*(o for o in Outcome if o.is_failure), Flag.UNSAFE_RETRY, Flag.DUPLICATE_EXECUTION)


def canonical_name(name: str) -> str:
    """The name as outcomes, flags and layers are spelled; ValueError naming the valid ones."""
    spelled = name.strip()
    if spelled.upper() in OUTCOMES or spelled.upper() in FLAGS:
        return spelled.upper()
    if spelled.lower() in LAYERS:
        return spelled.lower()
    raise ValueError(f"unknown name {spelled!r}\n{valid_names()}")


def valid_names(width: int = 80) -> str:
    def listed(title: str, names: Iterable[str]) -> str:
        return textwrap.fill(f"{title}: {', '.join(names)}", width, subsequent_indent="  ", break_on_hyphens=False)

    return "\n".join((listed("outcomes", OUTCOMES), listed("flags", FLAGS), listed("layers", LAYERS)))


def parse_fail_on(text: str) -> list[str]:
    """``"http_error, UNSAFE_RETRY"`` -> ``["HTTP_ERROR", "UNSAFE_RETRY"]``; ValueError if a name is unknown."""
    names = [canonical_name(part) for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError(f"names nothing\n{valid_names()}")
    return names


def matching_calls(calls: Iterable[dict[str, Any]], fail_on: Iterable[str]) -> list[dict[str, Any]]:
    """The calls (export records) that have a named outcome or flag, or failed in a named layer."""
    names = {canonical_name(name) for name in fail_on}
    outcomes = names & set(OUTCOMES)
    flags = names & set(FLAGS)
    layers = names & set(LAYERS)
    return [
        call
        for call in calls
        if call["outcome"] in outcomes
        or not flags.isdisjoint(call["flags"])
        or (call["layer"] in layers and is_failure(call["outcome"]))
    ]


def call_line(call: dict[str, Any], source: str, width: int = 80) -> str:
    """One call: id, method, tool, JSON-RPC id, outcome, flags, source; what overflows goes on an indented line."""
    parts = [call["call_id"], call["method"] or "(response)"]
    if call["tool"]:
        parts.append(call["tool"])
    parts += [f"id={call['jsonrpc_id']}", call["outcome"]]
    if call["flags"]:
        parts.append(f"[{','.join(call['flags'])}]")
    parts.append(source)
    return textwrap.fill(
        " ".join(str(part) for part in parts),
        width,
        subsequent_indent="    ",
        break_on_hyphens=False,
        break_long_words=True,
    )


def short_sources(sources: Iterable[str]) -> dict[str, str]:
    """Each capture by its file name, or by its path where two share a name."""
    sources = list(dict.fromkeys(sources))
    names = [os.path.basename(source) or source for source in sources]
    return {s: n if names.count(n) == 1 else s for s, n in zip(sources, names, strict=True)}
