"""The static embedder (`embedder=minilm-static`) against the model it is distilled from
(`embedder=minilm`, all-MiniLM-L6-v2): encoding speed and 2Wiki retrieval, so users know what they trade.

    python -m benchmarks.static_embedder [--data ../shared/data/2wikimultihopqa] [--sentences 2000]
        [--questions 300] [--minilm-index indexes/2wiki] [--static-index indexes/2wiki-static]
        [--chunking per_document]

1. Speed, in one run on the same sentences (the first `--sentences` sentences of the 2Wiki corpus, split
   as the index splits them): `encode_documents` of each embedder as its conf/embedder file sets it up
   (MiniLM: the openvino backend in float32, batches of 16; static: float32 vectors), each warmed up
   first, best of `--repeat`; sentences/s of each and the ratio. The static model comes from its
   cache (distilled on first use; the script says how long loading took).
2. Builds (`python -m pipelines.index +corpus=2wikimultihopqa`, the CI's index: the paper's packed
   ~1,000-token chunks; `--chunking per_document`: one chunk per passage) of each embedder where its
   index folder holds no index yet, timed end to end (a build that finds its index complete is not
   timed).
3. Retrieval on the first `--questions` 2Wiki dev questions with supporting titles: evidence recall@5
   (arag.evaluation.evidence.recall_at_k: the share of a question's supporting titles covered by the
   first 5 chunks) of `semantic_search` (top_k 5) and of Naive RAG's retrieval
   (`naive_embedding_search`, top_k 5), each index searched with its own embedder's query vectors.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from omegaconf import OmegaConf

from arag.config.files import conf_dir
from arag.evaluation.evidence import recall_at_k
from arag.index.embedding import EmbedderSpec, SentenceEmbedder
from arag.index.sentences import sentence_spans

EMBEDDERS = {"minilm": "all-MiniLM-L6-v2", "minilm-static": "static, distilled from it"}
K = 5


def spec_of(name: str) -> EmbedderSpec:
    return EmbedderSpec.from_config(OmegaConf.to_container(OmegaConf.load(conf_dir() / "embedder" / f"{name}.yaml"), resolve=True))


def corpus_sentences(corpus: Path, n: int) -> list[str]:
    out: list[str] = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            out += [text[s.start : s.end] for s in sentence_spans(text)]
            if len(out) >= n:
                break
    return out[:n]


def speed(sentences: list[str], repeat: int) -> dict[str, float]:
    rates = {}
    for name in EMBEDDERS:
        started = time.perf_counter()
        embedder = SentenceEmbedder(spec_of(name))
        loaded = time.perf_counter() - started
        embedder.encode_documents(sentences[:64])  # warm-up
        best = min(_timed(embedder.encode_documents, sentences) for _ in range(repeat))
        rates[name] = len(sentences) / best
        print(f"speed  {name:14s} {rates[name]:10.1f} sentences/s  ({len(sentences)} sentences; backend {embedder.backend}, "
              f"{embedder.precision}, {embedder.dimension}-d; loaded in {loaded:.1f} s)", flush=True)
    print(f"speed  ratio static / minilm: {rates['minilm-static'] / rates['minilm']:.1f}x", flush=True)
    return rates


def _timed(fn, arg) -> float:
    started = time.perf_counter()
    fn(arg)
    return time.perf_counter() - started


def build(name: str, path: Path, data_dir: Path, chunking: str | None) -> None:
    if (path / "manifest.json").exists():
        print(f"build  {name:14s} {path} exists (not rebuilt, not timed)", flush=True)
        return
    argv = [sys.executable, "-m", "pipelines.index", "+corpus=2wikimultihopqa", f"embedder={name}", f"index.path={path}",
            f"data_dir={data_dir}", "progress=false"] + ([f"index.chunking={chunking}"] if chunking else [])
    started = time.perf_counter()
    subprocess.run(argv, cwd=REPO, check=True)
    print(f"build  {name:14s} {time.perf_counter() - started:8.1f} s  ({' '.join(argv[1:])})", flush=True)


def recall(index: Path, questions: list[dict]) -> dict[str, float]:
    from arag.tools import ToolContext

    sums = {"semantic_search": 0.0, "naive_embedding_search": 0.0}
    with ToolContext(index) as ctx:
        for q in questions:
            for tool in sums:
                result = ctx.call(tool, {"query": q["question"], "top_k": K})
                if result.error:
                    raise RuntimeError(f"{tool} on {index}: {result.error}")
                sums[tool] += recall_at_k([h.title for h in result.results], q["supporting_titles"], K)
    return {tool: total / len(questions) for tool, total in sums.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "2wikimultihopqa")
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--questions", type=int, default=300)
    p.add_argument("--minilm-index", type=Path, default=REPO / "indexes" / "2wiki")
    p.add_argument("--static-index", type=Path, default=REPO / "indexes" / "2wiki-static")
    p.add_argument("--chunking", choices=["packed", "per_document"], default=None, help="index.chunking of the builds (default: the corpus's, packed)")
    args = p.parse_args()
    corpus, questions_file = args.data / "corpus.jsonl", args.data / "questions.jsonl"
    for f in (corpus, questions_file):
        if not f.exists():
            p.error(f"no 2Wiki data: {f} not found (--data)")
    speed(corpus_sentences(corpus, args.sentences), args.repeat)
    indexes = {"minilm": args.minilm_index.resolve(), "minilm-static": args.static_index.resolve()}
    for name, path in indexes.items():
        build(name, path, args.data.resolve().parent, args.chunking)
    with open(questions_file, encoding="utf-8") as f:
        questions = [q for q in map(json.loads, f) if q.get("supporting_titles")][: args.questions]
    results = {name: recall(path, questions) for name, path in indexes.items()}
    print(f"recall@{K} over {len(questions)} 2Wiki dev questions   semantic_search   naive RAG retrieval")
    for name, r in results.items():
        print(f"recall {name:14s} {r['semantic_search']:28.3f} {r['naive_embedding_search']:21.3f}")
    s, m = results["minilm-static"], results["minilm"]
    print(f"recall static - minilm {s['semantic_search'] - m['semantic_search']:+20.3f} {s['naive_embedding_search'] - m['naive_embedding_search']:+21.3f}")


if __name__ == "__main__":
    main()
