"""Every outcome, layer, flag, retry origin, confidence and safety name is spelled once: in the vocabulary.

Other modules, the template and the page's script use the vocabulary's members or receive it as data.
A string literal elsewhere that equals one of its names is a second copy of a rule waiting to disagree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mcp_blackbox.analyzer.model import vocabulary
from mcp_blackbox.analyzer.model.vocabulary import (
    NOT_FAILURES,
    Confidence,
    Flag,
    Layer,
    Outcome,
    RetryOrigin,
    Safety,
    vocabulary_data,
)
from mcp_blackbox.analyzer.wire.metadata import StreamEnd

REPO = Path(__file__).resolve().parents[2]
VOCABULARY_FILE = Path(vocabulary.__file__).resolve()
ENUMS = (Outcome, Layer, Flag, RetryOrigin, Confidence, Safety)
NAMES = {member.value for enum in ENUMS for member in enum}
SOURCES = sorted(
    path
    for folder in ("addon", "analyzer", "cli", "templates")
    for path in (REPO / folder).rglob("*")
    if path.suffix in (".py", ".js", ".j2", ".css") and path.resolve() != VOCABULARY_FILE
)


def python_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]


def script_literals(path: Path) -> list[tuple[int, str]]:
    """Quoted names in a script or template, and the upper-case ones anywhere (legend text included)."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for name in NAMES:
            quoted = re.search(rf"""["']{re.escape(name)}["']""", line)
            bare = name.isupper() and re.search(rf"\b{re.escape(name)}\b", line)
            if quoted or bare:
                found.append((number, name))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_spells_a_vocabulary_name(path: Path) -> None:
    found = python_literals(path) if path.suffix == ".py" else script_literals(path)
    assert not found, f"{path.relative_to(REPO)} spells vocabulary names itself: {found}"


# The wire's names that the addon writes and the analyzer reads back, each spelled in the one module that
# defines it (the hyphenated stream endings cannot mean anything else; "complete" and "killed" can).
WIRE_NAMES = {
    **{end.value: "analyzer/wire/metadata.py" for end in StreamEnd if "-" in end.value},
    "notifications/progress": "analyzer/wire/jsonrpc.py",
    "notifications/cancelled": "analyzer/wire/jsonrpc.py",
}


@pytest.mark.parametrize("path", [p for p in SOURCES if p.suffix == ".py"], ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_spells_a_wire_name_its_format_defines(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(REPO).as_posix()
    found = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in WIRE_NAMES and WIRE_NAMES[node.value] != where
    ]
    assert not found, f"{where} spells names of the wire layer itself: {found}"


def test_the_scan_sees_a_spelled_name(tmp_path: Path) -> None:
    """The check above would notice a copy: it is not vacuous."""
    module = tmp_path / "copy.py"
    module.write_text('OK = {"SUCCESS", "TOOL_SUCCESS"}\nif origin == "agent-retry": pass\n')
    assert {name for _, name in python_literals(module)} == {"SUCCESS", "TOOL_SUCCESS", "agent-retry"}
    page = tmp_path / "page.js"
    page.write_text('const OK = new Set(["SUCCESS"]);\n// a swatch for NO_RESPONSE\n')
    assert {name for _, name in script_literals(page)} == {"SUCCESS", "NO_RESPONSE"}


def test_every_outcome_has_a_layer_colour_and_description() -> None:
    for outcome in Outcome:
        assert outcome.layer in Layer
        assert re.fullmatch(r"#[0-9a-f]{6}", outcome.colour)
        assert outcome.description
    assert len({o.colour for o in Outcome}) == len(Outcome), "two outcomes share a colour"


def test_not_failures_are_successes_acceptance_and_input_rounds() -> None:
    assert {o for o in Outcome if not o.is_failure} == NOT_FAILURES
    assert {Outcome.SUCCESS, Outcome.TOOL_SUCCESS, Outcome.ACCEPTED, Outcome.INPUT_REQUIRED} == NOT_FAILURES
    assert Outcome.CANCELLED.is_failure and Outcome.TOOL_ERROR.is_failure


def test_page_data_carries_the_whole_vocabulary() -> None:
    data = vocabulary_data()
    assert [o["name"] for o in data["outcomes"]] == [o.value for o in Outcome]
    assert {o["name"] for o in data["outcomes"] if not o["failure"]} == {o.value for o in NOT_FAILURES}
    assert [f["name"] for f in data["flags"]] == [f.value for f in Flag]
    assert {o["name"] for o in data["origins"] if not o["failure_retry"]} == {"protocol-fallback", "mrtr-round"}
    assert [s["name"] for s in data["safety"] if s["unsafe"]] == [Safety.UNSAFE.value]
