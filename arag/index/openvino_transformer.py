"""A sentence-transformers model's transformer run by OpenVINO (the embedder's ``openvino`` backend).

Converted locally from the packaged weights and cached (docs/indexing.md, "Build the 2Wiki index"):
the same fp32 graph on faster CPU kernels, about twice torch's sentences/s on a 2-core AVX-512
machine, cosine to torch's vectors above 0.99999; bf16 only on CPUs that compute it natively.
Tokenizer, truncation, prompts, pooling and normalisation stay sentence-transformers' own code.
"""

from __future__ import annotations

import functools
import json
import logging
import queue
import sys
import warnings
from importlib.metadata import version
from pathlib import Path

import numpy as np

from arag.index.model_cache import cache_entry, publish_folder

log = logging.getLogger("arag.embedding")

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


def run_on_openvino(model, model_path: str, spec, threads: int, streams: int, encode) -> str | None:
    """Swap `model`'s transformer for its OpenVINO conversion where that agrees with torch on the probe;
    returns the dtype it computes in, or None with torch left in place and the reason logged."""
    if spec.device != "cpu" or spec.dtype not in OPENVINO_PRECISIONS:
        log.warning("embedder '%s': the openvino backend runs on CPU in %s only; using torch for device=%s dtype=%s",
                    spec.name, " or ".join(OPENVINO_PRECISIONS), spec.device, spec.dtype)
        return None
    transformer = model[0]
    if not hasattr(transformer, "model") or not hasattr(transformer, "tokenizer") or transformer.tokenizer is None:
        log.warning("embedder '%s': not a text transformer model; using torch", spec.name)
        return None
    try:
        ov = import_openvino()
    except ImportError:
        log.warning("embedder '%s': backend openvino asked for but the openvino package is not installed "
                    "(pip install 'arag[cpu]'); using torch, which is slower", spec.name)
        return None
    torch_model = transformer.model
    probe_torch = encode(_PROBE)
    try:
        compiled = load(ov, torch_model, transformer.tokenizer, model_path, threads, streams, spec.dtype)
        transformer.model = compiled
        probe = encode(_PROBE)
    except Exception as exc:  # a model the converter cannot take: torch still works
        transformer.model = torch_model
        log.warning("embedder '%s': openvino conversion failed (%s: %s); using torch", spec.name, type(exc).__name__, exc)
        return None
    cosine = float(np.min(np.sum(probe * probe_torch, axis=1)))
    if cosine < MIN_BACKEND_COSINE:
        transformer.model = torch_model
        log.warning("embedder '%s': openvino vectors differ from torch's (min cosine %.5f); using torch", spec.name, cosine)
        return None
    log.info("embedder '%s': openvino backend, %s, %d threads in %d streams (probe cosine to torch fp32 %.6f)",
             spec.name, compiled.compute_dtype, threads, streams, cosine)
    return compiled.compute_dtype


def import_openvino():
    """`import openvino` with its usage telemetry unimportable while it loads, so the converter binds
    its own no-op stub: an index build must not phone home."""
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
    try:
        return set(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    except Exception:  # an older or unusual plugin: assume the safe minimum
        return {"FP32"}


def load(ov, torch_model, tokenizer, model_path: str, threads: int, streams: int = 1, dtype: str = "float32"):
    """The compiled model standing in for `torch_model`; bfloat16 only where the CPU has it (emulated, it is slower)."""
    example = tokenizer(["a short one", "a somewhat longer example sentence for tracing"], padding=True, return_tensors="pt")
    input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in example]
    ov_model = _converted(ov, torch_model, example, input_names, model_path)
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
    return _module_class()(torch_model, compiled, input_names, streams, dtype)


def _converted(ov, torch_model, example, input_names: list[str], model_path: str):
    versions = {pkg: version(pkg) for pkg in ("openvino", "torch", "transformers", "sentence-transformers")}
    final = cache_entry("openvino", model_path, format=OPENVINO_EXPORT_FORMAT, inputs=input_names, versions=versions)
    xml = final / "model.xml"
    if xml.exists():
        try:
            return ov.Core().read_model(str(xml))
        except Exception as exc:  # a damaged cache entry: convert again below
            log.warning("openvino cache %s unreadable (%s); converting again", final, exc)
    import torch

    class _Traceable(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            given = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            return self.model(input_ids=input_ids, attention_mask=attention_mask, **given, return_dict=True).last_hidden_state

    torch_model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        # Tracing notes Python branches on shapes (e.g. "padding_length > 0"); for an encoder
        # they go the same way for every input, and the start-up probe checks the result.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        ov_model = ov.convert_model(_Traceable(torch_model), example_input=tuple(example[n] for n in input_names))

    def write(tmp: Path) -> None:
        # fp32 weights as they are (save_model would halve them to fp16 by default)
        ov.save_model(ov_model, str(tmp / "model.xml"), compress_to_fp16=False)
        (tmp / "source.json").write_text(json.dumps({"model_path": str(Path(model_path).resolve()), "inputs": input_names}))

    publish_folder(final, write, marker="model.xml", what="openvino cache")
    return ov_model


@functools.cache
def _module_class():
    """The stand-in for the Hugging Face model inside sentence-transformers' Transformer module: a
    torch module holding the replaced model (its parameters still say device and dtype), never running it."""
    import torch

    class OpenVINOModule(torch.nn.Module):
        def __init__(self, torch_model, compiled, input_names: list[str], streams: int = 1, dtype: str = "float32"):
            super().__init__()
            self._tensor = import_openvino().Tensor  # inputs are handed over as tensors sharing their memory
            self.compute_dtype = dtype  # what it computes in (the torch model's parameters stay fp32)
            self.torch_model = torch_model
            self.config = torch_model.config
            self.input_names = input_names
            # One infer request per stream; a caller takes an idle one (and waits when none is).
            self._requests: queue.SimpleQueue = queue.SimpleQueue()
            for _ in range(max(1, streams)):
                self._requests.put(compiled.create_infer_request())

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **_ignored):
            # input_names are the tokenizer's outputs, which sentence-transformers passes on: none is None
            given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            feed = [np.ascontiguousarray(given[name].detach().cpu().numpy(), dtype=np.int64) for name in self.input_names]
            # a copy: the request reuses its output buffer
            hidden = self.run_request(feed, lambda out: torch.from_numpy(np.array(out, dtype=np.float32, copy=True)))
            return {"last_hidden_state": hidden}

        def run_request(self, feed: list, reduce):
            """`reduce(last hidden state)` on an idle infer request (its own buffer, valid only inside
            `reduce`); `feed`: C-contiguous int64 arrays. Inputs are set as tensors over their memory:
            `infer(inputs)` goes through OpenVINO's Python dispatcher, holding the GIL tool calls wait for."""
            request = self._requests.get()
            try:
                for i, value in enumerate(feed):
                    request.set_input_tensor(i, self._tensor(value, shared_memory=True))
                request.infer()
                return reduce(request.get_output_tensor(0).data)
            finally:
                self._requests.put(request)

    return OpenVINOModule
