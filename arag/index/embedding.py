"""Sentence embeddings with sentence-transformers, from a local or packaged model (no hub access).

The same `EmbedderSpec` is stored in the index manifest, so the retrieval tools encode queries
with exactly the model (and query prompt) that embedded the sentences.

Backends (`EmbedderSpec.backend`):

* ``torch``: plain sentence-transformers on PyTorch (any device, any dtype).
* ``openvino``: on CPU, the transformer runs as an OpenVINO model converted locally from the same
  packaged weights (never downloaded) and cached under ``$ARAG_CACHE_DIR/embedders/openvino``
  (default ``~/.cache/arag/embedders/openvino``), keyed by the model folder and the library
  versions; everything else (tokenizer, truncation, prompts, pooling, normalization) is still
  sentence-transformers' own code, on batches the embedder cuts by token count. It computes the same fp32 graph, only
  with faster CPU kernels: about twice torch's sentences/s on a 2-core AVX-512 machine, with
  per-sentence cosine to torch's vectors above 0.99999. Because the vectors are the same, the
  backend is a run-time setting like the batch size and not part of `identity()`: an index
  built with one backend is searched with the other without a rebuild. With ``dtype:
  bfloat16`` OpenVINO compiles the same model for bf16 arithmetic (on CPUs with AVX512-BF16 or
  AMX: ~2.2x its f32 speed, cosine to the fp32 vectors above 0.9999; elsewhere it stays f32).
  Where OpenVINO is not installed (it is in the ``cpu`` extra), or the spec asks for a GPU or
  another dtype, the embedder says so in the log and uses torch.

With ``static`` settings (`EmbedderSpec.static`, e.g. conf/embedder/minilm-static.yaml) the embedder is
instead a static token-lookup model distilled locally from the spec's model and cached
(arag.index.static_embedding): no transformer runs when sentences or queries are encoded.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import queue
import sys
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from arag.index.model_cache import model_files, publish_folder
from arag.index.static_embedding import StaticEncoder, StaticSpec, load_static_model
from arag.strict_settings import from_settings

log = logging.getLogger("arag.embedding")

BACKENDS = ("torch", "openvino")
DTYPES = ("float32", "bfloat16", "float16")
# The dtypes the openvino backend computes in, with their OpenVINO inference-precision hints.
OPENVINO_PRECISIONS = {"float32": "f32", "bfloat16": "bf16"}
# Bump when the converted model's layout or the conversion itself changes: old caches are ignored.
OPENVINO_EXPORT_FORMAT = 1
# Vectors from a fast backend must match torch's to this cosine on the start-up probe, or torch is used.
MIN_BACKEND_COSINE = 0.999
_PROBE = [
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II.",
    "Paris",
    "The quick brown fox jumps over the lazy dog, and then, tired of jumping, takes a long nap under the old oak tree.",
]


@dataclass(frozen=True)
class EmbedderSpec:
    name: str  # recorded in the manifest, e.g. "all-MiniLM-L6-v2"
    path: str | None = None  # a local model folder
    package: str | None = None  # or a Python package exposing get_model_path() (bundled weights)
    query_prompt: str | None = None  # prepended to queries only (e.g. Qwen3-Embedding's instruction)
    query_prompt_name: str | None = None  # or a named prompt from the model's own config
    max_seq_length: int | None = None
    # The precision the transformer computes in: float32 (exact), or a reduced one that is
    # faster where the hardware has it (bfloat16 on CPUs with AVX512-BF16/AMX, float16 on GPUs);
    # a reduced dtype is part of the index identity.
    dtype: str = "float32"
    # Distillation settings of a static (token-lookup) model made from this model (a mapping in
    # configs and manifests; see arag.index.static_embedding); None: the model itself.
    static: StaticSpec | None = None
    # Run-time settings: they change speed, not which vectors come out, so they are not part of
    # the index identity (see `identity`).
    device: str = "cpu"
    batch_size: int = 32
    threads: int | None = None  # CPU threads in all; None: all cores of the machine
    # Batches encoded at once on CPU, each on threads/streams threads. None: one per thread.
    # Single-threaded batches side by side beat one batch split across threads: no thread waits
    # at a barrier for another that the OS preempted, and tokenizing and pooling run in parallel
    # too. The vectors are the same.
    streams: int | None = None
    backend: str = "torch"  # "torch" or "openvino" (CPU, fp32; same vectors, faster: see the module doc)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"embedder '{self.name}': unknown backend '{self.backend}' (choose one of {', '.join(BACKENDS)})")
        if self.dtype not in DTYPES:
            raise ValueError(f"embedder '{self.name}': unknown dtype '{self.dtype}' (choose one of {', '.join(DTYPES)})")
        object.__setattr__(self, "static", StaticSpec.from_value(self.static))
        if self.static is not None and (self.query_prompt or self.query_prompt_name):
            raise ValueError(f"embedder '{self.name}': a static model has no query prompts (set query_prompt and query_prompt_name to null)")

    def identity(self) -> dict[str, Any]:
        """The fields that decide the vectors: a change means the index must be rebuilt.

        A reduced `dtype` (e.g. bfloat16) moves every vector a little, so it counts; float32 is
        left out, which keeps the identity of indexes built before the dtype counted. So is
        `static` when there is none; a static model's distillation settings all count."""
        keys = ("name", "package", "path", "query_prompt", "query_prompt_name", "max_seq_length")
        out = {k: v for k, v in asdict(self).items() if k in keys}
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
                raise ImportError(
                    f"embedder '{self.name}' needs the package '{self.package}': pip install {self.package.replace('_', '-')}"
                ) from exc
            return str(module.get_model_path())
        raise ValueError(f"embedder '{self.name}': set either embedder.path or embedder.package")

    @classmethod
    def from_config(cls, cfg: Any) -> "EmbedderSpec":
        """From the `embedder` config group; an unknown key is an error that lists the valid ones."""
        return from_settings(cls, {k: cfg[k] for k in cfg}, "embedder")


def on_this_machine(spec: EmbedderSpec) -> EmbedderSpec:
    """`spec` with a device this machine has. The device is a run-time setting (not the vectors'
    identity): an index embedded on GPUs is searched from machines without one (a CPU tool server,
    evaluation workers), whose queries are then encoded on the CPU, in the same dtype."""
    if spec.static is not None or spec.device == "cpu":
        return spec
    import torch

    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        log.info("embedder '%s': built on %s; this machine has no CUDA device, so its queries are encoded on the CPU", spec.name, spec.device)
        return replace(spec, device="cpu")
    return spec


class SentenceEmbedder:
    """Loads the model once; encodes documents' sentences and queries into unit vectors.

    `backend` says what actually runs the transformer ("torch" or "openvino"): it can differ from
    `spec.backend` where the fast backend is unavailable (see the module doc).
    """

    def __init__(self, spec: EmbedderSpec):
        # Never reach for the hub: the model is a local folder.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self._static: StaticEncoder | None = None
        if spec.static is not None:
            self._init_static(spec)
            return
        import torch
        from sentence_transformers import SentenceTransformer

        self.threads = max(1, int(spec.threads or len(os.sched_getaffinity(0))))
        self.streams = 1
        if spec.device == "cpu":
            # Ray sets OMP_NUM_THREADS to the CPUs it reserved for a worker (often 1); an
            # embedding actor should use the cores it was sized for, by default all of them
            # (split among the streams below).
            torch.set_num_threads(self.threads)
        self._pool = None
        self._direct_queries = None  # arag.index.direct_encoding, where the model fits it
        self.spec = spec
        model_path = spec.resolve_path()
        kwargs: dict[str, Any] = {"device": spec.device}
        # OpenVINO converts the fp32 model and lowers the precision when it compiles it; torch
        # loads the weights in the dtype it computes in.
        openvino_candidate = spec.backend == "openvino" and spec.device == "cpu" and spec.dtype in OPENVINO_PRECISIONS
        if spec.dtype != "float32" and not openvino_candidate:
            kwargs["model_kwargs"] = {"torch_dtype": getattr(torch, spec.dtype)}
        self.model = SentenceTransformer(model_path, **kwargs)
        if spec.max_seq_length:
            self.model.max_seq_length = spec.max_seq_length
        self.dimension = int(self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") else self.model.get_sentence_embedding_dimension())
        self.backend = "torch"
        self.precision = spec.dtype  # what the transformer actually computes in
        streams = max(1, min(self.threads, int(spec.streams or self.threads)))
        if spec.backend == "openvino":
            self._try_openvino(model_path, streams)
        if self.backend == "torch" and openvino_candidate and spec.dtype != "float32":
            self.model.to(getattr(torch, spec.dtype))  # loaded in fp32 for a conversion that did not happen
        if spec.device == "cpu":
            self.streams = streams
            if self.backend == "torch":
                torch.set_num_threads(max(1, self.threads // self.streams))
        if self.backend == "openvino":
            self._use_direct_queries()

    def _init_static(self, spec: EmbedderSpec) -> None:
        self.spec = spec
        self._pool = None
        self._direct_queries = None
        self.threads = max(1, int(spec.threads or len(os.sched_getaffinity(0))))
        self.streams = 1
        self._static = StaticEncoder(load_static_model(spec.resolve_path(), spec.static, spec.name), spec.max_seq_length, spec.batch_size)
        self.dimension = self._static.dimension
        self.backend = "static"
        self.precision = spec.static.quantize_to
        if spec.device != "cpu":
            log.info("embedder '%s': a static model runs on CPU (device=%s is not used)", spec.name, spec.device)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, prompt=None, prompt_name=None)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Each query's vector is the one it gets when encoded alone, whatever else is in `texts`
        (the tools micro-batch concurrent queries, and answers must not depend on the batch)."""
        if self._static is not None:  # each text's vector is its own tokens' mean
            return self._static.encode(texts)
        if self._direct_queries is not None:
            return self._direct_queries.encode(texts)  # batches equal-length queries only
        # encode() pads a batch to its longest text, which changes the other vectors' last bits
        # (and a GPU may pick kernels by batch size): one query at a time on this path.
        options = dict(prompt=self.spec.query_prompt, prompt_name=self.spec.query_prompt_name)
        if len(texts) <= 1:
            return self._encode(texts, **options)
        return np.concatenate([self._encode([t], **options) for t in texts])

    def _use_direct_queries(self) -> None:
        """Encode queries on the direct path (arag.index.direct_encoding: same vectors, a fraction
        of encode()'s per-call Python) where the model fits it and its probe agrees."""
        from arag.index.direct_encoding import DirectQueryEncoder

        spec = self.spec
        resolve = getattr(self.model, "_resolve_prompt", None)  # the prompt encode() would prepend
        if resolve is None:
            log.info("embedder '%s': queries through encode() (this sentence-transformers does not say its prompt)", spec.name)
            return
        prompt = resolve(spec.query_prompt, spec.query_prompt_name)
        direct, why = DirectQueryEncoder.build(
            self.model, prompt, spec.batch_size, lambda texts: self._encode(texts, prompt=spec.query_prompt, prompt_name=spec.query_prompt_name)
        )
        if direct is None:
            log.info("embedder '%s': queries through encode() (no direct path: %s)", spec.name, why)
        self._direct_queries = direct

    def _encode(self, texts: list[str], prompt: str | None, prompt_name: str | None) -> np.ndarray:
        if self._static is not None:
            return self._static.encode(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        options = dict(
            batch_size=self.spec.batch_size,
            prompt=prompt,
            prompt_name=prompt_name,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        if len(texts) <= self.spec.batch_size:
            return np.ascontiguousarray(self.model.encode(texts, **options), dtype=np.float32)
        # Each batch through sentence-transformers' own encode (prompts, truncation, pooling,
        # normalization), on `streams` batches at once. A batch is computed padded to its longest
        # text, so batches are cut from the texts sorted by token count, longest first; encode()
        # sorts by characters, which on 2Wiki's sentences leaves about a third of the computed
        # token slots padding at batch 16 (4% by tokens). The vectors are the same up to float
        # rounding, whatever the order.
        batches = self._batches_by_length(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)

        def run(idx: np.ndarray) -> None:
            out[idx] = self.model.encode([texts[i] for i in idx], **options)

        if self.streams == 1:
            for idx in batches:
                run(idx)
            return out
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.streams, thread_name_prefix="arag-embed")
        for _ in self._pool.map(run, batches):  # re-raises the first error
            pass
        return out

    def _batches_by_length(self, texts: list[str]) -> list[np.ndarray]:
        """Indices of `texts` in batches of `spec.batch_size`, longest first by token count (as
        the model truncates it; characters where the model has no tokenizer)."""
        order = np.argsort(-token_counts(self.model, texts), kind="stable")
        return [order[i : i + self.spec.batch_size] for i in range(0, len(texts), self.spec.batch_size)]

    # -- OpenVINO ---------------------------------------------------------------------------------

    def _try_openvino(self, model_path: str, streams: int) -> None:
        spec = self.spec
        if spec.device != "cpu" or spec.dtype not in OPENVINO_PRECISIONS:
            log.warning("embedder '%s': the openvino backend runs on CPU in %s only; using torch for device=%s dtype=%s",
                        spec.name, " or ".join(OPENVINO_PRECISIONS), spec.device, spec.dtype)
            return
        transformer = self.model[0]
        if not hasattr(transformer, "model") or not hasattr(transformer, "tokenizer") or transformer.tokenizer is None:
            log.warning("embedder '%s': not a text transformer model; using torch", spec.name)
            return
        try:
            ov = import_openvino()
        except ImportError:
            log.warning("embedder '%s': backend openvino asked for but the openvino package is not installed "
                        "(pip install 'arag[cpu]'); using torch, which is slower", spec.name)
            return
        torch_model = transformer.model
        probe_torch = self._encode(_PROBE, None, None)
        try:
            encoder = OpenVINOTransformer.load(ov, torch_model, transformer.tokenizer, model_path, self.threads, streams, spec.dtype)
            transformer.model = encoder
            probe = self._encode(_PROBE, None, None)
        except Exception as exc:  # a model the converter cannot take: torch still works
            transformer.model = torch_model
            log.warning("embedder '%s': openvino conversion failed (%s: %s); using torch", spec.name, type(exc).__name__, exc)
            return
        cosine = float(np.min(np.sum(probe * probe_torch, axis=1)))
        if cosine < MIN_BACKEND_COSINE:
            transformer.model = torch_model
            log.warning("embedder '%s': openvino vectors differ from torch's (min cosine %.5f); using torch", spec.name, cosine)
            return
        self.backend = "openvino"
        self.precision = encoder.compute_dtype
        log.info("embedder '%s': openvino backend, %s, %d threads in %d streams (probe cosine to torch fp32 %.6f)",
                 spec.name, encoder.compute_dtype, self.threads, streams, cosine)


def token_counts(model, texts: list[str]) -> np.ndarray:
    """Tokens of each text as `model` (a SentenceTransformer) encodes it, special tokens included,
    truncated at its max_seq_length; the character count where it has no text tokenizer."""
    tokenizer, limit = getattr(model, "tokenizer", None), getattr(model, "max_seq_length", None)
    if tokenizer is None or not callable(tokenizer):
        return np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    ids = tokenizer(
        texts, truncation=bool(limit), max_length=limit or None,
        return_attention_mask=False, return_token_type_ids=False,
    )["input_ids"]
    return np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(texts))


def import_openvino():
    """`import openvino`, with its usage telemetry off.

    OpenVINO's model-conversion module, which `import openvino` loads, reports usage to an
    analytics service unless the user has opted out. An index build must not phone home, so
    the telemetry package is made unimportable while openvino loads: the converter then binds
    its own built-in no-op stub for the life of the process. (Where openvino was already
    imported elsewhere in the process, that import decided.)
    """
    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    blocked = [name for name in ("openvino_telemetry", "openvino_telemetry.backend") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` raise ImportError
    try:
        import openvino
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return openvino


def cpu_capabilities(core) -> set[str]:
    """OpenVINO's view of what this CPU computes natively (e.g. FP32, BF16, INT8)."""
    try:
        return set(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    except Exception:  # an older or unusual plugin: assume the safe minimum
        return {"FP32"}


def openvino_cache_root() -> Path:
    env = os.environ.get("ARAG_CACHE_DIR")
    return (Path(env) if env else Path.home() / ".cache" / "arag") / "embedders" / "openvino"


def _model_key(model_path: str, input_names: list[str]) -> str:
    """Which converted model fits: the model folder's files (path, size, mtime) and the versions
    of everything that takes part in the conversion."""
    from importlib.metadata import version

    material = {
        "format": OPENVINO_EXPORT_FORMAT,
        "model": str(Path(model_path).resolve()),
        "files": model_files(model_path),
        "inputs": input_names,
        "versions": {pkg: version(pkg) for pkg in ("openvino", "torch", "transformers", "sentence-transformers")},
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


class OpenVINOTransformer:
    """Stands in for the Hugging Face model inside sentence-transformers' Transformer module:
    called with the tokenizer's tensors, it returns `last_hidden_state` computed by OpenVINO.

    `module(...)` builds the stand-in, a torch module (sentence-transformers keeps its model as
    a child module) that holds the replaced torch model as `torch_model` (so the parameters
    still say which device and dtype the model has) but never runs it.
    """

    _module_class = None

    @classmethod
    def module(cls, torch_model, compiled, input_names: list[str], streams: int = 1, dtype: str = "float32"):
        if cls._module_class is None:
            cls._module_class = _define_module_class()
        return cls._module_class(torch_model, compiled, input_names, streams, dtype)

    @classmethod
    def load(cls, ov, torch_model, tokenizer, model_path: str, threads: int, streams: int = 1, dtype: str = "float32"):
        """`dtype`: "float32", or "bfloat16" where the CPU computes bf16 natively (AVX512-BF16/AMX);
        elsewhere bf16 would be emulated, slower than f32, so float32 is used and the log says so."""
        example = tokenizer(["a short one", "a somewhat longer example sentence for tracing"], padding=True, return_tensors="pt")
        input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in example]
        ov_model = cls._converted(ov, torch_model, example, input_names, model_path)
        core = ov.Core()
        if dtype == "bfloat16" and "BF16" not in cpu_capabilities(core):
            log.warning("this CPU has no native bf16 (AVX512-BF16 or AMX); the openvino embedder computes in f32")
            dtype = "float32"
        compiled = core.compile_model(
            ov_model,
            "CPU",
            {
                # f32 is exactly torch's graph; bf16 is opt-in (embedder.dtype) and part of the index identity.
                "INFERENCE_PRECISION_HINT": OPENVINO_PRECISIONS[dtype],
                "INFERENCE_NUM_THREADS": int(threads),
                "NUM_STREAMS": int(streams),
                # No pinning of threads to cores: an actor shares the machine (other actors,
                # phase-1 tasks, other jobs), and pinned threads cannot step aside.
                "ENABLE_CPU_PINNING": False,
            },
        )
        return cls.module(torch_model, compiled, input_names, streams, dtype)

    @staticmethod
    def _converted(ov, torch_model, example, input_names: list[str], model_path: str):
        """The OpenVINO model: read from the cache, or converted from the torch model and cached."""
        final = openvino_cache_root() / f"{Path(model_path).name}-{_model_key(model_path, input_names)}"
        xml = final / "model.xml"
        if xml.exists():
            try:
                return ov.Core().read_model(str(xml))
            except Exception as exc:  # a damaged cache entry: convert again below
                log.warning("openvino cache %s unreadable (%s); converting again", final, exc)
        ov_model = _convert(ov, torch_model, example, input_names)

        def write(tmp: Path) -> None:
            # fp32 weights as they are (save_model would halve them to fp16 by default)
            ov.save_model(ov_model, str(tmp / "model.xml"), compress_to_fp16=False)
            (tmp / "source.json").write_text(json.dumps({"model_path": str(Path(model_path).resolve()), "inputs": input_names}))

        publish_folder(final, write, marker="model.xml", what="openvino cache")
        return ov_model


def _convert(ov, torch_model, example, input_names: list[str]):
    import torch

    class _Traceable(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            return self.model(**kwargs, return_dict=True).last_hidden_state

    torch_model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        # Tracing notes Python branches on shapes (e.g. "padding_length > 0"); for an encoder
        # they go the same way for every input, and the start-up probe checks the result.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return ov.convert_model(_Traceable(torch_model), example_input=tuple(example[n] for n in input_names))


def _define_module_class():
    import torch

    class _OpenVINOModule(torch.nn.Module):
        def __init__(self, torch_model, compiled, input_names: list[str], streams: int = 1, dtype: str = "float32"):
            super().__init__()
            self._tensor = import_openvino().Tensor  # inputs are handed over as tensors sharing their memory
            self.compute_dtype = dtype  # what it computes in (the torch model's parameters stay fp32)
            self.torch_model = torch_model
            self.config = torch_model.config
            self.input_names = input_names
            self._compiled = compiled
            # One infer request per stream; a caller takes an idle one (and waits when none is).
            self._requests: queue.SimpleQueue = queue.SimpleQueue()
            for _ in range(max(1, streams)):
                self._requests.put(compiled.create_infer_request())

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **_ignored):
            given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            feed = []
            for name in self.input_names:
                value = given[name]
                if value is None:
                    if name != "token_type_ids":
                        raise ValueError(f"openvino encoder: missing input '{name}'")
                    value = torch.zeros_like(input_ids)
                feed.append(np.ascontiguousarray(value.detach().cpu().numpy(), dtype=np.int64))
            # a copy: the request reuses its output buffer
            hidden = self.run_request(feed, lambda out: torch.from_numpy(np.array(out, dtype=np.float32, copy=True)))
            return {"last_hidden_state": hidden}

        def run_request(self, feed: list, reduce):
            """`reduce(last hidden state)` on an idle infer request (waits for one); the state is
            the request's own buffer, valid only inside `reduce`. `feed`: C-contiguous int64
            arrays, one per input in order.

            The inputs are set as tensors over the arrays' own memory and `infer()` gets no
            arguments: `infer(inputs)` sends them through OpenVINO's Python data dispatcher
            (single-dispatch look-ups, a result dictionary per query), Python that holds the GIL
            concurrent tool calls wait for."""
            request = self._requests.get()
            try:
                for i, value in enumerate(feed):
                    request.set_input_tensor(i, self._tensor(value, shared_memory=True))
                request.infer()
                return reduce(request.get_output_tensor(0).data)
            finally:
                self._requests.put(request)

    return _OpenVINOModule
