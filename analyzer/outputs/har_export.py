"""HAR out: the analyzed flows as HAR 1.2, each entry with the verdicts of the calls it carried.

Entries are made by mitmproxy's own HAR writer (``mitmproxy.addons.savehar.SaveHar.flow_entry``) from the
flows read again from the captures (flow files with mitmproxy's FlowReader, HAR entries through the loader's
converter). Two custom fields (HAR 1.2 allows names that start with "_") carry what HAR has no place for:

- ``_mcp``: ``{"calls": [...]}``, for each call whose request or answer the exchange carried: ``call_id``,
  ``carried`` (``request`` or ``answer``), ``method``, ``tool``, ``jsonrpc_id``, ``outcome``, ``layer``,
  ``flags``, ``reason``, as the export has them (redacted alike).
- ``_mcp_blackbox``: the flow as recorded (its id, client connection, exact times, error, the recorder's
  metadata with the per-event times of a stream), which the loader puts back (analyzer/read/load.py,
  ``har_entry_state``): the HAR analyzes as the capture did, with the same call ids.

Secrets are redacted by default as everywhere else: secret headers, cookies and query values are replaced by
a marker that keeps the length and a number per distinct value (so that "the credentials changed after a
401" still reads from the HAR), and secret fields in bodies as in the export.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import IO, Any

from mcp_blackbox.analyzer.outputs.analysis import Analysis
from mcp_blackbox.analyzer.outputs.export import iter_records
from mcp_blackbox.analyzer.read.load import METADATA_KEY, RECORDED_FIELD, har_entry_state
from mcp_blackbox.analyzer.redaction.redact import is_secret_name, redact_text, redact_url, secret_parameters
from mcp_blackbox.analyzer.redaction.redactor import Redactor
from mcp_blackbox.analyzer.version import NOT_INSTALLED, installed_version

VERDICT_FIELD = "_mcp"
VERDICT_KEYS = ("call_id", "method", "tool", "jsonrpc_id", "outcome", "layer", "flags", "reason")
SSE_DATA = re.compile(r"(?m)^(data:[ ]?)([^\r\n]*)")


def verdicts_by_flow(analysis: Analysis, *, redact: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Flow id -> the calls it carried, each as ``_mcp`` has it."""
    carried: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call, record in zip(analysis.call_objects, iter_records(analysis, redact=redact), strict=True):
        fields: dict[str, Any] = dict(record)
        verdict = {key: fields[key] for key in VERDICT_KEYS}
        verdict["flags"] = [str(flag) for flag in record["flags"]]
        for flow_id in record["exchanges"]:
            carried[flow_id].append({**verdict, "carried": "request" if flow_id == call.exchange.flow_id else "answer"})
    return carried


def write_har(analysis: Analysis, out: IO[str], *, redact: bool = True) -> int:
    """The analyzed flows (calls, auth steps, refused streams), in the order of the captures. Returns the
    number of entries written. Written entry by entry: no second copy of the capture is held."""
    from mitmproxy.addons.savehar import SaveHar

    verdicts = verdicts_by_flow(analysis, redact=redact)
    wanted: dict[str, set[str]] = defaultdict(set)
    cut = analysis.time_range
    for exchange in analysis.exchanges:
        if cut is not None and exchange.flow_id not in verdicts and not cut.contains(exchange.t_request):
            continue  # --since/--until: the flows of the calls in range, and the others that began in it
        if exchange.stdio is None:  # HAR holds HTTP: a stdio capture's lines have no entry (its export has them)
            wanted[exchange.source].add(exchange.flow_id)
    writer = SaveHar()
    # HAR's own masks (one number per secret over the file), where the Redactor says a peer's text is masked.
    secrets = Secrets() if Redactor.of(redact).redacts else None
    creator = {
        "name": "mcp-blackbox",
        "version": installed_version() or NOT_INSTALLED,
        "comment": "entries by mitmproxy's savehar",
    }
    out.write('{"log": {"version": "1.2", "creator": ' + json.dumps(creator) + ', "pages": [], "entries": [')
    count = 0
    for source, flow_ids in wanted.items():
        servers_seen: set[Any] = set()
        for flow in _flows(source, flow_ids):
            entry = writer.flow_entry(flow, servers_seen)
            entry[VERDICT_FIELD] = {"calls": verdicts.get(flow.id, [])}
            entry[RECORDED_FIELD] = recorded_fields(flow)
            if secrets is not None:
                secrets.redact_entry(entry)
            out.write(",\n" if count else "\n")
            out.write(json.dumps(entry, ensure_ascii=False, default=_json_default))
            count += 1
    out.write("\n]}}\n")
    return count


def _flows(source: str, flow_ids: set[str]) -> Iterator[Any]:
    """The flows of one capture that the analysis took, read again whole."""
    from mitmproxy import http, io

    with open(source, "rb") as handle:
        head = handle.read(4)
        handle.seek(0)
        if head.startswith(b"{") or head.startswith(b"\xef\xbb\xbf{"):
            document = json.loads(handle.read().decode("utf-8-sig"))
            for index, entry in enumerate(document["log"]["entries"]):
                try:
                    flow = http.HTTPFlow.from_state(har_entry_state(index, entry))
                except Exception:  # the analysis skipped it too (analyzer/read/load.py)
                    continue
                if flow.id in flow_ids:
                    yield flow
            return
        try:
            for flow in io.FlowReader(handle).stream():
                if isinstance(flow, http.HTTPFlow) and flow.id in flow_ids:
                    yield flow
        except Exception:  # a truncated capture: the analysis read what came before the cut, and so does this
            return


def recorded_fields(flow: Any) -> dict[str, Any]:
    """What the loader puts back into the flow read from the entry (analyzer/read/load.py, ``_put_back``)."""
    recorded: dict[str, Any] = {
        "flow_id": flow.id,
        "client_conn": {
            "id": flow.client_conn.id,
            "peername": list(flow.client_conn.peername) if flow.client_conn.peername else None,
        },
        "request": {"timestamp_start": flow.request.timestamp_start, "timestamp_end": flow.request.timestamp_end},
        "response": (
            {"timestamp_start": flow.response.timestamp_start, "timestamp_end": flow.response.timestamp_end}
            if flow.response is not None
            else None
        ),
    }
    if flow.error is not None:
        recorded["error"] = {"msg": flow.error.msg, "timestamp": flow.error.timestamp}
    metadata = flow.metadata.get(METADATA_KEY)
    if isinstance(metadata, dict):
        recorded["metadata"] = metadata
    return recorded


def _json_default(value: Any) -> Any:
    """The recorder's metadata may hold bytes (a flow file allows them): as text."""
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "replace")
    return str(value)


class Secrets:
    """Redaction of an entry; one number per distinct secret value over the whole HAR."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def marker(self, value: str) -> str:
        number = self.numbers.setdefault(value, len(self.numbers) + 1)
        return f"[redacted {len(value)} chars #{number}]"

    def value(self, name: str, value: str) -> str:
        if not is_secret_name(name):
            return redact_text(value)
        scheme, space, _ = value.partition(" ")
        if name.lower() in ("authorization", "proxy-authorization") and space:
            return f"{scheme} {self.marker(value)}"  # the scheme is no secret, and says what kind of credential
        return self.marker(value)

    def pairs(self, pairs: list[dict[str, Any]]) -> None:
        for pair in pairs:
            if isinstance(pair.get("value"), str):
                pair["value"] = self.value(str(pair.get("name", "")), pair["value"])

    def parameters(self, pairs: list[dict[str, Any]]) -> None:
        """A query string's or a form body's parameters, judged as one list (a PKCE challenge is a secret when
        no S256 method beside it says it was hashed)."""
        named = [(str(p.get("name", "")), p["value"]) for p in pairs if isinstance(p.get("value"), str)]
        secret = iter(secret_parameters(named))
        for pair in pairs:
            if isinstance(pair.get("value"), str):
                pair["value"] = self.marker(pair["value"]) if next(secret) else redact_text(pair["value"])

    def redact_entry(self, entry: dict[str, Any]) -> None:
        request, response = entry["request"], entry["response"]
        request["url"] = redact_url(request["url"])
        if isinstance(response.get("redirectURL"), str):  # a 302's Location: the authorization code, the state
            response["redirectURL"] = redact_url(response["redirectURL"])
        for part in (request, response):
            self.pairs(part.get("headers", []))
            for cookie in part.get("cookies", []):
                if isinstance(cookie.get("value"), str):
                    cookie["value"] = self.marker(cookie["value"])
        self.parameters(request.get("queryString", []))
        post = request.get("postData")
        if post and isinstance(post.get("text"), str):
            post["text"] = redact_body(post["text"], post.get("mimeType", ""))
            self.parameters(post.get("params", []))
        content = response.get("content") or {}
        if isinstance(content.get("text"), str) and content.get("encoding") != "base64":
            content["text"] = redact_body(content["text"], content.get("mimeType", ""))


def redact_body(text: str, mime_type: str) -> str:
    """A body's secrets: a JSON body as JSON, an event stream's data lines one by one, other text as text."""
    if mime_type.split(";")[0].strip().lower() == "text/event-stream":
        return SSE_DATA.sub(lambda m: m.group(1) + redact_text(m.group(2)), text)
    return redact_text(text)
