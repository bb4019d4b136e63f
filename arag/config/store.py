"""The schemas in Hydra's ConfigStore, under the names the YAML's defaults lists use:
`agent/schema` (conf/agent/default.yaml builds on it), `schema/index_source` (ask's and evaluate's
`index:` node), `schema/eval_runtime` (evaluate's `runtime:` node), `schema/judge` (evaluate's
and rejudge's `judge:` node, under the preset from conf/judge/, which holds its name and prompts) and
`schema/serve` (the tool server's `serve:` node), `schema/index_build` and `schema/index_runtime` (the
index pipeline's `index:` and `runtime:` nodes), `schema/graph` and `schema/graph_runtime` (the graph
pipeline's), `schema/results` (the results tree of evaluate, rejudge, report and view),
`schema/questions` (evaluate's), `schema/show` (ask's), `schema/report`, `schema/view` and
`schema/tools` (the tool server's ToolContext options). Registered once, when the config folder is first asked for
(arag.config.files.conf_dir), so every composition (the pipelines, tests, Hydra's compose API) sees them."""

from __future__ import annotations

from arag.config.schemas import AgentConfig, AskShow, EvalRuntime, GraphConfig, GraphPipelineRuntime, IndexBuild, IndexRuntime, IndexSource, JudgeNode, QuestionsSource, ReportConfig, ResultsTree, ServeConfig, ToolOptions, ViewConfig

# group, name, schema
SCHEMAS = (
    ("agent", "schema", AgentConfig),
    ("schema/index_source", "base", IndexSource),
    ("schema/eval_runtime", "base", EvalRuntime),
    ("schema/judge", "base", JudgeNode),
    ("schema/serve", "base", ServeConfig),
    ("schema/index_build", "base", IndexBuild),
    ("schema/index_runtime", "base", IndexRuntime),
    ("schema/graph", "base", GraphConfig),
    ("schema/graph_runtime", "base", GraphPipelineRuntime),
    ("schema/results", "base", ResultsTree),
    ("schema/questions", "base", QuestionsSource),
    ("schema/show", "base", AskShow),
    ("schema/report", "base", ReportConfig),
    ("schema/view", "base", ViewConfig),
    ("schema/tools", "base", ToolOptions),
)


def register() -> None:
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for group, name, node in SCHEMAS:
        store.store(group=group, name=name, node=node)
