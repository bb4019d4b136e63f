"""Answer one question and print the trajectory:
`python -m pipelines.ask index.path=<dir> method=arag_full question="..."`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from arag.agent import Agent, AgentConfig
from arag.agent.render import render_episode
from arag.config.cli import pipeline_main
from arag.llm.factory import make_backend
from arag.methods import method_from_config
from pipelines.config_checks import check_ask_config
from pipelines.endpoints import check_model_endpoints
from pipelines.errors import exit_on_error


def build_agent(cfg: DictConfig):
    """(agent, backend, tool context) from an ask config (its keys checked and its model endpoint asked first)."""
    check_ask_config(cfg)
    check_model_endpoints(cfg, ("model",))
    method = method_from_config(OmegaConf.to_container(cfg.method, resolve=True))
    ctx = None
    if method.needs_index():
        from arag.serve.client import index_timeout, open_tools

        ctx = open_tools(cfg.index.path, cfg.index.get("url"), token_env=cfg.index.get("token_env"), require_tools=method.tools, timeout_s=index_timeout(cfg.index.get("timeout_s")))
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    backend = make_backend(model_cfg)
    agent_cfg = AgentConfig.from_dict(OmegaConf.to_container(cfg.agent, resolve=True))
    agent = Agent(backend, method, ctx, protocol=model_cfg.get("protocol", "json"), config=agent_cfg)
    return agent, backend, ctx


def ask(cfg: DictConfig):
    """Run one episode for `cfg.question`; returns the episode record."""
    agent, backend, ctx = build_agent(cfg)
    try:
        return agent.run(str(cfg.question), question_id=cfg.question_id)
    finally:
        backend.close()
        if ctx is not None:
            ctx.close()


@pipeline_main("ask")
def main(cfg: DictConfig) -> None:
    with exit_on_error(also=(RuntimeError,)):  # RuntimeError: e.g. a model that cannot load
        if not cfg.question:
            raise ValueError('give the question: question="..."')
        episode = ask(cfg)
    print(render_episode(episode, int(cfg.show.observation_lines)))
    if cfg.output:
        Path(cfg.output).write_text(json.dumps(episode.to_json(), ensure_ascii=False, indent=2, default=str))
        print(f"episode record: {cfg.output}")
    if episode.status != "answered":
        sys.exit(1)


def quote_question(argv: list[str]) -> list[str]:
    """Let `question="When did Lothair II's mother die?"` work from a shell: the shell drops the
    quotes, and Hydra's override grammar rejects apostrophes and some punctuation in bare values, so
    an unquoted question is quoted for Hydra here."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+") == "question" and not value.startswith(("'", '"')):
            # Hydra escapes: only backslashes before a quote (or before the closing quote) are doubled.
            value = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
            value = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, value)
            arg = f"{key}='{value}'"
        out.append(arg)
    return out


if __name__ == "__main__":
    sys.argv = quote_question(sys.argv)
    main()
