"""The outputs that need an optional extra (``pip install 'mcp-blackbox[NAME]'``): one way to say it is missing."""

from __future__ import annotations

import importlib
from collections.abc import Sequence


class ExtraMissing(RuntimeError):
    """An optional extra is not installed; the message says what to install."""


def install_hint(extra: str) -> str:
    return f"pip install 'mcp-blackbox[{extra}]'"


def require_extra(extra: str, needs: str, modules: Sequence[str]) -> None:
    """Raise ExtraMissing unless every one of ``modules`` imports: ``needs`` (what the output needs), the
    module that is missing, and the extra to install."""
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as e:
        raise ExtraMissing(f"{needs} ({e.name or modules[0]} is missing): {install_hint(extra)}") from None
