"""Two versions of this code timed side by side in one run: the checkout, and an earlier commit
extracted with `git archive` (its own arag/, conf/ and pipelines/), each run as a subprocess on the
same data, alternating which goes first in each round so drift in machine load falls on both.
Used by benchmarks/report_speed.py and benchmarks/viewer_start.py."""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
# The code before issue 51's report and viewer work (the merge base of that branch).
PREVIOUS_COMMIT = "f415985"


@dataclass(frozen=True)
class Code:
    """A version of the code: its label and the folder its `python -m` commands run from."""

    label: str
    root: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.root), "PYTHONUNBUFFERED": "1"}

    def command(self, module: str, *args: str) -> list[str]:
        return [sys.executable, "-m", module, *args]


def checkout(commit: str, into: Path) -> Code:
    """The tree of `commit` (git archive) extracted under `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit], capture_output=True, check=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", commit], capture_output=True, text=True, check=True).stdout.strip()
    return Code(f"commit {sha}", into)


def this_checkout() -> Code:
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    return Code(f"this checkout ({sha}{' + changes' if dirty else ''})", REPO)


def child_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def alternate(codes: list[Code], rounds: int, measure: Callable[[Code], float]) -> dict[Code, list[tuple[float, float]]]:
    """(wall s, CPU s of its subprocesses) of `measure` for each code, `rounds` times, the order
    reversed every other round. The CPU seconds do not grow with the machine's load, the wall time does."""
    times: dict[Code, list[tuple[float, float]]] = {c: [] for c in codes}
    for i in range(rounds):
        for code in codes if i % 2 == 0 else list(reversed(codes)):
            load = os.getloadavg()[0]
            cpu = child_cpu_s()
            wall = measure(code)
            cpu = child_cpu_s() - cpu
            times[code].append((wall, cpu))
            print(f"  round {i + 1}: {code.label}: {wall:.2f} s wall, {cpu:.2f} s CPU (load average {load:.1f})", flush=True)
    return times


def summary(times: dict[Code, list[tuple[float, float]]], what: str) -> str:
    """Medians (min–max) of wall and CPU time per code, and the previous one's medians over this one's."""
    (new, new_t), (old, old_t) = list(times.items())
    lines = [f"{what}, median of {len(new_t)} (min–max):"]
    for code, t in times.items():
        wall, cpu = [w for w, _ in t], [c for _, c in t]
        lines.append(f"  {code.label}: {statistics.median(wall):.2f} s wall ({min(wall):.2f}–{max(wall):.2f}), "
                     f"{statistics.median(cpu):.2f} s CPU ({min(cpu):.2f}–{max(cpu):.2f})")
    ratio = [statistics.median(x for x in (o[k] for o in old_t)) / statistics.median(x for x in (n[k] for n in new_t)) for k in (0, 1)]
    lines.append(f"  {old.label} / {new.label}: {ratio[0]:.1f}x wall, {ratio[1]:.1f}x CPU")
    return "\n".join(lines)


def arguments(description: str, commit: str = PREVIOUS_COMMIT) -> argparse.Namespace:
    """--results (the tree, default the committed CPU runs), --commit (the earlier code), --rounds."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--results", type=Path, default=REPO / "benchmarks" / "cpu_evaluations" / "results")
    p.add_argument("--commit", default=commit, help="the earlier code to compare with")
    p.add_argument("--rounds", type=int, default=5)
    return p.parse_args()
