"""Whether the texts a run's model was shown (the identity's `texts`) are its method preset's, read at
the run's commit with git (docs/evaluation.md, "Protocol", "Texts by fingerprint")."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

from arag.config.files import conf_path
from arag.evaluation import run_settings

PRESET = "preset"
CUSTOM = "custom"
EARLIER = "earlier code"
# The texts the card names, as model_texts keys them.
SYSTEM, FINAL = "system", "final"
PROMPT_KEYS = {SYSTEM: "system_prompt", FINAL: "final_prompt"}


def fingerprint(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class TextCheck:
    status: str  # PRESET, CUSTOM or EARLIER
    sha: str  # the shown text's fingerprint
    note: str = ""  # how the preset was read, when not at the run's own commit


@lru_cache(maxsize=64)
def preset_at(name: str, commit: str | None) -> tuple[dict[str, Any] | None, str]:
    """conf/method/<name>.yaml at `commit`, and a note when the checkout's file stood in for it."""
    path = conf_path("method", f"{name}.yaml")
    note = ""
    if commit and commit != run_settings.code_version().get("commit"):
        try:
            root = Path(__file__).resolve().parents[2]
            relative = path.resolve().relative_to(root)
            text = subprocess.run(["git", "show", f"{commit}:{relative.as_posix()}"], cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout
            return yaml.safe_load(text), ""
        except (OSError, ValueError, subprocess.SubprocessError):
            note = f"the preset as of this checkout: code {commit[:7]} not in git here"
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")), note
    except OSError:
        return None, note


def prompt_checks(method_cfg: Mapping[str, Any], texts: Mapping[str, Any], commit: str | None) -> dict[str, TextCheck]:
    shown = texts.get("method") or {}
    preset, note = preset_at(str(method_cfg.get("name")), commit)
    if preset is None:  # no preset of that name: a method config of the user's own
        return {text: TextCheck(CUSTOM, fingerprint(shown[text])) for text in PROMPT_KEYS if text in shown}
    # a key the preset leaves out takes the class default; the run's config then holds it only when set
    return {text: TextCheck(PRESET if method_cfg.get(key) == preset.get(key) else CUSTOM, fingerprint(shown[text]), note)
            for text, key in PROMPT_KEYS.items() if text in shown}


def tool_checks(method_cfg: Mapping[str, Any], texts: Mapping[str, Any], chunk_ids: Mapping[str, str] | None, same_code: bool, built: Any = None) -> dict[str, TextCheck]:
    """Each tool's description and parameters as shown, against the checkout's code's."""
    shown = {s["function"]["name"]: s["function"] for s in texts.get("tools") or []}
    if not shown:
        return {}
    try:
        rendered = run_settings.model_texts(dict(method_cfg), str(texts.get("protocol") or "json"), dict(chunk_ids) if chunk_ids else None, built)
        ours = {s["function"]["name"]: s["function"] for s in rendered["tools"]}
    except (KeyError, ValueError, TypeError):
        ours = {}
    changed = CUSTOM if same_code else EARLIER
    return {name: TextCheck(PRESET if ours.get(name) == function else changed, fingerprint(function)) for name, function in shown.items()}


# The rules our prompts add to the paper's: {a phrase that states it: its name on the card}.
ADDED_RULES = {"one tool per step": "one tool per step", "ids of the form": "the chunk-id form", "only the chunks you need": "read only the chunks you need"}


def added_rules(system_text: str) -> list[str]:
    """The rules our prompts add to the paper's, found in a system prompt."""
    return [rule for phrase, rule in ADDED_RULES.items() if phrase in system_text.lower()]
