"""Query encoding straight through the fast tokenizer and the OpenVINO model, pooled in numpy.

Why: `SentenceTransformer.encode` spends about 1 ms of Python per call, holding the GIL, around ~6 ms
of inference without it, and a tool server's concurrent callers queue for that millisecond. Used only
where `build`'s probe shows the same token ids and vectors as `encode()` (docs/tools.md, "Concurrency").
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np

# Vectors must match encode()'s this closely on the probe (unit vectors: a per-component
# difference of float32 rounding size, not a different computation).
MAX_PROBE_DIFFERENCE = 1e-5
_PROBE = [
    "Who directed the film that won the award in 1998?",
    "Paris",
    "Zürich, São Paulo and Ελληνικά: naïve café",
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II. " * 30,  # past the length limit
]


class DirectQueryEncoder:
    """texts → unit float32 vectors (n, d), as `SentenceTransformer.encode(texts, prompt=prompt, normalize_embeddings=True)`."""

    def __init__(self, tokenizer: Any, input_names: list[str], run: Callable, pooling: str, prompt: str | None, batch_size: int, dimension: int):
        self._tokenizer = tokenizer  # a tokenizers.Tokenizer with truncation and padding set
        self._input_names = input_names
        self._run = run  # (feed, reduce) -> reduce(last hidden state), on an idle infer request
        self._pooling = pooling
        self._prompt = prompt or ""
        self.batch_size = max(1, int(batch_size))
        self.dimension = dimension

    @classmethod
    def build(cls, model: Any, prompt: str | None, batch_size: int, reference: Callable[[list[str]], np.ndarray]) -> tuple["DirectQueryEncoder | None", str]:
        """(the encoder, "") where `model` fits and the probe agrees with `reference` (its encode()); else (None, why)."""
        modules = list(model)
        names = [type(m).__name__ for m in modules]
        if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None, f"modules {names} (direct path: Transformer, Pooling[, Normalize])"
        transformer, pooling = modules[0], modules[1]
        ov_model = getattr(transformer, "model", None)
        if not hasattr(ov_model, "run_request"):
            return None, "the transformer does not run on OpenVINO"
        backend = getattr(transformer.tokenizer, "backend_tokenizer", None)
        if backend is None:
            return None, "no fast (Rust) tokenizer"
        mode = getattr(pooling, "pooling_mode", None)
        if mode not in ("mean", "cls"):
            return None, f"pooling mode {mode!r} (direct path: mean or cls)"
        if prompt and not getattr(pooling, "include_prompt", True):
            return None, "a prompt excluded from pooling"
        pad_id = transformer.tokenizer.pad_token_id
        if pad_id is None:
            return None, "the tokenizer has no padding token"
        tokenizer = copy.deepcopy(backend)  # the settings below must not change the shared one
        tokenizer.enable_truncation(int(model.max_seq_length))
        tokenizer.enable_padding(pad_id=pad_id, pad_token=transformer.tokenizer.pad_token, direction=transformer.tokenizer.padding_side)
        dimension = int(reference(["a"]).shape[1])
        encoder = cls(tokenizer, list(ov_model.input_names), ov_model.run_request, mode, prompt, batch_size, dimension)
        expected = transformer.preprocess(_PROBE, prompt=prompt)
        got = encoder._features(_PROBE)
        for name in encoder._input_names:
            if name in expected and not np.array_equal(expected[name].numpy(), got[name]):
                return None, f"its {name} differ from the transformer's own preprocessing"
        difference = float(np.max(np.abs(encoder.encode(_PROBE) - reference(_PROBE))))
        if difference > MAX_PROBE_DIFFERENCE:
            return None, f"its vectors differ from encode()'s by up to {difference:.2e}"
        return encoder, ""

    def encode(self, texts: list[str]) -> np.ndarray:
        # As encode() does: batches cut from the texts sorted by length, longest first (little padding).
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i in range(0, len(texts), self.batch_size):
            idx = order[i : i + self.batch_size]
            out[idx] = self._encode_batch([texts[j] for j in idx])
        return out

    def _features(self, texts: list[str]) -> dict[str, np.ndarray]:
        encodings = self._tokenizer.encode_batch([self._prompt + t for t in texts] if self._prompt else texts)
        return {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """Queries of equal token length run together, each length on its own: a padded row's
        vector differs from the same text encoded alone in its last bits (up to 1.6e-7), which can
        flip a near-tie, so without padding a query's vector never depends on its batch."""
        features = self._features(texts)
        lengths = features["attention_mask"].sum(axis=1)
        if lengths.min() == lengths.max():
            return self._encode_features(features)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for length in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == length)
            out[rows] = self._encode_features(self._features([texts[i] for i in rows.tolist()]))
        return out

    def _encode_features(self, features: dict[str, np.ndarray]) -> np.ndarray:
        mask = features["attention_mask"]
        pooled = self._run([features[n] for n in self._input_names], lambda hidden: self._pool(hidden, mask))
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)  # torch's F.normalize eps
        return np.ascontiguousarray(pooled / norms, dtype=np.float32)

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._pooling == "cls":
            return np.array(hidden[np.arange(len(mask)), mask.argmax(axis=1)], dtype=np.float32)
        weights = mask.astype(np.float32)
        summed = np.einsum("bld,bl->bd", hidden, weights, dtype=np.float32)
        return summed / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
