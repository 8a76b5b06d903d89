"""The one place an output decides what it shows of a peer's words: a ``Redactor``.

Every output (the export and everything built on its records, the report, the summaries, OTLP, HAR) takes
one at its boundary and prints a peer's text only through it; none asks "redact or not?" itself.
``Redactor.of(redact)`` gives the default one, which replaces secrets, or ``AsCaptured`` for
``--no-redact``, which keeps the text as the capture has it. What counts as a secret is the rules of
analyzer/redaction/redact.py; which fields of a record a peer wrote is said here, once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from mcp_blackbox.analyzer.model.contract import CallRecord, ClientRecord, FindingRecord, StderrRecord
from mcp_blackbox.analyzer.model.vocabulary import Transport
from mcp_blackbox.analyzer.redaction.redact import redact_headers, redact_text, redact_url

# Most texts (an evidence line, "HTTP 200", a tool's usual error, a client's name) recur across calls: each is
# redacted once. The markers are a pure function of the text (redact.MARKERS), so a remembered answer is the
# answer. Long texts (a body) are not remembered: the cache must not hold a capture's payloads.
_redacted_text = functools.lru_cache(maxsize=1 << 16)(redact_text)
REMEMBERED_TEXT = 1024  # characters


class Redactor:
    """Secrets replaced by markers: what every output shows by default."""

    redacts = True
    # How a file that holds this redactor's output is created: None, as open() creates one (0666 less the
    # umask; a file replaced keeps its mode). The writer (cli/output_files.py's Output) asks, never decides.
    file_mode: int | None = None

    @staticmethod
    def of(redact: bool) -> Redactor:
        return REDACTED if redact else AS_CAPTURED

    def text(self, text: str) -> str:
        return _redacted_text(text) if len(text) <= REMEMBERED_TEXT else redact_text(text)

    def url(self, url: str) -> str:
        return redact_url(url)

    def headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        return redact_headers(dict(headers))

    def maybe(self, text: str | None) -> str | None:
        return self.text(text) if text is not None else None

    def call_record(self, record: CallRecord) -> CallRecord:
        """``record`` with every field a peer wrote passed through this redactor, in place; returned for
        chaining. What servers and clients wrote may hold a secret: evidence and error messages quote
        servers, a URI's query or a stdio server's command line may carry a key, a User-Agent or a client's
        name is the peer's own text, a server's stderr may print a token. Everything else in a record the
        analysis made itself (outcomes, flags, ids, times, counts)."""
        record["evidence"] = [self.text(line) for line in record["evidence"]]
        record["error_message"] = self.maybe(record["error_message"])
        record["reason"] = self.text(record["reason"]) if record["reason"] else record["reason"]
        record["result_excerpt"] = self.maybe(record["result_excerpt"])
        if record["ending"] and record["ending"]["detail"]:
            record["ending"]["detail"] = self.text(record["ending"]["detail"])
        if record["resource_uri"]:  # a URI's query may carry a key, as a request line's may
            record["resource_uri"] = self.url(record["resource_uri"])
        if record["client"]:
            record["client"] = self.client(record["client"])
        # A stdio server's command line may carry a key (--api-key ...): redacted as text.
        stdio = record["carrier"] == Transport.STDIO
        record["endpoint"] = (self.text if stdio else self.url)(record["endpoint"])
        if record["stderr"]:  # a server's log may print a token
            record["stderr"] = [StderrRecord(t=line["t"], text=self.text(line["text"])) for line in record["stderr"]]
        return record

    def client(self, client: ClientRecord) -> ClientRecord:
        """A client's record with the text its peer chose (a User-Agent, a clientInfo name) redacted."""
        # Every text field, the analysis's own names (lineage, unit, joined) too: they quote a session id
        # and an address, which are the peer's.
        return ClientRecord(
            lineage=self.text(client["lineage"]),
            unit=self.text(client["unit"]),
            address=self.maybe(client["address"]),
            session=self.maybe(client["session"]),
            user_agent=self.maybe(client["user_agent"]),
            client_info=self.maybe(client["client_info"]),
            protocol_version=self.maybe(client["protocol_version"]),
            joined=self.text(client["joined"]),
            process=client["process"],  # what the operating system said of a local process: no peer's text
        )

    def stream_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """A refused stream or DELETE (CallStream.stream_events): ``what`` quotes the server."""
        return {**event, "what": self.text(event["what"])}

    def finding(self, finding: FindingRecord) -> FindingRecord:
        """A finding across calls (analyzer/across/patterns): its text quotes what servers said."""
        return {
            **finding,
            "title": self.text(finding["title"]),
            "summary": self.text(finding["summary"]),
            "evidence": [self.text(line) for line in finding["evidence"]],
        }


class AsCaptured(Redactor):
    """``--no-redact``: a peer's text as the capture has it, secrets included."""

    redacts = False
    # It holds the capture's secrets, as the flow file does: readable and writable by its owner only, whatever
    # the umask, a file it replaces too (as the recorder's capture files, SECURITY.md).
    file_mode = 0o600

    def text(self, text: str) -> str:
        return text

    def url(self, url: str) -> str:
        return url

    def headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        return dict(headers)

    def call_record(self, record: CallRecord) -> CallRecord:
        return record

    def client(self, client: ClientRecord) -> ClientRecord:
        return client

    def stream_event(self, event: dict[str, Any]) -> dict[str, Any]:
        return event

    def finding(self, finding: FindingRecord) -> FindingRecord:
        return finding


REDACTED = Redactor()
AS_CAPTURED = AsCaptured()
