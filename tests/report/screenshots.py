"""The report's screenshots in headless Chromium: the sample captures rendered, then shot at the sizes a reviewer
opens it at. Run from the checkout (``make browser-deps`` installs Chromium's driver):

    .venv/bin/python -m tests.report.screenshots            # docs/screenshots/*.png and sample_captures/report.png
    .venv/bin/python -m tests.report.screenshots --out DIR  # elsewhere, to look before replacing them

Each shot is the first screen (what a reader sees on opening the page), not the whole page.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from mcp_blackbox.analyzer.review.report import write_report
from tests.support.browser import inspect_report
from tests.support.processes import REPO_ROOT

SAMPLES = sorted(
    [*(REPO_ROOT / "sample_captures").glob("*.flows"), *(REPO_ROOT / "sample_captures").glob("*.stdio.jsonl")]
)
SIZES = [(1600, 1000), (1280, 800)]
README_SIZE = (1600, 1000)  # the README's screenshot: sample_captures/report.png


def shoot(report: Path, png: Path, size: tuple[int, int]) -> None:
    """The first screen of ``report`` at ``size`` into ``png``; raises if the page did not load clean."""
    seen = inspect_report(report, [{"do": "screenshot", "path": str(png.resolve()), "full_page": False}], viewport=size)
    problems = seen["console_errors"] + seen["page_errors"]
    if problems or seen["requests"] or not seen["results"][0]["ok"]:
        raise RuntimeError(f"the report did not load clean at {size}: {problems or seen['results']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write every shot here instead of their places in the repo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-shots-") as tmp:
        report = Path(tmp) / "report.html"
        # Absolute paths: the page names each capture by its file name all the same (no machine's directory).
        write_report(SAMPLES, report)
        shots = {f"report-{w}x{h}.png": (REPO_ROOT / "docs" / "screenshots", (w, h)) for w, h in SIZES}
        shots["report.png"] = (REPO_ROOT / "sample_captures", README_SIZE)
        for name, (where, size) in shots.items():
            png = (args.out or where) / name
            png.parent.mkdir(parents=True, exist_ok=True)
            shoot(report, png, size)
            print(png)


if __name__ == "__main__":
    main()
