"""The schemas in Hydra's ConfigStore, under the names the YAML's defaults lists use:
`agent/schema` (conf/agent/default.yaml builds on it), `schema/index_source` (ask's and evaluate's
`index:` node), `schema/eval_runtime` (evaluate's `runtime:` node), `schema/judge` (evaluate's
and rejudge's `judge:` node, under the preset from conf/judge/, which holds its name and prompts) and
`schema/serve` (the tool server's `serve:` node). Registered once, when the config folder is first asked for
(arag.config.files.conf_dir), so every composition (the pipelines, tests, Hydra's compose API) sees them."""

from __future__ import annotations

from arag.config.schemas import AgentConfig, EvalRuntime, IndexSource, JudgeNode, ServeConfig

# group, name, schema
SCHEMAS = (
    ("agent", "schema", AgentConfig),
    ("schema/index_source", "base", IndexSource),
    ("schema/eval_runtime", "base", EvalRuntime),
    ("schema/judge", "base", JudgeNode),
    ("schema/serve", "base", ServeConfig),
)


def register() -> None:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for group, name, node in SCHEMAS:
        store.store(group=group, name=name, node=node)
