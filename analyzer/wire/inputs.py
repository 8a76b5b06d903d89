"""Capture arguments as files: a directory is its ``*.flows`` (and stdio ``*.stdio.jsonl``) files, a quoted
glob its matches, both by name.

A recorder that rotates its files (``mcp-blackbox record --rotate-size``, the addon's ``mcp_write``)
leaves a directory of ``mcp-<UTC start>-<n>.flows`` files; given the directory, or a glob of them, the
analyzer reads them as one capture. Their names sort in time order, so sorting by name reads them in
the order they were written. A stream that spans a rotation is whole: a flow is written when it ends,
and the analysis joins every file's messages on one timeline before pairing them.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from pathlib import Path

from mcp_blackbox.analyzer.wire.stdio_capture import (
    SUFFIX as STDIO_SUFFIX,  # a stdio capture (analyzer/read/stdio_load.py)
)

CAPTURE_SUFFIX = ".flows"
# A file the recorder rotated: mcp-<UTC start>-<n>.flows (addon/rotation.py names them).
ROTATED_NAME = re.compile(r"^mcp-\d{8}T\d{6}Z-\d{4,}\.flows$")


def recording_of(source: str) -> str:
    """The recording a capture file belongs to: its directory for a rotated file (one recorder, one
    client population, cut into files), else the file itself."""
    path = Path(source)
    return str(path.parent) if ROTATED_NAME.match(path.name) else source


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


def directory_captures(directory: Path) -> list[str]:
    """The directory's ``*.flows`` and ``*.stdio.jsonl`` files (not its subdirectories'), sorted by name."""
    names = sorted(
        entry.name
        for entry in os.scandir(directory)
        if entry.name.endswith((CAPTURE_SUFFIX, STDIO_SUFFIX)) and not entry.name.startswith(".") and entry.is_file()
    )
    return [str(directory / name) for name in names]
