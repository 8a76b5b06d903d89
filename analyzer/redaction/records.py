"""The export's records with their secrets redacted, decided once for every output that writes them
(the JSON and CSV export, pandas, OTLP, HAR's verdicts, the summaries and check).

What servers and clients wrote is what may hold a secret: evidence and error messages quote servers, a
URI's query or a stdio server's command line may carry a key, a User-Agent or a client's name is the
peer's own text, and a server's stderr may print a token. Everything else in a record the analysis made
itself (outcomes, flags, ids, times, counts).
"""

from __future__ import annotations

import functools

from mcp_blackbox.analyzer.model.contract import CallRecord, ClientRecord, StderrRecord
from mcp_blackbox.analyzer.model.vocabulary import Transport
from mcp_blackbox.analyzer.redaction.redact import redact_text, redact_url

# Most evidence lines ("POST /mcp", "HTTP 200", a tool's usual error) recur across calls: each is redacted once.
_redacted_line = functools.lru_cache(maxsize=1 << 16)(redact_text)


def redact_call_record(record: CallRecord) -> CallRecord:
    """``record`` with every field a peer wrote redacted, in place; returned for chaining."""
    record["evidence"] = [_redacted_line(line) for line in record["evidence"]]
    record["error_message"] = _redacted_or_none(record["error_message"])
    record["reason"] = redact_text(record["reason"]) if record["reason"] else record["reason"]
    record["result_excerpt"] = _redacted_or_none(record["result_excerpt"])
    if record["ending"] and record["ending"]["detail"]:
        record["ending"]["detail"] = redact_text(record["ending"]["detail"])
    if record["resource_uri"]:  # a URI's query may carry a key, as a request line's may
        record["resource_uri"] = redact_url(record["resource_uri"])
    if record["client"]:
        record["client"] = redact_client(record["client"])
    # A stdio server's command line may carry a key (--api-key ...): redacted as text.
    stdio = record["carrier"] == Transport.STDIO
    record["endpoint"] = (redact_text if stdio else redact_url)(record["endpoint"])
    if record["stderr"]:  # a server's log may print a token
        record["stderr"] = [StderrRecord(t=line["t"], text=redact_text(line["text"])) for line in record["stderr"]]
    return record


def redact_client(client: ClientRecord) -> ClientRecord:
    """A client's record with the text its peer chose (a User-Agent, a clientInfo name) redacted."""
    # Every text field, the analysis's own names (lineage, unit, joined) too: they quote a session id
    # and an address, which are the peer's.
    return ClientRecord(
        lineage=redact_text(client["lineage"]),
        unit=redact_text(client["unit"]),
        address=_redacted_or_none(client["address"]),
        session=_redacted_or_none(client["session"]),
        user_agent=_redacted_or_none(client["user_agent"]),
        client_info=_redacted_or_none(client["client_info"]),
        protocol_version=_redacted_or_none(client["protocol_version"]),
        joined=redact_text(client["joined"]),
    )


def _redacted_or_none(text: str | None) -> str | None:
    return redact_text(text) if text is not None else None
