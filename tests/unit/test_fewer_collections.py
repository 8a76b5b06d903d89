"""The installed command collects cyclic garbage less often (analyzer/read/collector.py); ``main``, which
programs and tests call in their own processes, leaves their collector alone."""

from __future__ import annotations

import json
import subprocess
import sys

from mcp_blackbox.analyzer.read.collector import THRESHOLDS

SHOW = """
import gc, json, sys
from mcp_blackbox.cli.main import command, main
seen = [gc.get_threshold()]
main(["addon-path"])
seen.append(gc.get_threshold())
sys.argv = ["mcp-blackbox", "addon-path"]
command()
seen.append(gc.get_threshold())
print(json.dumps(seen))
"""


def test_the_command_sets_the_thresholds_and_main_does_not() -> None:
    done = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True, check=True)
    before, after_main, after_command = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == after_main != list(THRESHOLDS), done.stdout
    assert after_command == list(THRESHOLDS), done.stdout
