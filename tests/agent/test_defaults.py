"""The official defaults, declared once: AgentConfig holds the agent's defaults (the official A-RAG
configuration's 15 steps, the paper code's 128k token budget); conf/evaluate.yaml, conf/ask.yaml,
the sweep configs and the manual (docs/) are checked against it here. Reply caps follow the paper
(max_tokens >= 16384, appendix B) where the model's window allows, else the window's remainder."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from arag.agent.loop import CONTEXT_MARGIN_TOKENS, AgentConfig, fit_budget
from arag.config.files import conf_dir, conf_path
from arag.llm.base import MIN_REPLY_ROOM, PAPER_REPLY_TOKENS, reply_room
from arag.llm.factory import make_backend
from arag.llm.scripted import ScriptedBackend

DOCS = Path(__file__).resolve().parents[2] / "docs"
REFERENCE = DOCS / "configuration.md"
DEFAULTS = asdict(AgentConfig())


def test_the_official_configuration_runs_15_steps():
    # The official A-RAG config (github.com/Ayanami0730/arag, README @108e87ee: agent.max_loops 15,
    # max_token_budget 128000); the paper text itself names no step limit for its main runs.
    assert DEFAULTS["max_steps"] == 15 and DEFAULTS["token_budget"] == 128_000


@pytest.mark.parametrize("config", ["evaluate", "ask"])
def test_every_agent_key_of_the_yaml_is_the_dataclass_default(config):
    # A model config without guard_rails (openai), so agent.guard_rails takes the YAML's own fallbacks.
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name=config, overrides=["model=openai"])
    assert OmegaConf.to_container(cfg.agent, resolve=True) == DEFAULTS


def documented_defaults() -> dict[str, str]:
    """`agent.*` rows of the configuration reference: key → the default column as written."""
    rows = re.findall(r"^\| `(agent\.[a-z_.*]+)` \| ([^|]+) \|", REFERENCE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {key: value.strip() for key, value in rows}


def test_the_manual_states_the_dataclass_defaults():
    stated = documented_defaults()
    literal = {k: v for k, v in stated.items() if re.fullmatch(r"`?(\d+|null)`?", v)}
    assert {"agent.max_steps", "agent.token_budget"} <= set(literal)
    for key, value in literal.items():
        expected = DEFAULTS[key.removeprefix("agent.")]
        assert value.strip("`") == ("null" if expected is None else str(expected)), key
    text = "\n".join(page.read_text(encoding="utf-8") for page in sorted(DOCS.glob("*.md")))
    assert f"at max_steps {DEFAULTS['max_steps']}" in text  # the effort sweep's fixed step limit
    assert f"{PAPER_REPLY_TOKENS:,}" in text and "window's remainder" in text


def sweep_params(name: str) -> dict[str, str]:
    data = yaml.safe_load(conf_path("sweep", f"{name}.yaml").read_text())
    return {k: str(v) for k, v in data["hydra"]["sweeper"]["params"].items()}


def test_the_sweeps_follow_the_official_step_count():
    effort = sweep_params("test_time_scaling_effort")
    assert effort["agent.max_steps"] == str(DEFAULTS["max_steps"])
    assert effort["model.reasoning_effort"].split(",") == ["minimal", "low", "medium", "high"]
    steps = sweep_params("test_time_scaling_steps")
    assert steps["agent.max_steps"].split(",") == ["5", "10", "15", "20"]  # the paper's Figure 4
    assert str(DEFAULTS["max_steps"]) in steps["agent.max_steps"].split(",")  # the point both sweeps share


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-5-mini", "Qwen/Qwen3-8B"])
def test_a_null_reply_cap_is_the_papers_for_every_family(model):
    backend = make_backend({"backend": "openai", "protocol": "native", "model": model, "base_url": "http://127.0.0.1:9/v1", "max_tokens": None})
    assert backend.max_tokens == PAPER_REPLY_TOKENS == 16_384
    assert ScriptedBackend([]).max_tokens == PAPER_REPLY_TOKENS


@pytest.mark.parametrize(
    "window, budget",
    [
        (None, 128_000),  # a hosted model: the paper code's 128k budget, 16,384 per reply
        (400_000, 128_000),
        (32_768, 32_768 - PAPER_REPLY_TOKENS - CONTEXT_MARGIN_TOKENS),  # holds the whole cap beside as much conversation
        (16_384, 16_384 - MIN_REPLY_ROOM - CONTEXT_MARGIN_TOKENS),  # the embedded 1.5B: replies use the window's remainder
        (8_192, 8_192 - MIN_REPLY_ROOM - CONTEXT_MARGIN_TOKENS),
    ],
)
def test_the_token_budget_keeps_room_for_a_reply_the_window_allows(window, budget):
    backend = ScriptedBackend([])
    backend.context_window = window
    assert fit_budget(AgentConfig(), backend).token_budget == budget
    assert reply_room(PAPER_REPLY_TOKENS, window) == (PAPER_REPLY_TOKENS if window is None or window >= 32_768 else MIN_REPLY_ROOM)


def model_window(cfg: dict) -> int | None:
    return cfg.get("n_ctx") or cfg.get("max_model_len") or cfg.get("context_window")


@pytest.mark.parametrize("path", sorted(conf_path("model").glob("*.yaml")), ids=lambda p: p.stem)
def test_model_configs_cap_replies_as_the_paper_does(path):
    """No model config caps replies below the paper's 16,384; where its window cannot hold that
    beside a conversation, its config says replies get the window's remainder."""
    text = path.read_text()
    cfg = yaml.safe_load(text)
    cap = cfg.get("max_tokens")
    assert cap is None or cap >= PAPER_REPLY_TOKENS, f"{path.name}: max_tokens {cap}"
    window = model_window(cfg)
    if window and reply_room(cap or PAPER_REPLY_TOKENS, window) < PAPER_REPLY_TOKENS:
        line = next(line for line in text.splitlines() if line.startswith("max_tokens:"))
        assert "window's remainder" in line, f"{path.name} does not state its reply cap"
