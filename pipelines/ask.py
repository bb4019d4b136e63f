"""Answer one question and print the trajectory:
`python -m pipelines.ask index.path=<dir> method=arag_full question="..."`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from omegaconf import DictConfig

from arag.agent import Agent
from arag.agent.render import render_episode
from pipelines.command_line import pipeline_main
from arag.config.schemas import AskPipeline
from arag.llm.factory import make_backend
from arag.methods import method_from_config
from pipelines.config_checks import checked_settings
from pipelines.endpoints import check_model_endpoints
from pipelines.errors import exit_on_error


def build_agent(config: AskPipeline):
    """(agent, backend, tool context) from an ask's settings."""
    method = method_from_config(config.method)
    ctx = None
    if method.needs_index():
        from arag.serve.client import open_tools

        index = config.index
        ctx = open_tools(index.path, index.url, token_env=index.token_env, require_tools=method.tools, timeout_s=index.timeout_s)
    backend = make_backend(config.model)
    agent = Agent(backend, method, ctx, protocol=config.model.get("protocol", "json"), config=config.agent)
    return agent, backend, ctx


def ask_settings(cfg: DictConfig) -> AskPipeline:
    config = checked_settings(cfg)
    if not config.question:
        raise ValueError('give the question: question="..."')
    check_model_endpoints(cfg, ("model",))
    return config


def ask(cfg: DictConfig | AskPipeline):
    """Run one episode for the config's question (composed: converted by `ask_settings` first);
    returns the episode record."""
    config = ask_settings(cfg) if isinstance(cfg, DictConfig) else cfg
    agent, backend, ctx = build_agent(config)
    try:
        return agent.run(str(config.question), question_id=config.question_id)
    finally:
        backend.close()
        if ctx is not None:
            ctx.close()


@pipeline_main("ask", settings=ask_settings)
def main(config: AskPipeline) -> None:
    with exit_on_error(also=(RuntimeError,)):  # RuntimeError: e.g. a model that cannot load
        episode = ask(config)
    print(render_episode(episode, config.show.observation_lines))
    if config.output:
        Path(config.output).write_text(json.dumps(episode.to_json(), ensure_ascii=False, indent=2, default=str))
        print(f"episode record: {config.output}")
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
