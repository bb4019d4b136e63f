"""Sentence embeddings with sentence-transformers, from a local or packaged model (no hub access).

The `EmbedderSpec` is stored in the manifest, so the tools encode queries with the model (and prompt)
that embedded the sentences. The ``openvino`` backend (arag.index.openvino_transformer) computes the
same vectors faster, so the backend is a run-time setting, not part of `identity()`; where it cannot
run, the log says why and torch runs. With ``static`` settings the model is a distilled token-lookup
one (arag.index.static_embedding). Docs: docs/indexing.md, "Build the 2Wiki index".
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from arag.index import openvino_transformer
from arag.index.direct_encoding import DirectQueryEncoder
from arag.index.static_embedding import StaticEncoder, StaticSpec, load_static_model
from arag.strict_settings import from_settings

log = logging.getLogger("arag.embedding")

BACKENDS = ("torch", "openvino")
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class EmbedderSpec:
    name: str  # recorded in the manifest, e.g. "all-MiniLM-L6-v2"
    path: str | None = None  # a local model folder
    package: str | None = None  # or a Python package exposing get_model_path() (bundled weights)
    query_prompt: str | None = None  # prepended to queries only (e.g. Qwen3-Embedding's instruction)
    query_prompt_name: str | None = None  # or a named prompt from the model's own config
    max_seq_length: int | None = None
    # float32 (exact), or a reduced precision that is faster where the hardware has it (bfloat16 on
    # CPUs with AVX512-BF16/AMX, float16 on GPUs), part of the index identity.
    dtype: str = "float32"
    static: StaticSpec | None = None  # a static model distilled from this one (arag.index.static_embedding)
    # Run-time settings: they change speed, not which vectors come out (not in `identity`).
    device: str = "cpu"
    batch_size: int = 32
    threads: int | None = None  # CPU threads in all; None: all cores of the machine
    # Batches encoded at once on CPU, each on threads/streams threads (None: one per thread).
    # Single-threaded batches side by side beat one batch split across threads: no thread waits at
    # a barrier for another that the OS preempted, and tokenizing and pooling run in parallel too.
    streams: int | None = None
    backend: str = "torch"  # or "openvino"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"embedder '{self.name}': unknown backend '{self.backend}' (choose one of {', '.join(BACKENDS)})")
        if self.dtype not in DTYPES:
            raise ValueError(f"embedder '{self.name}': unknown dtype '{self.dtype}' (choose one of {', '.join(DTYPES)})")
        object.__setattr__(self, "static", StaticSpec.from_value(self.static))
        if self.static is not None and (self.query_prompt or self.query_prompt_name):
            raise ValueError(f"embedder '{self.name}': a static model has no query prompts (set query_prompt and query_prompt_name to null)")

    def identity(self) -> dict[str, Any]:
        """The fields that decide the vectors (float32 and no `static` left out: older indexes keep theirs)."""
        out = {k: getattr(self, k) for k in ("name", "path", "package", "query_prompt", "query_prompt_name", "max_seq_length")}
        if self.dtype != "float32":
            out["dtype"] = self.dtype
        if self.static is not None:
            out["static"] = asdict(self.static)
        return out

    def resolve_path(self) -> str:
        if self.path:
            path = os.path.expanduser(self.path)
            if not os.path.isdir(path):
                raise FileNotFoundError(f"embedder '{self.name}': model folder not found: {path}")
            return path
        if self.package:
            try:
                module = importlib.import_module(self.package)
            except ImportError as exc:
                raise ImportError(f"embedder '{self.name}' needs the package '{self.package}': pip install {self.package.replace('_', '-')}") from exc
            return str(module.get_model_path())
        raise ValueError(f"embedder '{self.name}': set either embedder.path or embedder.package")

    @classmethod
    def from_config(cls, cfg: Any) -> "EmbedderSpec":
        """From the `embedder` config group; an unknown key is an error listing the valid ones."""
        return from_settings(cls, {k: cfg[k] for k in cfg}, "embedder")


def on_this_machine(spec: EmbedderSpec) -> EmbedderSpec:
    """`spec` with a device this machine has: an index embedded on GPUs is searched from CPU machines."""
    if spec.static is not None or spec.device == "cpu":
        return spec
    import torch

    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        log.info("embedder '%s': built on %s; this machine has no CUDA device, so its queries are encoded on the CPU", spec.name, spec.device)
        return replace(spec, device="cpu")
    return spec


class SentenceEmbedder:
    """Encodes sentences and queries into unit vectors; `backend` says what runs: torch, openvino or static."""

    def __init__(self, spec: EmbedderSpec):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.spec = spec
        self.threads = max(1, int(spec.threads or len(os.sched_getaffinity(0))))
        self.streams = 1
        self._pool = None
        self._direct_queries = None  # arag.index.direct_encoding, where the model fits it
        self._static: StaticEncoder | None = None
        if spec.static is not None:
            self._static = StaticEncoder(load_static_model(spec.resolve_path(), spec.static, spec.name), spec.max_seq_length, spec.batch_size)
            self.dimension, self.backend, self.precision = self._static.dimension, "static", spec.static.quantize_to
            if spec.device != "cpu":
                log.info("embedder '%s': a static model runs on CPU (device=%s is not used)", spec.name, spec.device)
            return
        import torch
        from sentence_transformers import SentenceTransformer

        if spec.device == "cpu":
            # Ray sets OMP_NUM_THREADS to the CPUs it reserved for a worker (often 1); an embedding actor uses the cores it was sized for.
            torch.set_num_threads(self.threads)
        model_path = spec.resolve_path()
        # OpenVINO converts the fp32 model and lowers the precision when it compiles it; torch
        # loads the weights in the dtype it computes in.
        openvino_candidate = spec.backend == "openvino" and spec.device == "cpu" and spec.dtype in openvino_transformer.OPENVINO_PRECISIONS
        model_kwargs = {"torch_dtype": getattr(torch, spec.dtype)} if spec.dtype != "float32" and not openvino_candidate else None
        self.model = SentenceTransformer(model_path, device=spec.device, model_kwargs=model_kwargs)
        if spec.max_seq_length:
            self.model.max_seq_length = spec.max_seq_length
        self.dimension = int(self.model.get_embedding_dimension())
        self.backend, self.precision = "torch", spec.dtype  # precision: what the transformer actually computes in
        streams = max(1, min(self.threads, int(spec.streams or self.threads)))
        if spec.backend == "openvino":
            compute_dtype = openvino_transformer.run_on_openvino(self.model, model_path, spec, self.threads, streams, self.encode_documents)
            if compute_dtype is not None:
                self.backend, self.precision = "openvino", compute_dtype
        if self.backend == "torch" and openvino_candidate and spec.dtype != "float32":
            self.model.to(getattr(torch, spec.dtype))  # loaded in fp32 for a conversion that did not happen
        if spec.device == "cpu":
            self.streams = streams
            if self.backend == "torch":
                torch.set_num_threads(max(1, self.threads // self.streams))
        if self.backend == "openvino":  # queries straight through the tokenizer and OpenVINO where the probe agrees
            prompt = self.model._resolve_prompt(spec.query_prompt, spec.query_prompt_name)  # the prompt encode() would prepend
            reference = functools.partial(self._encode, prompt=spec.query_prompt, prompt_name=spec.query_prompt_name)
            self._direct_queries, why = DirectQueryEncoder.build(self.model, prompt, spec.batch_size, reference)
            if self._direct_queries is None:
                log.info("embedder '%s': queries through encode() (no direct path: %s)", spec.name, why)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, prompt=None, prompt_name=None)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Each query's vector is the one it gets when encoded alone: answers must not depend on the batch."""
        if self._static is not None:  # each text's vector is its own tokens' mean
            return self._static.encode(texts)
        if self._direct_queries is not None:
            return self._direct_queries.encode(texts)  # batches equal-length queries only
        # encode() pads a batch to its longest text, which changes the other vectors' last bits
        # (and a GPU may pick kernels by batch size): one query at a time on this path.
        options = dict(prompt=self.spec.query_prompt, prompt_name=self.spec.query_prompt_name)
        return self._encode(texts, **options) if len(texts) <= 1 else np.concatenate([self._encode([t], **options) for t in texts])

    def _encode(self, texts: list[str], prompt: str | None, prompt_name: str | None) -> np.ndarray:
        if self._static is not None:
            return self._static.encode(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        options = dict(batch_size=self.spec.batch_size, prompt=prompt, prompt_name=prompt_name,
                       normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        if len(texts) <= self.spec.batch_size:
            return np.ascontiguousarray(self.model.encode(texts, **options), dtype=np.float32)
        # `streams` batches at once, cut from the texts sorted by token count: a batch is padded to its
        # longest text, and encode()'s sort by characters leaves about a third of the token slots padding
        # on 2Wiki's sentences at batch 16 (docs/indexing.md, "Build the 2Wiki index").
        batches = self._batches_by_length(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)

        def run(idx: np.ndarray) -> None:
            out[idx] = self.model.encode([texts[i] for i in idx], **options)

        if self.streams == 1:
            for idx in batches:
                run(idx)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.streams, thread_name_prefix="arag-embed")
            list(self._pool.map(run, batches))  # waits for every batch; re-raises the first error
        return out

    def _batches_by_length(self, texts: list[str]) -> list[np.ndarray]:
        """Indices of `texts` in batches of `spec.batch_size`, longest first by token count."""
        order = np.argsort(-token_counts(self.model, texts), kind="stable")
        return [order[i : i + self.spec.batch_size] for i in range(0, len(texts), self.spec.batch_size)]


def token_counts(model, texts: list[str]) -> np.ndarray:
    """Tokens of each text as `model` encodes it (truncated, specials included); characters without a tokenizer."""
    tokenizer, limit = getattr(model, "tokenizer", None), getattr(model, "max_seq_length", None)
    if tokenizer is None or not callable(tokenizer):
        return np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    ids = tokenizer(texts, truncation=bool(limit), max_length=limit or None, return_attention_mask=False, return_token_type_ids=False)["input_ids"]
    return np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(texts))
