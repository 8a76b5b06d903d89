"""Call ids stay unique within one analysis (analyzer/across/call_ids.py): a capture loaded twice, or two flows
whose ids share their first 48 bits, give the later calls ``~2``, ``~3``; the ids given are remembered in 8
bytes each (``TakenIds``), exactly."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from mcp_blackbox.analyzer import analyze
from mcp_blackbox.analyzer.across.call_ids import TakenIds, _number

SAMPLE = Path(__file__).resolve().parents[2] / "sample_captures" / "py-2025-session-tools.flows"


def test_taken_ids_answer_as_a_set_across_merges_and_places_past_64_bits() -> None:
    taken, reference = TakenIds(), set()
    taken.MERGE_AT = 64  # many merges into the sorted array
    draw = random.Random(7)
    for _ in range(5000):
        # 12-bit flow ids: they collide often; places 1, 2 and one past 65,535.
        key = _number(f"{draw.randrange(1 << 12):012x}", draw.choice([1, 1, 2, 70_000]))
        assert taken.add(key) is (key not in reference)
        reference.add(key)
    assert len(taken.sorted) > 1000 and taken.wide, "both the array and the wide keys were used"
    assert len(taken.sorted) + len(taken.latest) + len(taken.wide) == len(reference)


def test_a_capture_loaded_twice_gets_ids_unique_within_the_analysis(tmp_path: Path) -> None:
    copy = tmp_path / "copy.flows"
    shutil.copy(SAMPLE, copy)
    once = [c.call_id for c in analyze([SAMPLE]).call_objects]
    twice = [c.call_id for c in analyze([SAMPLE, copy]).call_objects]
    assert len(set(twice)) == len(twice) == 2 * len(once)
    assert set(once) < set(twice), "the first file's calls keep their ids"
    assert all(i.startswith(tuple(once)) for i in set(twice) - set(once)), "the copy's: the same, suffixed"
