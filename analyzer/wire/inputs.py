"""Capture arguments as files: a directory is its capture files, a quoted glob its matches.

A directory is read by content, as mitmproxy writes any name ``-w`` is given (``.mitm``, no suffix): every
file that starts as a flow file or a stdio capture, and every ``*.flows`` and ``*.stdio.jsonl`` whatever it
holds (the loader says what is wrong with one). The other files are passed over, each with its reason
(``passed_over``): the analysis says so.

A recorder that rotates its files (``mcp-blackbox record --rotate-size``, the addon's ``mcp_write``)
leaves a directory of ``mcp-<UTC start>-<n>.flows`` files; given the directory, or a glob of them, the
analyzer reads them as one capture. Their names sort in time order, so sorting by name reads them in
the order they were written. A stream that spans a rotation is whole: a flow is written when it ends,
and the analysis joins every file's messages on one timeline before pairing them. Which files are one
recording is what their recorder wrote in them (analyzer/wire/recording.py), not their names: two runs of
a recorder into one directory are two recordings.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from mcp_blackbox.analyzer.wire.recording import METADATA_KEY as RECORDING_KEY
from mcp_blackbox.analyzer.wire.recording import RecordingRecord, read_marker
from mcp_blackbox.analyzer.wire.stdio_capture import (
    SUFFIX as STDIO_SUFFIX,  # a stdio capture (analyzer/read/stdio_load.py)
)
from mcp_blackbox.analyzer.wire.stdio_capture import is_stdio_capture
from mcp_blackbox.analyzer.wire.tnetstring_reader import decode, read_record

CAPTURE_SUFFIX = ".flows"
# A flow file's first bytes: the first record's length prefix, then its first key's (a flow is a dict).
FLOW_FILE_START = re.compile(rb"^\d{1,12}:\d{1,12}:")
SNIFF_BYTES = 32
# A file the recorder rotated: mcp-<UTC start>-<n>.flows (addon/rotation.py names them).
ROTATED_NAME = re.compile(r"^mcp-\d{8}T\d{6}Z-\d{4,}\.flows$")


def recording_of(source: str) -> str:
    """The recording a capture file belongs to: the recording its recorder wrote into it
    (analyzer/wire/recording.py); for a file without one (an older recorder, plain mitmdump), its directory
    if it is a rotated file (one recorder, one client population, cut into files), else the file itself."""
    found = recording_marker(source)
    if found is not None:
        return f"recording {found['id']}"
    path = Path(source)
    return str(path.parent) if ROTATED_NAME.match(path.name) else source


@functools.lru_cache(maxsize=4096)  # asked once per client unit: each file is opened once
def recording_marker(source: str) -> RecordingRecord | None:
    """The recording record of a capture file: a stdio header's ``recording``, or the first flow's
    metadata; None if it has none or cannot be read (the loader says why it cannot)."""
    try:
        if is_stdio_capture(source):
            with open(source, "rb") as file:
                header = json.loads(file.readline())
            return read_marker(header.get("recording")) if isinstance(header, dict) else None
        with open(source, "rb") as file:
            record = read_record(file)
        state = decode(record, {"metadata": True}) if record else None
    except (OSError, ValueError, RecursionError):  # RecursionError: a stdio header nested too deeply
        return None
    metadata = state.get("metadata") if isinstance(state, dict) else None
    return read_marker(metadata.get(RECORDING_KEY)) if isinstance(metadata, dict) else None


def expand_captures(arguments: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Each argument as the files it names, in order; anything else (a missing file) as it is, for the
    loader to explain. Expanding twice changes nothing."""
    files: list[str] = []
    for argument in arguments:
        text = os.fspath(argument)
        path = Path(text)
        if path.is_dir():
            found = directory_captures(path)
            files.extend(found or [text])  # none: the loader says the directory holds no capture
        elif not path.exists() and glob.has_magic(text):
            matches = sorted(m for m in glob.glob(text) if not Path(m).is_dir())
            files.extend(matches or [text])
        else:
            files.append(text)
    return files


def capture_names(sources: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """Each capture file as every output names it (the report, the summaries, ``check``): its file name, never
    the machine's directories. A directory's files are its own (it is not read recursively), so a file is named
    the same whether it was given alone or by its directory. Where two files share a name, each is named by as
    few of its parent directories as tell them apart (the path as given only when nothing shorter does)."""
    paths = [os.fspath(source) for source in dict.fromkeys(sources)]
    # The platform's separators only: a "\\" is a character of a file name on Linux.
    parts = {path: [p for p in Path(path).parts if p != Path(path).anchor] or [path] for path in paths}
    names: dict[str, str] = {}
    for path in paths:
        depth = 1
        while True:
            name = "/".join(parts[path][-depth:])
            clash = [p for p in paths if p != path and "/".join(parts[p][-depth:]) == name]
            if not clash or depth >= len(parts[path]):
                names[path] = name if not clash else path
                break
            depth += 1
    return names


@functools.lru_cache(maxsize=4096)
def capture_name(source: str) -> str:
    """One capture file's name as the export's ``source`` gives it: ``capture_names`` of it alone. Asked once
    per call, for a handful of files: remembered."""
    return capture_names([source])[source]


def directory_captures(directory: Path) -> list[str]:
    """The directory's capture files (not its subdirectories'), sorted by name: rotated files in the order
    they were written."""
    return [str(directory / name) for name, reason in _directory_files(directory) if reason is None]


def passed_over(arguments: Iterable[str | os.PathLike[str]]) -> list[str]:
    """For each directory among the arguments, the files in it that were not read, and why."""
    said: list[str] = []
    for argument in arguments:
        directory = Path(os.fspath(argument))
        if directory.is_dir():
            said += [f"{directory / name}: not read: {why}" for name, why in _directory_files(directory) if why]
    return said


def _directory_files(directory: Path) -> list[tuple[str, str | None]]:
    """(name, None) for each capture file, (name, why not) for each other file; hidden files are not
    looked at (an editor's or a copy's leftovers)."""
    names = sorted(entry.name for entry in os.scandir(directory) if not entry.name.startswith(".") and entry.is_file())
    return [(name, _not_a_capture(directory / name)) for name in names]


def _not_a_capture(path: Path) -> str | None:
    """Why the file is no capture, by its name or its first bytes; None for a capture."""
    if path.name.endswith((CAPTURE_SUFFIX, STDIO_SUFFIX)) or is_stdio_capture(path):
        return None
    try:
        with path.open("rb") as file:
            head = file.read(SNIFF_BYTES)
    except OSError as e:
        return f"cannot open: {e.strerror or e}"
    if FLOW_FILE_START.match(head):
        return None
    if not head:
        return "empty"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return "JSON, not a flow file or a stdio capture (a HAR file is read when it is named)"
    return "not a flow file or a stdio capture"
