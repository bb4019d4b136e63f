"""The schemas in Hydra's ConfigStore, under the names the YAML's defaults lists use: each pipeline's
root (`<pipeline>_schema`, first in conf/<pipeline>.yaml's defaults) and `agent/schema`
(conf/agent/default.yaml builds on it). Registered once, when the config folder is first asked for
(arag.config.files.conf_dir), so every composition (the pipelines, tests, Hydra's compose API) sees them."""

from __future__ import annotations

from arag.config import schemas

ROOTS = {
    "ask": schemas.AskPipeline,
    "evaluate": schemas.EvaluatePipeline,
    "rejudge": schemas.RejudgePipeline,
    "index": schemas.IndexPipeline,
    "graph": schemas.GraphPipeline,
    "serve": schemas.ServePipeline,
    "report": schemas.ReportPipeline,
    "view": schemas.ViewPipeline,
}


def register() -> None:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(group="agent", name="schema", node=schemas.AgentConfig)
    for pipeline, root in ROOTS.items():
        store.store(name=f"{pipeline}_schema", node=root)
