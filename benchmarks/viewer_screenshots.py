"""The viewer's screenshots in docs/images/, taken again: starts the viewer over the committed runs
and photographs four pages with headless Chromium (tests/support/headless_chromium.py).

    python -m benchmarks.viewer_screenshots [--results benchmarks/cpu_evaluations/results] [--out docs/images]

viewer-runs.png: the first page at a laptop's width (1,400 px), its top; viewer-episode.png: an
AgenticRAG episode with gold documents marked; viewer-compare.png: one 2Wiki question across the
six runs that answered it; viewer-figures.png: the AgenticRAG run's figures. docs/viewer.md shows them.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator
from urllib.parse import urlencode

from tests.support.headless_chromium import Browser

REPO = Path(__file__).resolve().parents[1]
AGENTICRAG_RUN, AGENTICRAG_QUESTION = "e9a0079474b562ed", "Novel-74440a6a"
SIX_RUNS_QUESTION = "a80d84e7096d11ebbdb0ac1f6bf848b6"
# (file, page, window width, the height kept from the page's top)
SHOTS = (
    ("viewer-runs.png", "", 1400, 1000),
    ("viewer-episode.png", "episode?" + urlencode({"run": AGENTICRAG_RUN, "q": AGENTICRAG_QUESTION}), 1000, 1700),
    ("viewer-compare.png", "compare?" + urlencode({"dataset": "2wikimultihopqa", "q": SIX_RUNS_QUESTION}), 1400, 1300),
    ("viewer-figures.png", "run?" + urlencode({"run": AGENTICRAG_RUN}), 900, 900),
)


@contextlib.contextmanager
def viewer(results: Path, outputs: Path) -> Iterator[str]:
    """`python -m pipelines.view` over `results` on a free port; yields its address."""
    server = subprocess.Popen([sys.executable, "-m", "pipelines.view", f"results.path={results}", "view.port=0", "view.open_browser=false", f"hydra.run.dir={outputs}"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if " at http" not in line:
            raise SystemExit(f"the viewer did not start: {line}{server.stderr.read()[-3000:]}")
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        server.terminate()
        server.wait(timeout=30)


def crop_top(path: Path, height: int) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as image:
        kept = image.crop((0, 0, image.width, min(height, image.height)))
    kept.save(path, optimize=True)
    return kept.size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", type=Path, default=REPO / "benchmarks" / "cpu_evaluations" / "results")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.results.resolve()
    # Relative to the checkout where it is inside it: the pages show the path, and no machine's folder belongs in the docs.
    shown = results.relative_to(REPO) if REPO in results.parents else results
    with tempfile.TemporaryDirectory(prefix="viewer-screenshots-") as tmp, viewer(shown, Path(tmp)) as url, Browser() as browser:
        for name, page, width, height in SHOTS:
            path = args.out / name
            browser.run(url + page, width, screenshot=path, height=min(height, 1000))
            size = crop_top(path, height)
            print(f"{path}: {url + page} at {width} px, {size[0]}x{size[1]}", flush=True)


if __name__ == "__main__":
    main()
