"""What the decoding workers send back (analyzer/model/pickling.py): every record comes back equal, each
field in place, through the faster pickling."""

from __future__ import annotations

import pickle
from pathlib import Path

from mcp_blackbox.analyzer.read.parallel import Segment, decode_segment

SAMPLES = Path(__file__).resolve().parents[2] / "sample_captures"


def test_a_decoded_segment_comes_back_equal_through_pickle() -> None:
    for capture in sorted(SAMPLES.glob("*.flows")):
        sent = decode_segment(Segment(str(capture)))
        received = pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL))
        assert received.decoded == sent.decoded and received.marks == sent.marks, capture.name
        messages = [m for d in sent.decoded for m in d.extracted.messages]
        assert messages and any(m.detail is not None for m in messages), "requests' facts went through too"
        # Each through the class's own __reduce__ (a dataclass's generated pickling would also be equal).
        first = sent.decoded[0]
        for record in (first, first.exchange, first.extracted, messages[0]):
            assert type(record).__reduce__(record)[0] is type(record)
