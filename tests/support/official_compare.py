"""The pure halves of benchmarks/official_side_by_side.py's tools phase, side by side with the
authors' A-RAG code: the o200k_base tiktoken cache their tools need and the per-call comparison
(compare_call, tools_summary). They run nothing; the benchmark feeds them records and
tests/evaluation/test_official_side_by_side.py small fake ones. The episodes' diff: tests/support/official_parity.py."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path
from typing import Any

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


class SetupError(RuntimeError):
    """A missing input; printed as one line."""


def tiktoken_cache(o200k_file: str | Path, cache_dir: Path) -> Path:
    """A TIKTOKEN_CACHE_DIR holding o200k_base under the name tiktoken reads it from."""
    data = Path(o200k_file).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise SetupError(f"--o200k {o200k_file}: not o200k_base.tiktoken (SHA-256 differs)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if not target.exists():
        target.write_bytes(data)
    return cache_dir


# ---- the tools alone: one row per call --------------------------------------------------------
def overlap(a: list[str], b: list[str]) -> int:
    return len(set(a) & set(b))


def bare(sentences: list[str]) -> list[str]:
    """Sentences without their end punctuation, sorted: their splitter cuts at [.!?] and drops
    them, ours keeps them; their semantic_search orders a chunk's sentences by text position, ours
    by sentence id."""
    return sorted(s.strip().rstrip(".!?").strip() for s in sentences)


def compare_call(call: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any], cl100k: Any = None) -> dict[str, Any]:
    """One row of the tools-alone table: agreement of ids (order and set), scores on shared ids,
    snippet sentences and full texts, and retrieved tokens under both tokenizers.

    theirs: the driver's parse (ids, scores or None, snippets, texts, log.retrieved_tokens)."""
    oi, ti = ours["ids"], theirs["ids"]
    row: dict[str, Any] = {
        "key": call["key"], "qid": call.get("qid"), "tool": call["tool"], "args": call["args"],
        "ours_ids": oi, "theirs_ids": ti, "same_order": oi == ti, "overlap": overlap(oi, ti), "n_ours": len(oi), "n_theirs": len(ti),
        "tokens_ours_recorded": ours["tokens"], "tokens_ours_o200k": ours.get("tokens_o200k"),
        "tokens_theirs_o200k": (theirs.get("log") or {}).get("retrieved_tokens"),
    }
    if call["tool"] == "chunk_read":
        shared = [i for i in oi if i in theirs["texts"] and i in ours["texts"]]
        row["same_text"] = sum(ours["texts"][i].strip() == theirs["texts"][i].strip() for i in shared)
        row["compared_texts"] = len(shared)
        if cl100k is not None:
            row["tokens_theirs_cl100k"] = sum(len(cl100k.encode_ordinary(theirs["texts"][i])) for i in ti if i in theirs["texts"])
        return row
    o_snip = dict(zip(oi, ours["snippets"]))
    t_snip = dict(zip(ti, theirs["snippets"]))
    shared = [i for i in oi if i in t_snip]
    row["sentences_ours"] = sum(len(s) for s in ours["snippets"])
    row["sentences_theirs"] = sum(len(s) for s in theirs["snippets"])
    row["same_snippets"] = sum(o_snip[i] == t_snip[i] for i in shared)
    row["same_but_punctuation"] = sum(bare(o_snip[i]) == bare(t_snip[i]) for i in shared)
    row["same_with_cap_5"] = sum(bare(o_snip[i][:5]) == bare(t_snip[i]) for i in shared)  # their keyword_search shows a chunk's first 5 matching sentences
    if cl100k is not None:
        row["tokens_theirs_cl100k"] = sum(len(cl100k.encode_ordinary(s)) for s in (x for snip in theirs["snippets"] for x in snip))
    if ours["scores"] is not None and theirs.get("scores"):
        o_sc, t_sc = dict(zip(oi, ours["scores"])), dict(zip(ti, theirs["scores"]))
        row["max_score_diff"] = max((abs(o_sc[i] - t_sc[i]) for i in shared), default=None)
    return row


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def tools_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tool: calls, identical id lists, mean overlap, tokens (sums), snippets/texts identical."""
    out = []
    for tool in ("keyword_search", "semantic_search", "chunk_read"):
        rs = [r for r in rows if r["tool"] == tool]
        if not rs:
            continue
        s: dict[str, Any] = {
            "tool": tool, "calls": len(rs), "same ids, same order": sum(r["same_order"] for r in rs),
            "mean overlap": f"{_mean([r['overlap'] for r in rs]):.2f} / {_mean([max(r['n_ours'], r['n_theirs']) for r in rs]):.2f}",
            "tokens ours recorded": sum(r["tokens_ours_recorded"] or 0 for r in rs),
            "tokens ours o200k": sum(r["tokens_ours_o200k"] or 0 for r in rs),
            "tokens theirs o200k": sum(r["tokens_theirs_o200k"] or 0 for r in rs),
        }
        if tool == "chunk_read":
            s["identical texts"] = f"{sum(r['same_text'] for r in rs)} / {sum(r['compared_texts'] for r in rs)}"
        else:
            shared = sum(r["overlap"] for r in rs)
            s["identical snippets"] = f"{sum(r['same_snippets'] for r in rs)} / {shared}"
            s["same but end punctuation"] = f"{sum(r['same_but_punctuation'] for r in rs)} / {shared}"
            s["same with ours cut to 5"] = f"{sum(r['same_with_cap_5'] for r in rs)} / {shared}"
            s["sentences ours / theirs"] = f"{sum(r['sentences_ours'] for r in rs)} / {sum(r['sentences_theirs'] for r in rs)}"
            diffs = [r["max_score_diff"] for r in rs if r.get("max_score_diff") is not None]
            if diffs:
                s["max score diff"] = f"{max(diffs):.4f}"
        out.append(s)
    return out
