"""One recording, many files: the id and number every recorder writes into each file it starts (issue 21).

A recording is one run of a recorder (``record``, ``run``, a mitmdump with the addon), or, for stdio, the
servers one client process started through ``record --stdio -w DIR/``: each server run is a wrapper of
its own and a file of its own. Every file says which recording it belongs to and its number in it:

- a flow file: on its first flow, ``flow.metadata[METADATA_KEY] = {"id": ..., "file": n}`` (rotated files
  are numbered 1, 2, ... in the order they were opened);
- a stdio capture: the header's ``recording`` field, the same record.

The analyzer joins the files of one recording into one timeline (analyzer/wire/inputs.recording_of) and
never joins files of two recordings, whatever their content or names. ``run`` hands its id to everything it
starts (ENV), so that a stdio wrapper started by the agent it runs is part of its recording.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import TypedDict

from mcp_blackbox.analyzer.wire.metadata import ProcessRecord

ENV = "MCP_BLACKBOX_RECORDING"
METADATA_KEY = "mcp_blackbox_recording"  # beside the addon's FlowRecord: a marker of the file, not the flow
ID_LENGTH = 32


class RecordingRecord(TypedDict):
    id: str  # the recording's id: 32 hex digits (or what ENV gave)
    file: int  # the file's number in the recording, from 1


def recording_id() -> str:
    """The id of the recording this process writes: the one it was handed (ENV), or a new one."""
    return _handed() or uuid.uuid4().hex


def stdio_recording_id(client: ProcessRecord | None, directory: Path) -> str:
    """A stdio wrapper's recording: the one it was handed; else the servers that one client process (pid and
    start time, measured) started into one directory are one recording; else a recording of its own."""
    handed = _handed()
    if handed:
        return handed
    if client is None or "pid" not in client or "started_at" not in client:
        return uuid.uuid4().hex
    key = f"{client['pid']}\0{client['started_at']!r}\0{directory.resolve()}"
    return hashlib.sha256(key.encode()).hexdigest()[:ID_LENGTH]


def marker(recording: str, number: int) -> RecordingRecord:
    return {"id": recording, "file": number}


def read_marker(value: object) -> RecordingRecord | None:
    """A recording record as read from a capture (untrusted): None unless well formed."""
    if not isinstance(value, dict):
        return None
    found, number = value.get("id"), value.get("file")
    if not isinstance(found, str) or not found or len(found) > 200 or not isinstance(number, int):
        return None
    return {"id": found, "file": number}


def _handed() -> str | None:
    handed = os.environ.get(ENV, "").strip()
    return handed[:200] if handed else None
