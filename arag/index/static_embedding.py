"""Static (token-lookup) sentence embeddings distilled locally with Model2Vec from a transformer embedder.

A sentence's vector is the normalised mean of its tokens' vectors, with no transformer at encode time
(docs/indexing.md, "Static embedder"). The distilled model is cached per machine; its settings and
the model2vec version are part of the index identity, so another installed model2vec is an error,
not silently other vectors.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from arag.index import model_cache
from arag.strict_settings import from_settings

log = logging.getLogger("arag.embedding")

LIBRARY = "model2vec"
# Bump when what is cached or how it is built changes: old cache entries are then ignored.
STATIC_CACHE_FORMAT = 1
QUANTIZE_TO = ("float32", "float16")
MARKER = "config.json"  # written by StaticModel.save_pretrained: a cache entry holding it is complete


def installed_version(package: str = LIBRARY) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class StaticSpec:
    """Distillation settings (`embedder.static`); each one decides the vectors."""

    pca_dims: int | None = 256  # dimensions kept by PCA (None: the source model's own)
    sif_coefficient: float | None = 1e-4  # SIF weighting of frequent tokens (None: unweighted mean)
    token_remove_pattern: str | None = r"\[unused\d+\]"  # vocabulary tokens left out (a regex)
    quantize_to: str = "float32"  # the stored vectors' precision: float32 or float16
    # The model2vec release that distilled (or will distil) the model; filled in from the installed
    # package when a config leaves it out, and read back from an index's manifest.
    library_version: str | None = None

    def __post_init__(self) -> None:
        if self.quantize_to not in QUANTIZE_TO:
            raise ValueError(f"embedder.static.quantize_to: unknown precision '{self.quantize_to}' (choose one of {', '.join(QUANTIZE_TO)})")
        if self.pca_dims is not None and (isinstance(self.pca_dims, bool) or not isinstance(self.pca_dims, int) or self.pca_dims < 1):
            raise ValueError(f"embedder.static.pca_dims must be a positive whole number or null, got {self.pca_dims!r}")
        if self.sif_coefficient is not None and not 0 < float(self.sif_coefficient) < 1:
            raise ValueError(f"embedder.static.sif_coefficient must lie between 0 and 1 (exclusive) or be null, got {self.sif_coefficient!r}")
        if self.library_version is None:
            found = installed_version()
            if found is None:
                raise ImportError(f"embedder.static needs the {LIBRARY} package to distil the static model: pip install 'arag[cpu]'")
            object.__setattr__(self, "library_version", found)

    @classmethod
    def from_value(cls, value: Any) -> "StaticSpec | None":
        """From a config mapping (an unknown key is an error naming it), a manifest's dict, or None."""
        if value is None or isinstance(value, cls):
            return value
        if not hasattr(value, "keys"):
            raise ValueError(f"embedder.static must be a mapping of distillation settings or null, got {type(value).__name__}")
        return from_settings(cls, {k: value[k] for k in value.keys()}, "embedder.static")


def cache_entry(model_path: str, static: StaticSpec) -> Path:
    versions = {pkg: installed_version(pkg) for pkg in (LIBRARY, "skeletoken", "torch", "transformers", "tokenizers")}
    return model_cache.cache_entry("static", model_path, format=STATIC_CACHE_FORMAT, settings=asdict(static), versions=versions)


def _distil(model_path: str, static: StaticSpec):
    """The static model distilled from the transformer in the local folder `model_path` (its name
    is that path, so model2vec asks no hub for a model card)."""
    import transformers
    from model2vec.distill import distill_from_model

    model = transformers.AutoModel.from_pretrained(model_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_path, use_fast=True)
    settings = {k: v for k, v in asdict(static).items() if k != "library_version"}  # named as model2vec's own parameters
    return distill_from_model(model=model, tokenizer=tokenizer, device="cpu", **settings)


def load_static_model(model_path: str, static: StaticSpec, name: str):
    from model2vec import StaticModel

    if static.library_version != installed_version():
        raise RuntimeError(
            f"embedder '{name}': distilled with {LIBRARY} {static.library_version}, but {installed_version() or 'no version'} is installed; "
            f"install {LIBRARY}=={static.library_version} or rebuild the index"
        )
    final = cache_entry(model_path, static)
    if (final / MARKER).exists():
        try:
            return StaticModel.from_pretrained(str(final), force_download=False)
        except Exception as exc:  # a damaged entry: distil again below
            log.warning("static embedder cache %s unreadable (%s); distilling again", final, exc)
    log.info("embedder '%s': distilling a static model from %s (once per machine; cached in %s)", name, model_path, final.parent)
    model = _distil(model_path, static)
    model_cache.publish_folder(final, lambda tmp: model.save_pretrained(str(tmp)), marker=MARKER, what="static embedder cache")
    return model


class StaticEncoder:
    """Unit float32 vectors from a distilled static model, each independent of the others in the call."""

    def __init__(self, model, max_length: int | None, batch_size: int = 1024):
        self.model = model
        self.max_length = max_length
        self.batch_size = max(1, int(batch_size))
        self.dimension = int(model.dim)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # No worker processes: the index build and the tool server bring their own parallelism.
        vecs = np.asarray(self.model.encode(list(texts), max_length=self.max_length, batch_size=self.batch_size, normalize=False, use_multiprocessing=False), dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        # A text with no known token has no direction: it stays the zero vector.
        return np.ascontiguousarray(vecs / np.where(norms > 0, norms, 1.0), dtype=np.float32)
