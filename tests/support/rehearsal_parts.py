"""The parts of benchmarks/rehearsal.py that its tests check directly: the process-tree RSS and CPU
sampler, the simulator's /stats poller and its steady-state rate, and the key that decides whether
an earlier index build in the working folder is reused. benchmarks/rehearsal.py imports them from here."""

from __future__ import annotations

import argparse
import csv
import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

MIB = 2**20
INDEX_FIGURES = "index_figures.json"  # an index build's figures, for a later --keep run


class RssSampler:
    """Samples the RSS of process trees every `interval` seconds on a thread. Each tree's root is its
    driver; a descendant whose command line starts with `ray::` (Ray sets it) or any child of a
    root named with `children_are_workers` is a worker; the rest (Ray's raylet, GCS, ...) is
    `system`. Rows: (seconds, tree, driver MiB, workers' total MiB, largest worker MiB, workers, system MiB,
    driver CPU s, workers' CPU s, system CPU s); CPU seconds are each process's total so far (user +
    system) as last seen, a process that has exited included, so a tree's CPU over a window is its
    last row's minus its first."""

    def __init__(self, interval: float = 1.0):
        self.interval, self.trees, self.rows = interval, {}, []
        self.cpu_seen: dict[tuple[str, int], tuple[str, float]] = {}  # (tree, pid) -> (part, CPU s when last seen)
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def watch(self, name: str, pid: int, children_are_workers: bool = False) -> None:
        self.trees[name] = (pid, children_are_workers)

    def forget(self, name: str) -> None:
        self.trees.pop(name, None)

    def start(self) -> "RssSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for name, (pid, flat) in list(self.trees.items()):
                row = self.sample(name, pid, flat)
                if row is not None:
                    self.rows.append((round(time.monotonic() - self.started, 1), name, *row))

    def sample(self, tree: str, pid: int, children_are_workers: bool) -> tuple[float, ...] | None:
        import psutil

        def cpu(p: psutil.Process) -> float:
            t = p.cpu_times()
            return t.user + t.system

        try:
            root = psutil.Process(pid)
            driver = root.memory_info().rss
            self.cpu_seen[(tree, pid)] = ("driver", cpu(root))
            procs = root.children(recursive=True)
        except psutil.Error:
            return None
        workers, system = [], 0
        for p in procs:
            try:
                rss, used = p.memory_info().rss, cpu(p)
                is_worker = (children_are_workers and p.ppid() == pid) or " ".join(p.cmdline()).startswith("ray::")
            except psutil.Error:
                continue
            self.cpu_seen[(tree, p.pid)] = ("workers" if is_worker else "system", used)
            if is_worker:
                workers.append(rss)
            else:
                system += rss
        used = {"driver": 0.0, "workers": 0.0, "system": 0.0}
        for (t, _), (part, seconds) in self.cpu_seen.items():
            if t == tree:
                used[part] += seconds
        return driver / MIB, sum(workers) / MIB, max(workers, default=0) / MIB, len(workers), system / MIB, used["driver"], used["workers"], used["system"]

    def summary(self, name: str) -> dict[str, Any]:
        rows = [r for r in self.rows if r[1] == name]
        if not rows:
            return {}
        col = lambda i: [r[i] for r in rows]  # noqa: E731
        thirds = [rows[len(rows) * k // 3] for k in (0, 1, 2)] + [rows[-1]]
        return {
            "samples": len(rows),
            "driver_peak_mib": round(max(col(2))), "workers_total_peak_mib": round(max(col(3))),
            "worker_peak_mib": round(max(col(4))), "system_peak_mib": round(max(col(6))),
            # start, a third, two thirds, end: flat or growing
            "driver_mib_over_time": [round(r[2]) for r in thirds],
            "workers_total_mib_over_time": [round(r[3]) for r in thirds],
            **self.cpu(name),
        }

    def cpu(self, name: str, since: float = 0.0, until: float = float("inf")) -> dict[str, Any]:
        """CPU seconds of tree `name`'s driver, workers and the rest between its first and last
        sample in [since, until] (sampler seconds), and cores used on average over that window."""
        rows = [r for r in self.rows if r[1] == name and since <= r[0] <= until]
        if len(rows) < 2:
            return {}
        first, last = rows[0], rows[-1]
        window = last[0] - first[0]
        used = {part: round(max(0.0, last[i] - first[i]), 1) for part, i in (("driver", 7), ("workers", 8), ("system", 9))}
        return {"cpu_window_s": round(window, 1), "cpu_s": used, "cores_used": round(sum(used.values()) / window, 2) if window else None}

    def write_csv(self, path: Path, name: str) -> None:
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["seconds", "driver_mib", "workers_total_mib", "worker_max_mib", "workers", "system_mib"])
            for r in self.rows:
                if r[1] == name:
                    w.writerow([r[0], *(round(x, 1) for x in r[2:4]), round(r[4], 1), r[5], round(r[6], 1)])


def get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


class StatsPoller:
    """Polls the simulator's /stats every `interval` seconds on a thread: (seconds, episodes started,
    episodes answered, requests in flight)."""

    def __init__(self, url: str, interval: float = 1.0):
        self.url, self.interval, self.samples = url, interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="stats-poller")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                s = get_json(self.url)
            except OSError:
                continue
            self.samples.append((time.monotonic(), s["episodes_started"], s["episodes_answered"], s["in_flight"]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def steady_rate(self, episodes: int, in_flight: int) -> dict[str, Any]:
        """Episodes/min answered in the steady state: from the `in_flight`-th answer (the first wave
        done; counting from the first answer took in the first wave's burst, whose work was done
        before the window, and measured above the engine's capacity) to the moment the last episode
        made its first request (after it, episodes in flight only fall)."""
        first = next((x for x in self.samples if x[2] >= in_flight), None)
        last = next((x for x in self.samples if x[1] >= episodes), self.samples[-1] if self.samples else None)
        if first is None or last is None or last[0] <= first[0]:
            return {}
        minutes = (last[0] - first[0]) / 60
        return {"steady_window_min": round(minutes, 2), "steady_episodes": last[2] - first[2],
                "steady_episodes_per_min": round((last[2] - first[2]) / minutes, 1)}


def index_key(args: argparse.Namespace, corpus: dict[str, Any]) -> dict[str, Any]:
    """What decides an index build and its figures: the corpus and the index flags."""
    return {"corpus": {k: corpus.get(k) for k in ("sentences", "documents", "args")},
            **{k: str(getattr(args, k)) for k in ("part_mb", "ann", "embedder", "recall_queries", "ann_questions")}}


def write_ann_questions(base: list[dict[str, Any]], recall_queries: int, count: int, path: Path) -> Path | None:
    """The build's `index.ann_questions` file: `count` dev questions after the first `recall_queries`
    (those measure the built index's recall, so they stay out of the build's own measurement);
    None when there are none to give."""
    chosen = base[recall_queries : recall_queries + count]
    if not chosen:
        return None
    path.write_text("".join(json.dumps(q) + "\n" for q in chosen))
    return path


def reusable_index(out: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The figures of a finished build of the same index in `out`, or None (then it is built)."""
    try:
        earlier = json.loads((out / INDEX_FIGURES).read_text())
    except (OSError, ValueError):
        return None
    if earlier.get("key") != json.loads(json.dumps(key, default=str)) or not (out / "index" / "manifest.json").is_file():
        return None
    return earlier
