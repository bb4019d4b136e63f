"""pipelines.ask through its Hydra config, with the scripted backend (fast)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from arag.agent.render import render_episode
from arag.config.files import conf_dir
from pipelines.ask import ask

CONF = str(conf_dir())


def compose_ask(*overrides: str):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config_name="ask", overrides=list(overrides))


def test_default_config_is_the_embedded_model():
    cfg = compose_ask("question=x")
    assert cfg.model.backend == "llamacpp" and cfg.model.protocol == "json" and cfg.method.name == "arag_full"
    assert compose_ask("model=llamacpp_qwen2.5_coder_0.5b").model.model == "qwen2.5-coder-0.5b-instruct-q4"


def test_ask_with_scripted_backend(agent_index, monkeypatch):
    from tests.support.tiny_index import fake_encode

    import arag.tools.hosting.context as context

    # The tiny index has a fake embedder; give the tool context the fake encoder.
    original = context.ToolContext.__init__
    monkeypatch.setattr(context.ToolContext, "__init__", lambda self, index, **kw: original(self, index, encoder=fake_encode, **kw))
    read = {"tool": "chunk_read", "arguments": {"chunk_ids": ["1#0"]}}
    script = [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair II"]}}, read, read, {"answer": "Ermengarde of Tours"}]
    cfg = compose_ask(f"index.path={agent_index.path}", "model=scripted", "question=Who was the mother of Lothair II?")
    cfg.model.script = script
    ep = ask(cfg)
    assert ep.status == "answered" and ep.answer == "Ermengarde of Tours" and ep.method == "arag_full"
    text = render_episode(ep)
    assert "step 1" in text and "keyword_search" in text and "His mother was Ermengarde of Tours." in text and "answer: Ermengarde of Tours" in text
    assert text.count("unusable: already read") == 1  # the second read brought nothing new


def test_ask_cli_direct_method():
    script = "[{answer:Paris}]"  # Hydra's override syntax
    out = subprocess.run(
        [sys.executable, "-m", "pipelines.ask", "method=direct", "model=scripted", f"model.script={script}", "question=Capital of France?", "hydra.run.dir=/tmp/arag-ask-test"],
        capture_output=True, text=True, timeout=300, cwd=Path(CONF).parent,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "answer: Paris" in out.stdout


def test_ask_cli_needs_a_question():
    out = subprocess.run([sys.executable, "-m", "pipelines.ask", "model=scripted", "hydra.run.dir=/tmp/arag-ask-test"], capture_output=True, text=True, timeout=300, cwd=Path(CONF).parent)
    assert out.returncode != 0 and "question" in out.stderr


def test_every_model_config_is_well_formed():
    from arag.llm.base import JSON, NATIVE

    names = sorted(p.stem for p in (Path(CONF) / "model").glob("*.yaml"))
    assert {"llamacpp_qwen2.5_coder_1.5b", "openai", "scripted"} <= set(names)
    for name in names:
        cfg = compose_ask(f"model={name}").model
        assert cfg.backend in ("llamacpp", "openai", "scripted", "vllm") and cfg.protocol in (JSON, NATIVE), name


def test_openai_configs_build_a_backend():
    pytest.importorskip("httpx")
    from omegaconf import OmegaConf

    from arag.llm.factory import make_backend

    for name in ("openai", "llamacpp_server"):
        backend = make_backend(OmegaConf.to_container(compose_ask(f"model={name}").model, resolve=True))
        assert backend.kind == "openai" and backend.describe()["base_url"].startswith("http://127.0.0.1")


def test_questions_with_punctuation_reach_hydra_intact():
    from pipelines.ask import quote_question

    argv = quote_question(["ask.py", "question=When did Lothair II's mother die? (a, b) = [c]", "method=direct", "question_id=x"])
    assert argv[2:] == ["method=direct", "question_id=x"]
    assert compose_ask(argv[1]).question == "When did Lothair II's mother die? (a, b) = [c]"
    assert quote_question(["question='already quoted'"]) == ["question='already quoted'"]
    for q in ["back\\slash's", "a\\\\'b", "ends\\"]:
        assert compose_ask(quote_question([f"question={q}"])[0]).question == q
