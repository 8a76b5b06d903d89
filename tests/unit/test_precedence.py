"""Outcome precedence is one ordered list in the code (classify.OVERRIDES), the same for HTTP and stdio,
and ARCHITECTURE states that list in the code's order (issue 20: the precedence was described in three
places, and stdio re-implemented the ladder)."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_blackbox.analyzer.calls import classify
from mcp_blackbox.analyzer.model.vocabulary import Outcome

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"


def precedence_section() -> str:
    text = ARCHITECTURE.read_text()
    start = text.index("#### Outcome precedence")
    return text[start : text.index("\n#", start + 1)]


def test_architecture_lists_the_overrides_in_the_codes_order() -> None:
    listed = re.findall(r"^ {3}\d+\. (.+?):", precedence_section(), flags=re.MULTILINE)
    assert listed == [name for name, _ in classify.OVERRIDES]


def test_the_outcome_table_is_in_the_order_of_the_vocabulary() -> None:
    text = ARCHITECTURE.read_text()
    table = text[text.index("### Outcomes") : text.index("#### Outcome precedence")]
    rows = re.findall(r"^\| ([A-Z_]+) \|", table, flags=re.MULTILINE)
    assert rows == [outcome.value for outcome in Outcome]


def test_every_transport_goes_through_the_same_overrides() -> None:
    """No reading of the answer applies an override itself: the only calls of an override are OVERRIDES'."""
    source = Path(classify.__file__).read_text()
    for _, override in classify.OVERRIDES:
        calls = re.findall(rf"\b{override.__name__}\(", source)
        assert calls == [f"{override.__name__}("], f"{override.__name__} is called outside OVERRIDES"
