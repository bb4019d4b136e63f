"""The rehearsal (issue 34): its corpus generator (fast, over a small data folder of the real formats)
and `python -m benchmarks.rehearsal --small` end to end (slow: corpus -> pipelines.index -> pipelines.serve ->
pipelines.evaluate against the simulated model server -> a multirun -> pipelines.report)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arag.corpus.readers import CorpusSpec, FieldNames, plan_parts, read_part
from arag.index.sentences import sentence_spans
from tests.conftest import SAMPLE_PASSAGES, write_jsonl, write_wiki
from tests.support.paths import DATA_DIR, REPO

from tests.support import rehearsal_parts as rehearsal

WIKI_BODY = ("Anarchism is a political philosophy that advocates stateless societies based on voluntary institutions. "
             "It holds the state to be undesirable, unnecessary and harmful to the people. "
             "Career\nThe movement grew in the nineteenth century among workers in Spain and Italy.")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_jsonl(root / "2wikimultihopqa" / "corpus.jsonl", SAMPLE_PASSAGES)
    write_jsonl(root / "graphrag-bench-medical" / "corpus.jsonl", [{"doc_id": "m0", "title": "Fever", "text": "A fever is a body temperature above the normal range of the human body."}])
    write_jsonl(root / "graphrag-bench-novel" / "corpus.jsonl", [{"doc_id": "n0", "title": "Chapter 1", "text": "The old captain walked slowly along the harbour wall at dawn."}])
    write_wiki(root / "wiki" / "AA" / "wiki_00.bz2", [("12", "Anarchism", WIKI_BODY)])
    return root


def generate(out: Path, sentences: int, data_dir: Path, shard_mb: float, pool_sentences: int | None = None) -> dict:
    """`python -m benchmarks.rehearsal_corpus`, as the rehearsal runs it; its last line is what it did."""
    command = [sys.executable, "-m", "benchmarks.rehearsal_corpus", "--out", str(out), "--sentences", str(sentences),
               "--data-dir", str(data_dir), "--shard-mb", str(shard_mb)]
    command += ["--pool-sentences", str(pool_sentences)] if pool_sentences is not None else []
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def read_corpus(folder: Path) -> list[dict]:
    spec = CorpusSpec(name="rehearsal", format="jsonl", path=str(folder), fields=FieldNames())
    return [doc for part in plan_parts(spec) for doc in read_part(spec, part)]


def sentences_of(text: str) -> list[str]:
    return [text[s.start : s.end] for s in sentence_spans(text)]


def test_corpus_reaches_the_target_with_distinct_perturbed_copies(data_dir, tmp_path):
    out = tmp_path / "corpus"
    done = generate(out, 100, data_dir, shard_mb=0.001)
    docs = read_corpus(out / "shards")
    pool = {d.doc_id: d for d in docs if "~c" not in d.doc_id}
    assert set(pool) == {"2wiki/0", "2wiki/1", "2wiki/2", "2wiki/3", "2wiki/4", "medical/m0", "novel/n0", "wiki/12"}
    assert done["sentences"] >= 100 and done["perturbed_copies"] >= 3 and done["shards"] > 1
    assert sum(len(sentences_of(d.text)) for d in docs) == done["sentences"]  # the index's segmenter counts the same
    assert len({d.doc_id for d in docs}) == len(docs) == done["documents"]
    by_original: dict[str, set[str]] = {}
    for d in docs:
        original = pool[d.doc_id.split("~c")[0]]
        assert d.title == original.title
        orig_sentences, copy_sentences = sentences_of(original.text), sentences_of(d.text)
        assert len(copy_sentences) == len(orig_sentences)
        for o, c in zip(orig_sentences, copy_sentences):
            ow, cw = o.split(), c.split()
            assert ow[0] == cw[0] and ow[-1] == cw[-1]  # the capital and the full stop stay
            if d.doc_id in pool or len(ow) < 3:
                assert c == o
            else:  # one word dropped, or two neighbours swapped: every other word kept
                assert len(cw) == len(ow) - 1 and all(w in ow for w in cw) or sorted(cw) == sorted(ow) and c != o
        by_original.setdefault(original.doc_id, set()).add(d.text)
    # every copy of a document differs from the original and from the other copies
    assert all(len(texts) == sum(1 for d in docs if d.doc_id.split("~c")[0] == key) for key, texts in by_original.items())
    # the same arguments reuse the corpus; other ones build it again
    assert generate(out, 100, data_dir, shard_mb=0.001)["reused"] is True
    again = generate(out, 60, data_dir, shard_mb=0.001)
    assert again["reused"] is False and 60 <= again["sentences"] < 100


def test_pool_limit_makes_a_small_corpus_of_copies(data_dir, tmp_path):
    done = generate(tmp_path / "c", 40, data_dir, shard_mb=64, pool_sentences=10)
    assert 10 <= done["pool_sentences"] < 40 and done["perturbed_copies"] >= 1
    ids = [d.doc_id for d in read_corpus(tmp_path / "c" / "shards")]
    assert ids[0] == "2wiki/0" and "2wiki/0~c1" in ids
    assert not (tmp_path / "c" / "pool.jsonl").exists()


# Plain words (letters, digits, inner hyphens and apostrophes) are the ones a copy may drop or swap;
# punctuation, brackets and quotes stay in place, since sentence segmentation reads them.
PLAIN_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
LOTHAIR = 'Lothair II ( 835 – ) was the king of" Lotharingia" from 855 until his death.'


def test_perturbation_is_deterministic_and_keeps_punctuation_in_place(data_dir, tmp_path):
    write_jsonl(data_dir / "2wikimultihopqa" / "corpus.jsonl", [{"doc_id": "k", "title": "Lothair II", "text": LOTHAIR},
                                                                 {"doc_id": "r", "title": "See also", "text": "References"}])
    runs = [generate(tmp_path / name, 30, data_dir, shard_mb=64, pool_sentences=2) for name in ("a", "b")]
    corpora = [read_corpus(tmp_path / name / "shards") for name in ("a", "b")]
    assert runs[0]["perturbed_copies"] >= 5
    assert [(d.doc_id, d.text) for d in corpora[0]] == [(d.doc_id, d.text) for d in corpora[1]]  # the same copies every time
    words = LOTHAIR.split(" ")
    copies = [d.text.split(" ") for d in corpora[0] if d.doc_id.startswith("2wiki/k~c")]
    assert len(copies) >= 5 and len({tuple(c) for c in copies}) == len(copies) and all(c != words for c in copies)
    for c in copies:
        assert [w for w in c if not PLAIN_WORD.fullmatch(w)] == [w for w in words if not PLAIN_WORD.fullmatch(w)]
    assert {d.text for d in corpora[0] if d.doc_id.startswith("2wiki/r")} == {"References"}


def test_missing_source_is_a_one_line_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks.rehearsal_corpus", "--out", str(tmp_path / "c"), "--sentences", "10",
                           "--data-dir", str(tmp_path / "nowhere")], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("error: source 2wiki:") and "does not exist" in proc.stderr


def test_an_index_is_reused_only_when_its_corpus_and_flags_match(tmp_path):
    # the index flags as `benchmarks.rehearsal --small` sets them (index_key reads only these)
    args = argparse.Namespace(part_mb=4.0, ann="ivfpq", embedder="minilm-static", recall_queries=300, ann_questions=500)
    corpus = {"sentences": 100, "documents": 10, "args": {"sentences": 100}, "seconds": 1.0}
    key = rehearsal.index_key(args, corpus)
    assert rehearsal.reusable_index(tmp_path, key) is None  # nothing built
    (tmp_path / rehearsal.INDEX_FIGURES).write_text(json.dumps({"key": key, "built_at": "then", "index": {}, "ann_recall": {}}))
    assert rehearsal.reusable_index(tmp_path, key) is None  # figures, but no finished index
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "manifest.json").write_text("{}")
    assert rehearsal.reusable_index(tmp_path, key)["built_at"] == "then"
    assert rehearsal.reusable_index(tmp_path, rehearsal.index_key(args, {**corpus, "seconds": 9.0})) is not None  # the generator's time is not the corpus
    assert rehearsal.reusable_index(tmp_path, rehearsal.index_key(args, {**corpus, "sentences": 101})) is None
    other = argparse.Namespace(**{**vars(args), "ann": "auto"})
    assert rehearsal.reusable_index(tmp_path, rehearsal.index_key(other, corpus)) is None
    other = argparse.Namespace(**{**vars(args), "ann_questions": 0})
    assert rehearsal.reusable_index(tmp_path, rehearsal.index_key(other, corpus)) is None


def test_the_builds_ann_questions_are_disjoint_from_the_recall_queries(tmp_path):
    from arag.evaluation.questions import load_questions

    base = [{"id": f"q{i}", "question": f"question {i}?", "answers": ["a"]} for i in range(10)]
    path = rehearsal.write_ann_questions(base, 3, 5, tmp_path / "ann_questions.jsonl")
    assert [q.question for q in load_questions(path).questions] == [f"question {i}?" for i in range(3, 8)]
    assert rehearsal.write_ann_questions(base, 10, 5, tmp_path / "none.jsonl") is None
    assert rehearsal.write_ann_questions(base, 3, 0, tmp_path / "none.jsonl") is None


LAST_LINE = re.compile(r"rehearsal: sentences=(\d+) episodes=(\d+) in_flight_peak=(\d+) ratio=(\d+\.\d\d) lost=(-?\d+) duplicated=(-?\d+)")


# `--small` as issue 34 sizes it (200k sentences, 1,000 episodes, 500 in flight) took 18 min on this
# shared 2-core machine (the simulated engine alone needs ~10 min for 1,000 episodes at engine speed),
# so the test runs the same composition smaller: 60k sentences (20k distinct, 2 perturbed copies),
# 300 episodes with 2 x 100 in flight at 4x engine speed, a 2 x 2 sweep of 5 questions each.
SMALLER = ["--sentences", "60000", "--pool-sentences", "20000", "--episodes", "300", "--concurrency", "100",
           "--sweep-questions", "5", "--time-scale", "0.25"]


@pytest.mark.slow
@pytest.mark.skipif(not (DATA_DIR / "2wikimultihopqa" / "questions.jsonl").exists(), reason="needs the benchmark data (ARAG_DATA_DIR)")
def test_small_rehearsal_stores_every_row_once(tmp_path):
    """Staged as the full size runs: the index first (--until index), then the rest (--keep), which
    reuses that index and its figures."""
    out = tmp_path / "rehearsal"
    command = [sys.executable, "-m", "benchmarks.rehearsal", "--small", *SMALLER, "--out", str(out), "--data-dir", str(DATA_DIR)]
    proc = subprocess.run([*command, "--until", "index"], capture_output=True, text=True, cwd=REPO, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    built = json.loads((out / "index_figures.json").read_text())
    assert built["index"]["sentences"] >= 59_000 and not (out / "results").exists()
    index_log = (out / "logs" / "index.log").stat().st_mtime_ns
    proc = subprocess.run([*command, "--keep"], capture_output=True, text=True, cwd=REPO, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "index: reusing" in proc.stdout and (out / "logs" / "index.log").stat().st_mtime_ns == index_log  # not built again
    last = proc.stdout.strip().splitlines()[-1]
    m = LAST_LINE.fullmatch(last)
    assert m, last
    sentences, episodes, peak, ratio, lost, duplicated = m.groups()
    assert int(sentences) >= 59_000 and int(episodes) == 300
    assert lost == "0" and duplicated == "0"
    assert int(peak) > 0 and float(ratio) > 0
    figures = json.loads((out / "rehearsal.json").read_text())
    assert (out / "results" / "report" / "report.md").is_file()
    assert figures["sweep"]["runs"] == 4 and figures["rows"]["expected"] == figures["rows"]["distinct"] == 300 + 4 * 5
    assert figures["corpus"]["perturbed_copies"] == 2
    assert figures["ann_recall"]["kind"] == "ivfpq" and figures["ann_recall"]["queries"] == 300
    assert figures["index"]["sentences"] == int(sentences) and figures["index"]["rss"]["worker_peak_mib"] > 0
    assert figures["index"]["reused_from"] == built["built_at"] and figures["ann_recall"] == built["ann_recall"]


def test_the_steady_window_starts_when_the_first_wave_is_answered():
    poller = rehearsal.StatsPoller.__new__(rehearsal.StatsPoller)
    # (seconds, episodes started, answered, in flight): 100 in flight, 500 episodes; the first wave
    # is answered in a burst at 60-70 s (its work done before), then 50 answers a minute.
    poller.samples = [(0, 100, 0, 100), (60, 100, 0, 100), (70, 200, 100, 100), (130, 250, 150, 100), (190, 300, 200, 100),
                      (430, 500, 400, 100), (600, 500, 500, 0)]
    rate = poller.steady_rate(500, 100)
    assert rate == {"steady_window_min": 6.0, "steady_episodes": 300, "steady_episodes_per_min": 50.0}
    assert poller.steady_rate(500, 450) == {}  # the first wave ends after the last episode starts: no steady window


def test_cpu_of_a_worker_that_has_exited_still_counts():
    """The sampler keeps the CPU seconds of a process it saw before it exited (evaluation workers
    are gone by the last sample), so a tree's CPU over a window includes them."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {burn!r}])\ntime.sleep(0.5)"])
    sampler = rehearsal.RssSampler(0.05).start()
    sampler.watch("tree", parent.pid, children_are_workers=True)
    parent.wait()
    sampler.stop()
    used = sampler.cpu("tree")
    assert used["cpu_s"]["workers"] >= 0.3, used  # the child burned 0.6 s, most of it while sampled
