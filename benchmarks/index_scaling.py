"""Index build time and peak memory at 1x, 2x, 4x and 8x a slice of the wiki sample.

Build time should grow linearly with the corpus and memory stay nearly flat: parts are streamed,
no phase holds the corpus in memory, and the driver (the `pipelines.index` process) only
schedules tasks and collects commit records (embedding actors write the vector shards), so its
peak RSS must not grow with the corpus. Ratios are against the 1x build of the same run.

"1x" (`--unit`) is a set of files of the wiki sample (the whole sample is ~1M sentences, 1-2 h
per build on 2 cores). Nx is N copies of each unit file in a temporary corpus folder; copy k>0
has its document ids rewritten (`<doc id="12">` -> `<doc id="12-c1">`), because repeated ids
would make repeated chunk ids, which the pipeline rejects. Each build runs the real CLI,
`python -m pipelines.index +corpus=wiki corpus.path=<copy>`, in its own process (so each starts
its own Ray), while this script samples the memory of that process tree (the driver, Ray's own
processes and the workers) with psutil.

    python -m benchmarks.index_scaling                                  # unit wiki_00.bz2 (~7.6k sentences), 1x-8x: ~20 min
    python -m benchmarks.index_scaling --unit 'wiki_0[0-4].bz2'          # a bigger unit
    python -m benchmarks.index_scaling --max-docs 15                      # a quick run: 1x = 15 documents (~2.5k sentences)
    python -m benchmarks.index_scaling --factors 1 2 --interval 0.5 -o embedder.backend=torch

Memory figures: `tree RSS` is the peak of the summed resident memory of all processes of the
build (shared pages, e.g. Ray's object store and the libraries, count once per process, so it
over-counts); `tree PSS` divides shared pages among their users (sampled less often: it is
slower to read); `driver` and `largest worker` are per-process RSS peaks.
"""

from __future__ import annotations

import argparse
import bz2
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
_DOC_ID = re.compile(rb'(<doc\s+id=")([^"]*)(")')


def make_corpus(sources: list[Path], copies: int, target: Path, max_docs: int | None = None) -> None:
    """`copies` copies of each source file under `target` (its first `max_docs` documents, if
    set); copy 0 links the original where it is whole, the others are recompressed with
    rewritten document ids."""
    target.mkdir(parents=True, exist_ok=True)
    for src in sources:
        stem = src.name[: -len(".bz2")] if src.name.endswith(".bz2") else src.name
        for k in range(copies):
            if k == 0 and not max_docs:
                (target / src.name).symlink_to(src.resolve())
                continue
            data = bz2.decompress(src.read_bytes()) if src.name.endswith(".bz2") else src.read_bytes()
            if max_docs:
                docs = data.split(b"</doc>\n")[:max_docs]
                data = b"".join(d + b"</doc>\n" for d in docs if d.strip())
            if k:
                data = _DOC_ID.sub(lambda m: m.group(1) + m.group(2) + f"-c{k}".encode() + m.group(3), data)
            (target / (f"{stem}_c{k}.bz2" if k else f"{stem}.bz2")).write_bytes(bz2.compress(data, compresslevel=1))


class TreeSampler:
    """Samples RSS (and, every few samples, PSS) of a process and all its descendants."""

    def __init__(self, pid: int, interval: float, pss_every: int = 4):
        self.root = psutil.Process(pid)
        self.interval, self.pss_every = interval, pss_every
        self.peak_rss = self.peak_pss = self.peak_driver = self.peak_worker = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root] + self.root.children(recursive=True)
            except psutil.Error:
                break
            want_pss = self.samples % self.pss_every == 0
            rss = pss = 0
            for p in procs:
                try:
                    if want_pss:
                        info = p.memory_full_info()
                        pss += info.pss
                    else:
                        info = p.memory_info()
                except psutil.Error:
                    continue
                rss += info.rss
                if p.pid == self.root.pid:
                    self.peak_driver = max(self.peak_driver, info.rss)
                else:
                    self.peak_worker = max(self.peak_worker, info.rss)
            self.peak_rss = max(self.peak_rss, rss)
            if want_pss:
                self.peak_pss = max(self.peak_pss, pss)
            self.samples += 1
            self._stop.wait(self.interval)


def _default_overrides() -> list[str]:
    # The build only: the retrieval tools' cache, where the CLI builds it after the build in its
    # own process, is not part of what is measured here.
    from omegaconf import OmegaConf

    index_conf = OmegaConf.load(REPO / "conf" / "index.yaml").get("index", {})
    return ["index.tools_cache=false"] if "tools_cache" in index_conf else []


def build(corpus: Path, index: Path, overrides: list[str], interval: float) -> dict:
    cmd = [sys.executable, "-m", "pipelines.index", "+corpus=wiki", f"corpus.path={corpus}", f"index.path={index}",
           "progress=false", "index.overwrite=true", *_default_overrides(), *overrides]
    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreeSampler(proc.pid, interval) as mem:
        out, err = proc.communicate()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"build failed ({' '.join(cmd)}):\n{err[-4000:]}")
    manifest = json.loads((index / "manifest.json").read_text())
    m = re.search(r" in ([0-9.]+)s \(", out)
    return {
        "sentences": manifest["num_sentences"], "documents": manifest["num_documents"],
        "wall_s": wall, "build_s": float(m.group(1)) if m else wall,
        "tree_rss": mem.peak_rss, "tree_pss": mem.peak_pss, "driver_rss": mem.peak_driver, "worker_rss": mem.peak_worker,
        "samples": mem.samples, "load1": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("ARAG_DATA_DIR", str(REPO.parent / "shared" / "data")), help="the data folder (holds wiki/)")
    ap.add_argument("--unit", default="wiki_00.bz2", help="comma-separated globs of wiki sample files that make 1x (default wiki_00.bz2)")
    ap.add_argument("--max-docs", type=int, help="only the first N documents of each unit file (a smaller 1x for a quick run)")
    ap.add_argument("--factors", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("-o", "--override", action="append", default=[], help="a pipeline config override (repeatable)")
    ap.add_argument("--interval", type=float, default=0.25, help="memory sampling interval, seconds")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()

    wiki = Path(args.data) / "wiki"
    globs = [g for g in args.unit.split(",") if g]
    sources = sorted(p for p in wiki.rglob("*") if p.is_file() and any(fnmatch.fnmatch(p.name, g) for g in globs))
    if not sources:
        sys.exit(f"no files matching {globs} under {wiki}")
    print(f"1x = {len(sources)} file(s) of {wiki}: {', '.join(p.name for p in sources[:6])}{' ...' if len(sources) > 6 else ''}", flush=True)

    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="arag-scaling-") as tmp:
        for f in args.factors:
            corpus = Path(tmp) / f"corpus-{f}x"
            make_corpus(sources, f, corpus, args.max_docs)
            print(f"building {f}x ...", flush=True)
            results[f] = r = build(corpus, Path(tmp) / f"index-{f}x", args.override, args.interval)
            print(f"  {r['sentences']} sentences in {r['build_s']:.1f}s ({r['sentences'] / r['build_s']:.0f}/s; process {r['wall_s']:.1f}s); "
                  f"peak tree RSS {r['tree_rss'] / 2**20:.0f} MiB, PSS {r['tree_pss'] / 2**20:.0f} MiB, driver {r['driver_rss'] / 2**20:.0f} MiB, "
                  f"largest worker {r['worker_rss'] / 2**20:.0f} MiB; load {r['load1']:.2f}", flush=True)

    base = results[min(results)]
    print()
    print(f"{'size':>5s} {'sentences':>9s} {'build s':>8s} {'sent/s':>7s} {'time x':>7s} {'driver MiB':>10s} {'driver x':>8s} "
          f"{'tree RSS MiB':>12s} {'RSS x':>6s} {'tree PSS MiB':>12s} {'PSS x':>6s} {'worker MiB':>10s}")
    for f, r in results.items():
        print(f"{f:>4d}x {r['sentences']:9d} {r['build_s']:8.1f} {r['sentences'] / r['build_s']:7.0f} {r['build_s'] / base['build_s']:7.2f} "
              f"{r['driver_rss'] / 2**20:10.0f} {r['driver_rss'] / base['driver_rss']:8.2f} "
              f"{r['tree_rss'] / 2**20:12.0f} {r['tree_rss'] / base['tree_rss']:6.2f} {r['tree_pss'] / 2**20:12.0f} {r['tree_pss'] / max(base['tree_pss'], 1):6.2f} "
              f"{r['worker_rss'] / 2**20:10.0f}")
    print("time x: build time / the smallest build's; driver x, RSS x, PSS x: peak memory / the smallest build's "
          "(flat = the driver holds no bulk data)")
    if len(results) > 1:
        fs = sorted(results)
        # The fixed cost (Python and Ray start, model load) shows in 2x/1x < 2; the marginal
        # cost per sentence between the sizes is what should stay constant.
        for a, b in zip(fs, fs[1:]):
            ra, rb = results[a], results[b]
            marginal = (rb["build_s"] - ra["build_s"]) / max(rb["sentences"] - ra["sentences"], 1)
            print(f"marginal {a}x->{b}x: {1 / marginal if marginal > 0 else float('inf'):.0f} sentences/s")
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in results.items()}, indent=2))


if __name__ == "__main__":
    main()
