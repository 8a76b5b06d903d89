"""The layers of docs/ARCHITECTURE.md ("Layers"), enforced by import-linter's contracts in pyproject.toml.

The contracts hold on the tree; and they are shown to break on the imports they exist to stop (a wire
format importing an output, an analyzer module importing the CLI, the addon reading a whole capture, a
cycle between two modules of one layer), on a copy of the package with one bad module added.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"addon": "addon", "analyzer": "analyzer", "cli": "cli", "templates": "templates"}


def lint_imports(package_root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """lint-imports with ``mcp_blackbox`` found under ``package_root`` (mcp_blackbox/<folders>): every
    contract, or those whose ids are given."""
    executable = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    chosen = [argument for contract in contracts for argument in ("--contract", contract)]
    return subprocess.run(
        [str(executable), "--no-cache", *chosen, str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_the_tree_keeps_every_contract() -> None:
    done = lint_imports(ROOT / "typecheck")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """The package's source folders copied as tmp/mcp_blackbox/<folder> (no links, no caches)."""
    for name, folder in PACKAGES.items():
        shutil.copytree(ROOT / folder, tmp_path / "mcp_blackbox" / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


CONTRACTS = ("layers", "recorders")  # the third, acyclic, also breaks where a layer is crossed upward
BAD_IMPORTS = [
    # (where the module goes, what it imports, the contract it breaks)
    ("analyzer/wire/bad.py", "from mcp_blackbox.analyzer.outputs import export", "layers"),
    ("analyzer/model/bad.py", "from mcp_blackbox.analyzer.read import load", "layers"),
    ("analyzer/review/bad.py", "from mcp_blackbox.cli import main", "layers"),
    ("analyzer/calls/bad.py", "from mcp_blackbox.addon import mcp_recorder", "layers"),
    ("addon/bad.py", "from mcp_blackbox.analyzer.across import retries", "recorders"),
]


@pytest.mark.parametrize(("where", "statement", "contract"), BAD_IMPORTS)
def test_a_wrong_import_breaks_a_contract(package_copy: Path, where: str, statement: str, contract: str) -> None:
    (package_copy / "mcp_blackbox" / where).write_text(f"{statement}\n")
    assert lint_imports(package_copy, *(c for c in CONTRACTS if c != contract)).returncode == 0
    done = lint_imports(package_copy, contract)
    assert done.returncode == 1, done.stdout
    assert "0 kept, 1 broken" in done.stdout
    assert where.replace("/", ".").removesuffix(".py") in done.stdout


def test_a_cycle_breaks_the_acyclic_contract(package_copy: Path) -> None:
    # slim is imported by records; slim importing records back closes a cycle inside one layer.
    slim = package_copy / "mcp_blackbox" / "analyzer" / "model" / "slim.py"
    slim.write_text(slim.read_text() + "\nfrom mcp_blackbox.analyzer.model import records  # noqa\n")
    assert lint_imports(package_copy, "layers", "recorders").returncode == 0  # no layer crossed
    done = lint_imports(package_copy, "acyclic")
    assert done.returncode == 1, done.stdout
    assert "0 kept, 1 broken" in done.stdout and "slim" in done.stdout
