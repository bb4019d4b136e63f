"""Sentence embeddings with sentence-transformers, from a local or packaged model (no hub access).

The same `EmbedderSpec` is stored in the index manifest, so the retrieval tools encode queries
with exactly the model (and query prompt) that embedded the sentences.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class EmbedderSpec:
    name: str  # recorded in the manifest, e.g. "all-MiniLM-L6-v2"
    path: str | None = None  # a local model folder
    package: str | None = None  # or a Python package exposing get_model_path() (bundled weights)
    query_prompt: str | None = None  # prepended to queries only (e.g. Qwen3-Embedding's instruction)
    query_prompt_name: str | None = None  # or a named prompt from the model's own config
    max_seq_length: int | None = None
    # Run-time settings: they change speed, not which vectors come out, so they are not part of
    # the index identity (see `identity`).
    device: str = "cpu"
    dtype: str = "float32"
    batch_size: int = 32
    threads: int | None = None  # torch intra-op threads on CPU; None: all cores of the machine

    def identity(self) -> dict[str, Any]:
        """The fields that decide the vectors: a change means the index must be rebuilt."""
        return {k: v for k, v in asdict(self).items() if k in ("name", "package", "path", "query_prompt", "query_prompt_name", "max_seq_length")}

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
                raise ImportError(
                    f"embedder '{self.name}' needs the package '{self.package}': pip install {self.package.replace('_', '-')}"
                ) from exc
            return str(module.get_model_path())
        raise ValueError(f"embedder '{self.name}': set either embedder.path or embedder.package")

    @classmethod
    def from_config(cls, cfg: Any) -> "EmbedderSpec":
        known = set(cls.__dataclass_fields__)
        values = {k: cfg[k] for k in cfg if k in known}
        return cls(**values)


class SentenceEmbedder:
    """Loads the model once; encodes documents' sentences and queries into unit vectors."""

    def __init__(self, spec: EmbedderSpec):
        # Never reach for the hub: the model is a local folder.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        if spec.device == "cpu":
            # Ray sets OMP_NUM_THREADS to the CPUs it reserved for a worker (often 1); an
            # embedding actor should use the cores it was sized for, by default all of them.
            torch.set_num_threads(int(spec.threads or len(os.sched_getaffinity(0))))
        self.spec = spec
        kwargs: dict[str, Any] = {"device": spec.device}
        if spec.dtype != "float32":
            kwargs["model_kwargs"] = {"torch_dtype": getattr(torch, spec.dtype)}
        self.model = SentenceTransformer(spec.resolve_path(), **kwargs)
        if spec.max_seq_length:
            self.model.max_seq_length = spec.max_seq_length
        self.dimension = int(self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") else self.model.get_sentence_embedding_dimension())

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, prompt=None, prompt_name=None)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, prompt=self.spec.query_prompt, prompt_name=self.spec.query_prompt_name)

    def _encode(self, texts: list[str], prompt: str | None, prompt_name: str | None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            texts,
            batch_size=self.spec.batch_size,
            prompt=prompt,
            prompt_name=prompt_name,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
