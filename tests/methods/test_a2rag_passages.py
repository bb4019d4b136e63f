"""A2RAG's evaluation corpus: 2Wiki one chunk per passage (conf/corpus/2wikimultihopqa-passages.yaml),
so that its Recall@K counts passages as the paper's does, not ~1,000-token windows of ~10 passages."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from arag.agent import Agent
from arag.config.files import conf_dir
from arag.evaluation.evidence import evidence_recall, ranked_chunks
from arag.llm.scripted import ScriptedBackend
from arag.methods import load_method
from arag.methods.a2rag import CHECKS
from tests.support.graph_index import GRAPH_DOCS, build_graph_inline
from tests.support.paths import DATA_DIR
from tests.support.tiny_index import Doc, fake_encode, make_index

CORPUS = "2wikimultihopqa-passages"


def compose_config(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides))


def test_the_passage_corpus_is_one_chunk_per_passage_with_the_2wiki_questions():
    from pipelines.index import settings_from_config
    from pipelines.config_checks import checked_settings

    index = compose_config("index", f"+corpus={CORPUS}", "data_dir=/data")
    checked_settings(index)
    settings = settings_from_config(index)
    assert (settings.chunking.mode, settings.chunking.chunk_tokens) == ("per_document", 8192)
    assert settings.corpus.path == "/data/2wikimultihopqa/corpus.jsonl" and index.index.path == f"indexes/{CORPUS}"
    evaluate = compose_config("evaluate", "model=scripted", "method=a2rag", f"+corpus={CORPUS}", "data_dir=/data")
    checked_settings(evaluate)
    assert evaluate.questions.path == "/data/2wikimultihopqa/questions.jsonl"
    # Other corpora keep their own questions.
    assert compose_config("evaluate", "model=scripted", "+corpus=2wikimultihopqa", "data_dir=/data").questions.path == "/data/2wikimultihopqa/questions.jsonl"


@pytest.mark.skipif(not (DATA_DIR / "2wikimultihopqa" / "corpus.jsonl").exists(), reason=f"no 2Wiki corpus under {DATA_DIR}")
def test_every_2wiki_passage_stays_one_chunk():
    from arag.corpus.readers import plan_parts, read_part
    from arag.corpus.documents import Document
    from arag.index.chunking import chunk_document
    from arag.index.tokens import count_tokens_batch
    from pipelines.index import settings_from_config

    settings = settings_from_config(compose_config("index", f"+corpus={CORPUS}", f"data_dir={DATA_DIR}"))
    docs = [d for part in plan_parts(settings.corpus) for d in read_part(settings.corpus, part) if isinstance(d, Document)]
    assert len(docs) > 1000
    # With its title line, the longest passage is far below the chunk budget, so chunking keeps it whole.
    assert max(count_tokens_batch([d.text for d in docs])) < settings.chunking.chunk_tokens // 2
    for doc in docs[:50]:
        (chunk,) = chunk_document(doc, settings.chunking.chunk_tokens, settings.chunking.language)
        assert chunk.chunk_id == f"{doc.doc_id}#0"


@pytest.fixture(scope="module")
def passage_ctx(tmp_path_factory):
    from arag.tools import ToolContext

    # The graph fixture's documents, each one passage = one chunk, as the passage corpus indexes them.
    docs = [Doc(d.doc_id, d.title, [[s for chunk in d.chunks for s in chunk]], part=d.part) for d in GRAPH_DOCS]
    built = make_index(tmp_path_factory.mktemp("passages") / "index", docs)
    assert built.chunk_ids == [f"{d.doc_id}#0" for d in docs]
    build_graph_inline(built.path)
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        yield ctx


def test_recall_at_k_counts_passages(passage_ctx):
    from arag.tools.chunk_read import chunk_titles

    method = load_method("a2rag", {"gate_threshold": 0.0, "sufficiency": "llm"})
    script = [{"verdict": "no"}, {"verdict": "no"}, {"answer": "20 March 851"}, dict.fromkeys(CHECKS, "yes")]
    episode = Agent(ScriptedBackend(script), method, passage_ctx, protocol="json").run("When did Lothair II's mother die?", "q1")
    ranked = ranked_chunks(episode)
    titles = chunk_titles(passage_ctx, ranked)
    assert len(ranked) >= 3 and all("\n" not in titles[c] for c in ranked)  # each retrieved chunk is one passage
    wanted = ["Lothair II", "Ermengarde of Tours"]
    recall = evidence_recall(episode, wanted, lambda ids: chunk_titles(passage_ctx, ids))
    for k in (2, 5):
        # Recall@k: the supporting passages among the first k passages retrieved.
        assert recall.at_k[k] == len(set(wanted) & {titles[c] for c in ranked[:k]}) / len(wanted)
