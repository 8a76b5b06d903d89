"""This distribution's version, for the outputs that name their writer (HAR's creator, OTLP's scope)
and for ``mcp-blackbox --version``."""

from __future__ import annotations

import importlib.metadata

DISTRIBUTION = "mcp-blackbox"
NOT_INSTALLED = "(not installed)"  # what a writer's version says when there is none


def installed_version() -> str | None:
    """The installed version, or None when run from a tree that was never installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
