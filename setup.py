"""The one build step pyproject.toml cannot state: the flow-file decoder compiled by mypyc, when it can be.

``analyzer/wire/tnetstring_decoder.py`` is most of what the analyzer's decoding workers do. mypyc (part of
mypy, as black and mypy ship themselves) compiles the typed module into a C extension that decodes a record
in about 0.55 of the time (``make bench-reader``). It is optional: where mypy, a C compiler or Python's
headers are missing, the build says so and goes on, and the package runs the same source in Python
(``analyzer/wire/tnetstring_reader.py`` chooses at import). ``MCP_BLACKBOX_PURE=1`` builds without trying.

The extension is built from a copy of the source named ``_tnetstring_compiled`` with the source's digest
written in, so that the reader uses it only beside the source it was built from: an editable checkout whose
decoder was edited since runs the edited source, not a stale build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
WIRE = HERE / "analyzer" / "wire"
SOURCE = WIRE / "tnetstring_decoder.py"
VALUES = WIRE / "tnetstring_values.py"  # imported by the decoder; left in Python
PACKAGE = ("mcp_blackbox", "analyzer", "wire")
COMPILED = "_tnetstring_compiled"  # tnetstring_reader.COMPILED_MODULE's last part
# The commands that build extensions: an sdist (or egg_info, asked for the build's requirements) compiles nothing.
BUILDING = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def note(text: str) -> None:
    print(f"mcp-blackbox build: {text}", file=sys.stderr)


def staged_source(stage: Path) -> Path:
    """The decoder's copy to compile, in a tree whose packages give it its installed name (mypyc names a
    module from the ``__init__.py`` files above it)."""
    wire = stage.joinpath(*PACKAGE)
    wire.mkdir(parents=True)
    for depth in range(1, len(PACKAGE) + 1):
        (stage.joinpath(*PACKAGE[:depth]) / "__init__.py").write_text("")
    shutil.copyfile(VALUES, wire / VALUES.name)
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()  # tnetstring_reader.source_digest
    target = wire / f"{COMPILED}.py"
    target.write_bytes(source + f'\n\nSOURCE_DIGEST: str = "{digest}"\n'.encode())
    return target


def compiled_decoder() -> list[Any]:
    """The extension to build, or none (said why)."""
    if not BUILDING & set(sys.argv[1:]):
        return []
    if os.environ.get("MCP_BLACKBOX_PURE"):
        note("MCP_BLACKBOX_PURE is set: the decoder stays Python")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        note("mypyc (mypy) is not installed: the decoder stays Python")
        return []
    # Under build/ (setuptools wants an extension's sources relative to the project), which only a build writes:
    # an sdist compiles nothing.
    work = Path("build")
    shutil.rmtree(work / "mypyc-src", ignore_errors=True)
    try:
        source = staged_source(work / "mypyc-src")
        return list(mypycify([str(source)], opt_level="3", target_dir=str(work / "mypyc")))
    except (Exception, SystemExit) as e:  # mypyc exits on a type error it finds
        note(f"mypyc could not compile the decoder ({e}): it stays Python")
        return []


class OptionalBuildExt(build_ext):
    """``build_ext`` that leaves the compiled decoder out when it cannot be built (no C compiler, no headers):
    the package works without it."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all: setuptools' platform error, before any extension
            note(f"no compiled decoder ({e}): it stays Python")

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # the compiler or the linker failed
            note(f"no compiled decoder ({e}): it stays Python")


setup(ext_modules=compiled_decoder(), cmdclass={"build_ext": OptionalBuildExt})
