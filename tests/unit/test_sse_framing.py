from mcp_blackbox.analyzer.wire.sse_framing import split_sse


def test_events_end_at_blank_lines_with_any_line_ending() -> None:
    body = b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n"
    events, rest = split_sse(body)
    assert [e.data for e in events] == ["a", "b", "c"]
    assert body[rest:] == b"data: d\n"


def test_fields_comments_and_multiline_data() -> None:
    body = b": keep-alive\n\nid: 7\nevent: endpoint\nretry: 3000\ndata: one\ndata:two\n: note\n\n"
    events, rest = split_sse(body)
    assert len(events) == 1, "a block of only comments is not an event"
    event = events[0]
    assert (event.id, event.event, event.retry, event.data, event.comments) == ("7", "endpoint", 3000, "one\ntwo", 1)
    assert event.end == len(body) == rest


def test_priming_event_and_offsets() -> None:
    body = b"id: 1\ndata:\n\ndata: {}\n\n"
    events, _ = split_sse(body)
    assert events[0].is_priming and not events[1].is_priming
    assert body[events[1].start : events[1].end] == b"data: {}\n\n"


def test_trailing_cr_waits_for_its_lf() -> None:
    events, rest = split_sse(b"data: x\r\n\r")
    assert events == [] and rest == 0


def test_bom_and_invalid_utf8_do_not_raise() -> None:
    events, _ = split_sse(b"\xef\xbb\xbfdata: \xff\xfe\n\n")
    assert events[0].data == "\ufffd\ufffd"


def test_bad_retry_is_ignored() -> None:
    events, _ = split_sse(b"retry: soon\ndata: x\n\n")
    assert events[0].retry is None
