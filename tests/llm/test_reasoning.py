from __future__ import annotations

import pytest

from arag.llm.reasoning import family_of, resolve
from arag.llm.types import ConfigurationError


def test_families():
    assert family_of("openai/gpt-oss-20b") == "gpt-oss"
    assert family_of("Qwen/Qwen3-8B") == "qwen3"
    assert family_of("Qwen/Qwen3-Coder-30B-A3B") == "none"
    assert family_of("o4-mini") == "openai-reasoning" and family_of("gpt-5-mini") == "openai-reasoning"
    assert family_of("qwen2.5-coder-1.5b-instruct") == "none"


def test_mapping():
    assert resolve("high", "gpt-oss").request == {"reasoning_effort": "high"}
    assert resolve("minimal", "openai-reasoning").request == {"reasoning_effort": "minimal"}
    off = resolve("minimal", "qwen3")
    assert off.chat_template_kwargs == {"enable_thinking": False} and off.thinking_budget is None
    low = resolve("low", "qwen3")
    assert low.chat_template_kwargs == {"enable_thinking": True} and low.thinking_budget == 512
    assert resolve(None, "none").supported


@pytest.mark.parametrize("level,family", [("minimal", "gpt-oss"), ("low", "none"), ("high", "none")])
def test_unsupported_is_said(level, family):
    with pytest.raises(ConfigurationError, match="not supported"):
        resolve(level, family)
    s = resolve(level, family, on_unsupported="record")
    assert not s.supported and "unsupported" in s.note and s.request == {}


def test_bad_values():
    with pytest.raises(ConfigurationError):
        resolve("extreme", "qwen3")
    with pytest.raises(ConfigurationError):
        resolve("low", "mystery")
