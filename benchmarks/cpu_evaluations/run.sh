#!/usr/bin/env bash
# The CPU evaluations quoted in benchmarks/RESULTS.md and the issues' closing notes, with the embedded default
# model (Qwen2.5-Coder-1.5B-Instruct, llama.cpp, 2 cores): AgenticRAG vs A-RAG Full on GraphRAG-Bench
# Novel (20 questions, the novels indexed whole), then Direct, Naive RAG, A-RAG Full and A-RAG Naive
# on 2Wiki with the paper's packed chunks (the first 50 dev questions). Each step raises `limit` a
# little at a time, so the methods advance together; every step resumes its run (finished questions
# are skipped), so a killed or timed-out job is simply started again.
#
#   [CODE=<checkout>] [SETS="novel 2wiki"] benchmarks/cpu_evaluations/run.sh [results dir] [index dir]
#
# SETS: which evaluations to run (default novel and 2wiki), e.g. SETS=2wiki to continue only the 2Wiki
# runs. SETS=2wiki20: A-RAG (Naive) and (Full) on the first 20 2Wiki questions into <results>/2wiki20,
# then the share of chunk_read calls naming unknown ids there and in <results>/2wiki's runs of the
# same 20 questions (chunk_read_outcomes.py), to compare with the runs made before the prompts named
# the index's own chunk ids.
#
# CODE: the checkout whose code runs (default: this one). A run's id includes the git commit: to
# continue a set's committed results, point CODE at a worktree of the commit in results/<set>/COMMIT
# (see README.md here); any other commit starts new runs beside them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
results="$(realpath -m "${1:-$here/results}")"
indexes="$(realpath -m "${2:-$repo/indexes}")"
data="$(realpath -m "${ARAG_DATA_DIR:-$repo/../shared/data}")"
export ARAG_DATA_DIR="$data"  # the corpus and question files, whichever checkout runs
python="${PYTHON:-python}"
sets="${SETS:-novel 2wiki}"
for set in $sets; do [[ "$set" == novel || "$set" == 2wiki || "$set" == 2wiki20 ]] || { echo "SETS: unknown evaluation '$set' (novel, 2wiki, 2wiki20)" >&2; exit 2; }; done
code="$(cd "${CODE:-$repo}" && pwd)"
cd "$code"  # python -m imports arag and pipelines from here
log() { echo "$(date -u +%FT%TZ) $*" | tee -a "$results/progress.log"; }
mkdir -p "$results" "$indexes"
for set in $sets; do mkdir -p "$results/$set" && git -C "$code" rev-parse HEAD > "$results/$set/COMMIT"; done  # each set's runs: its code's commit

incomplete() {  # pipelines.evaluate's exit status 1: failed episodes (named in its last line); the next, larger limit retries them
    [ "$1" -eq 1 ] || exit "$1"
    log "the run above is incomplete (exit status 1); going on, a rerun retries its failed episodes"
}
index() {  # corpus, index folder
    [ -f "$indexes/$2/manifest.json" ] || { log "index $1"; "$python" -m pipelines.index +corpus="$1" index.path="$indexes/$2"; }
}
novel() {  # method, limit
    log "graphrag-bench-novel-docs $1 limit=$2"
    "$python" -m pipelines.evaluate +corpus=graphrag-bench-novel-docs questions.path="$data/graphrag-bench-novel/questions.jsonl" \
        index.path="$indexes/graphrag-bench-novel-docs" results.path="$results/novel" method="$1" limit="$2" || incomplete $?
}
wiki() {  # method, limit[, results folder]
    log "2wikimultihopqa $1 limit=$2"
    "$python" -m pipelines.evaluate +corpus=2wikimultihopqa index.path="$indexes/2wiki" results.path="$results/${3:-2wiki}" method="$1" limit="$2" || incomplete $?
}

if [[ " $sets " == *" novel "* ]]; then
    index graphrag-bench-novel-docs graphrag-bench-novel-docs
    for limit in 5 10 15 20; do novel agenticrag $limit; novel arag_full $limit; done
fi
if [[ " $sets " == *" 2wiki "* ]]; then
    index 2wikimultihopqa 2wiki
    wiki direct 50
    for limit in 10 20 30 40 50; do for method in naive_rag arag_full arag_naive; do wiki $method $limit; done; done
fi
if [[ " $sets " == *" 2wiki20 "* ]]; then
    index 2wikimultihopqa 2wiki
    for limit in 5 10 15 20; do for method in arag_naive arag_full; do wiki $method $limit 2wiki20; done; done
    for set in 2wiki20 2wiki; do
        [ -d "$results/$set" ] && "$python" "$here/chunk_read_outcomes.py" "$results/$set" --questions "$data/2wikimultihopqa/questions.jsonl" --limit 20 | tee "$results/$set.chunk_read_outcomes_20.md"
    done
fi
log "all done: $sets"
for set in $sets; do "$python" -m pipelines.report results.path="$results/$set" report.paper_columns=true; done  # into <set>/report/
