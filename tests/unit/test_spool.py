"""The spool a windowed stream keeps its settled records in (analyzer/across/spool.py): a list's uses, from disk."""

from __future__ import annotations

import pytest

from mcp_blackbox.analyzer.across.call_stream import Settled
from mcp_blackbox.analyzer.across.spool import Spool
from mcp_blackbox.analyzer.model.vocabulary import RetryOrigin


def test_items_come_back_as_appended_by_index_slice_and_in_order_while_more_are_appended() -> None:
    spool: Spool[Settled] = Spool()
    assert len(spool) == 0 and not spool and list(spool) == []
    records = [Settled(RetryOrigin.APP_RETRY if n % 2 else None, {"retry_group": f"g{n}", "n": n}) for n in range(50)]  # type: ignore[arg-type]
    seen: list[Settled] = []
    for n, record in enumerate(records):
        spool.append(record)
        seen += spool[len(seen) :]  # what check reads: the ones settled since it last looked
        assert len(spool) == n + 1
    assert seen == records == list(spool) == spool[:]
    assert spool[0] == records[0] and spool[-1] == records[-1] and spool[10:13] == records[10:13]
    assert spool[7].origin is RetryOrigin.APP_RETRY, "an enum comes back as itself"
    reading = iter(spool)
    first = next(reading)
    spool.append(records[0])  # appended while a reader is part way
    assert [first, *reading] == [*records, records[0]]
    with pytest.raises(IndexError):
        spool[51]
    spool.close()
    assert len(spool) == 0
