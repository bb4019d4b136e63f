"""The A-RAG paper's published numbers (conf/paper_results/: Tables 1, 2 and 3), shown beside ours by
`python -m pipelines.report report.paper_columns=true`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAPER_RESULTS_FILE = "a_rag_table1.yaml"
PAPER_ABLATIONS_FILE = "a_rag_table2.yaml"  # the same layout as Table 1
PAPER_TOKENS_FILE = "a_rag_table3.yaml"


def _load(name: str, path: str | Path | None, **kinds: type) -> list[Any]:
    """The file's fields named in `kinds`, in order; a missing or mistyped field names the file and the key."""
    from omegaconf import OmegaConf

    from arag.config.files import conf_path

    source = Path(path) if path else conf_path("paper_results", name)
    data = OmegaConf.to_container(OmegaConf.load(source))
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a mapping of the paper's published numbers, got {type(data).__name__}")
    for key, kind in kinds.items():
        if key not in data:
            raise ValueError(f"{source}: missing field {key!r}")
        if not isinstance(data[key], kind):
            raise ValueError(f"{source}: field {key!r} must be a {kind.__name__}, got {type(data[key]).__name__}")
    return [data[key] for key in kinds]


@dataclass(frozen=True)
class PaperResults:
    """The paper's Table 1 (or `table=` Table 2): per backbone, method and dataset, [LLM-Acc, Cont-Acc] in %."""

    source: str
    backbones: dict[str, dict[str, dict[str, list[float | None]]]]

    @classmethod
    def load(cls, path: str | Path | None = None, *, table: str = PAPER_RESULTS_FILE) -> "PaperResults":
        return cls(*_load(table, path, source=str, backbones=dict))

    def backbone(self, model: str) -> str | None:
        """The paper backbone a model name names (e.g. 'gpt-5-mini-2025-08-07' → 'gpt-5-mini')."""
        named = [b for b in self.backbones if b in str(model).lower()]
        return max(named, key=len) if named else None

    def cell(self, backbone: str, method: str, dataset: str, column: int) -> float | None:
        """Published value in % (column 0: LLM-Acc, 1: Cont-Acc), None where not reported."""
        values = self.backbones[backbone].get(method, {}).get(dataset)
        return values[column] if values else None


@dataclass(frozen=True)
class PaperTokens:
    """The paper's Table 3: mean retrieved tokens per question, per method and dataset, for its one backbone."""

    source: str
    backbone: str
    tokens: dict[str, dict[str, int]]

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PaperTokens":
        return cls(*_load(PAPER_TOKENS_FILE, path, source=str, backbone=str, retrieved_tokens=dict))

    def is_backbone(self, model: str) -> bool:
        return self.backbone in str(model).lower()

    def cell(self, method: str, dataset: str) -> int | None:
        return self.tokens.get(method, {}).get(dataset)
