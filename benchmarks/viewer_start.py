"""The viewer's start to its first page, this checkout beside an earlier commit in the same run.

    python -m benchmarks.viewer_start [--results benchmarks/cpu_evaluations/results] [--commit f415985] [--rounds 5]

Each side starts `python -m pipelines.view results.path=<the tree> view.port=0 view.open_browser=false`
as a subprocess; the time runs from its start until the first page (`/`) has been read whole over
HTTP (what a person waits for after typing the command). The sides alternate which goes first
(benchmarks/code_versions.py); the CPU figure is the server's, read when it is stopped.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.code_versions import Code, alternate, arguments, checkout, summary, this_checkout

READY_TIMEOUT_S = 300


def start_to_first_page(code: Code, results: Path, outputs: Path) -> float:
    started = time.perf_counter()
    server = subprocess.Popen(code.command("pipelines.view", f"results.path={results}", "view.port=0", "view.open_browser=false", f"hydra.run.dir={outputs}"),
                              cwd=code.root, env=code.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()  # "viewing N runs of … at http://127.0.0.1:PORT/ (Ctrl-C stops)"
        if " at http" not in line:
            raise SystemExit(f"{code.label}: the viewer did not start: {line}{server.stderr.read()[-3000:]}")
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=READY_TIMEOUT_S) as response:
            body = response.read()
        seconds = time.perf_counter() - started
        if response.status != 200 or b"<h2" not in body:
            raise SystemExit(f"{code.label}: the first page answered {response.status}")
        return seconds
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    with tempfile.TemporaryDirectory(prefix="viewer-start-") as tmp:
        codes = [this_checkout(), checkout(args.commit, Path(tmp) / "previous")]
        print(f"pipelines.view over {args.results}: start to the first page read, {args.rounds} rounds", flush=True)
        times = alternate(codes, args.rounds, lambda code: start_to_first_page(code, args.results.resolve(), Path(tmp) / "outputs"))
        print(summary(times, "viewer start to first page"))


if __name__ == "__main__":
    main()
