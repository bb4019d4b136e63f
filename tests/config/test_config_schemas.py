"""Each setting declared once (arag.config): the schemas hold the defaults the composed configs
show, ask and evaluate share one agent config, and the command line is checked against them before
Hydra composes (one line naming the key, not Hydra's `+key` advice or its parser's traceback)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pipelines.config_checks import check_command_line
from arag.config.schemas import AgentConfig, AskShow, EvalRuntime, GraphConfig, GraphPipelineRuntime, IndexBuild, IndexRuntime, IndexSource, JudgeConfig, QuestionsSource, ReportConfig, ResultsTree, ServeConfig, ToolOptions, ViewConfig
from arag.config.files import conf_dir
from arag.config.typed import typed_config

REPO = Path(__file__).resolve().parents[2]


def compose(name: str, *overrides: str):
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(str(conf_dir()), version_base="1.3"):
        return hydra_compose(name, overrides=list(overrides))


def test_max_steps_has_one_home():
    """Only the schema sets the default agent.max_steps (and index.timeout_s): no pipeline's YAML
    repeats it; the paper's sweeps vary it and its protocol pins it (conf/sweep, conf/protocol)."""
    for path in conf_dir().rglob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        if path.parent.name not in ("sweep", "protocol"):
            assert "max_steps:" not in text, path
        assert "timeout_s: 120" not in text or path.parent.name == "model", path


@pytest.mark.parametrize("name", ["ask", "evaluate"])
def test_the_composed_agent_and_index_nodes_are_the_schemas(name):
    cfg = compose(name, "model=openai")  # no guard_rails in its model config: the schema's defaults
    assert OmegaConf.to_container(cfg.agent, resolve=True) == dataclasses.asdict(AgentConfig())
    index = OmegaConf.to_container(cfg.index, resolve=False)
    assert {k: v for k, v in index.items() if k != "path"} == {k: v for k, v in dataclasses.asdict(IndexSource()).items() if k != "path"}


def test_the_evaluation_runtime_is_its_schema():
    """evaluate's `runtime:` node is arag.config.schemas.EvalRuntime: its defaults, counts kept ints."""
    runtime = OmegaConf.to_container(compose("evaluate").runtime, resolve=True)
    assert runtime == dataclasses.asdict(EvalRuntime())
    assert all(type(runtime[k]) is int for k in ("workers", "batch_size", "max_worker_restarts", "max_losses"))
    assert typed_config(compose("evaluate")).runtime == EvalRuntime()


@pytest.mark.parametrize(("name", "preset"), [("evaluate", "paper"), ("rejudge", "strict")])
def test_a_judge_preset_sets_only_its_name_and_prompts(name, preset):
    """The judge's other keys have one home, JudgeConfig; a preset file holds what tells it apart."""
    from arag.config.files import conf_path

    assert set(OmegaConf.load(conf_path("judge", f"{preset}.yaml"))) == {"name", "system_prompt", "user_template"}
    judge = OmegaConf.to_container(compose(name, f"judge={preset}").judge, resolve=True)
    prompts = {k: judge[k] for k in ("system_prompt", "user_template")}
    assert judge == {**dataclasses.asdict(JudgeConfig(**prompts)), "name": preset, "model": None}


def test_the_serve_node_is_its_schema():
    """conf/serve.yaml sets no `serve:` key: every default is arag.config.schemas.ServeConfig's, and the
    server's settings read from the composed node are the schema's defaults."""
    from arag.config.files import conf_path
    from arag.serve.app import ServeSettings

    assert "serve" not in OmegaConf.load(conf_path("serve.yaml"))
    serve = OmegaConf.to_container(compose("serve").serve, resolve=True)
    assert serve == dataclasses.asdict(ServeConfig())
    assert ServeSettings.from_dict(serve) == ServeSettings()


@pytest.mark.parametrize(("override", "typed"), [("serve.token=1e3", 1000.0), ("serve.token=7", 7), ("serve.token=true", True)])
def test_the_serve_token_keeps_the_type_hydra_read_for_its_text_to_be_taken_back(override, typed):
    """ServeConfig.token is Any: a typed token reaches pipelines.serve.token_as_typed as Hydra read it
    (a str field would turn 1e3 into '1000.0', and the command line's text would be lost)."""
    from pipelines.serve import token_as_typed

    check_command_line("serve", [override])
    serve = OmegaConf.to_container(compose("serve", override).serve, resolve=True)
    assert serve["token"] == typed and type(serve["token"]) is type(typed)
    assert token_as_typed(serve, [override])["token"] == override.partition("=")[2]


def test_a_mistyped_serve_value_is_named():
    with pytest.raises(ValueError, match=r"setting serve\.port: .*Integer"):
        check_command_line("serve", ["serve.port=http"])


def test_the_index_and_graph_nodes_are_their_schemas():
    """The index pipeline's YAML derives only what depends on the corpus; the graph pipeline's sets nothing;
    the runtime group's `local` is the schema's defaults."""
    from arag.graph.extract import EXTRACTOR_KEYS
    from arag.runtime.graph_job import GraphRuntime
    from arag.runtime.index_job import EmbedRuntime

    index = compose("index", "+corpus=jsonl")
    derived = ("path", "chunking", "chunk_tokens")
    built = OmegaConf.to_container(index.index, resolve=True)
    assert {k: v for k, v in built.items() if k not in derived} == {k: v for k, v in dataclasses.asdict(IndexBuild()).items() if k not in derived}
    assert (built["chunking"], built["chunk_tokens"]) == (IndexBuild.chunking, IndexBuild.chunk_tokens)  # a corpus without its own
    assert OmegaConf.to_container(index.runtime, resolve=True) == dataclasses.asdict(IndexRuntime())
    assert EmbedRuntime(**OmegaConf.to_container(index.runtime.embed)) == EmbedRuntime()
    graph = compose("graph")
    assert OmegaConf.to_container(graph.graph, resolve=True) == dataclasses.asdict(GraphConfig())
    assert OmegaConf.to_container(graph.runtime, resolve=True) == dataclasses.asdict(GraphPipelineRuntime())
    assert GraphRuntime(**OmegaConf.to_container(graph.runtime.graph)) == GraphRuntime()
    assert EXTRACTOR_KEYS == tuple(f.name for f in dataclasses.fields(GraphConfig().extractor))


@pytest.mark.parametrize(("config", "override", "named"), [("index", "+index.chunk_token=5", "index.chunk_tokens"), ("graph", "+graph.extractor.knd=rule", "graph.extractor.kind"), ("graph", "+runtime.graph.num_cpu=2", "runtime.graph.num_cpus")])
def test_a_key_added_to_a_schema_node_is_refused_after_composing(config, override, named):
    """Hydra's `+key` adds even to a schema-typed node: the composed config's check names it (arag.config.typed)."""
    from arag.config.typed import check_schema_nodes
    from arag.strict_settings import UnknownSettingError

    extra = ["+corpus=jsonl"] if config == "index" else []
    check_schema_nodes(compose(config, *extra))
    with pytest.raises(UnknownSettingError, match=rf"did you mean {named}\?"):
        check_schema_nodes(compose(config, *extra, override))


# config, node, its schema, the keys the pipeline's YAML derives (set there, not the schema's default)
SMALL_NODES = [
    ("ask", "show", AskShow, ()),
    ("evaluate", "questions", QuestionsSource, ("path",)),
    ("evaluate", "results", ResultsTree, ()),
    ("rejudge", "results", ResultsTree, ()),
    ("report", "results", ResultsTree, ()),
    ("report", "report", ReportConfig, ()),
    ("view", "results", ResultsTree, ()),
    ("view", "view", ViewConfig, ()),
    ("serve", "tools", ToolOptions, ()),
]


@pytest.mark.parametrize(("config", "node", "schema", "derived"), SMALL_NODES)
def test_the_small_nodes_are_their_schemas(config, node, schema, derived):
    """The pipelines' YAML holds no default of these nodes (only what it derives), so the composed node
    is the schema's defaults; a key added to it after composing is refused with the likely one."""
    from arag.config.files import conf_path
    from arag.config.typed import check_schema_nodes
    from arag.strict_settings import UnknownSettingError

    assert set(OmegaConf.load(conf_path(f"{config}.yaml")).get(node) or {}) == set(derived)
    cfg = compose(config, *(["+corpus=2wikimultihopqa"] if config == "evaluate" else []))
    assert OmegaConf.get_type(cfg[node]) is schema
    composed_node = OmegaConf.to_container(cfg[node], resolve=False)
    defaults = dataclasses.asdict(schema())
    assert {k: v for k, v in composed_node.items() if k not in derived} == {k: v for k, v in defaults.items() if k not in derived}
    first = dataclasses.fields(schema)[0].name
    OmegaConf.update(cfg, f"{node}.{first}s", 1, force_add=True)
    with pytest.raises(UnknownSettingError, match=rf"did you mean {node}\.{first}\?"):
        check_schema_nodes(cfg)


def test_the_tools_schema_is_toolcontexts_keyword_arguments():
    """`tools:` (ToolOptions) is ToolContext's keyword arguments (the encoder aside: no config can name
    a function) with the same defaults, so the server's tools run as a ToolContext built in code does."""
    import inspect

    from arag.serve.app import tool_context_options
    from arag.tools.hosting.context import ToolContext

    params = {p.name: p.default for p in inspect.signature(ToolContext.__init__).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "encoder"}
    assert dataclasses.asdict(ToolOptions()) == params
    assert tool_context_options(dataclasses.asdict(ToolOptions())) == {k: v for k, v in params.items() if v is not None}


def test_a_model_configs_guard_rails_still_reach_the_agent():
    cfg = compose("ask", "model=llamacpp_qwen2.5_coder_1.5b")
    model_rails = OmegaConf.to_container(cfg.model, resolve=True)["guard_rails"]
    rails = OmegaConf.to_container(cfg.agent.guard_rails, resolve=True)
    assert model_rails["tool_steps"] == 2 and model_rails["require_read_before_answer"] is True  # conf/model/llamacpp_qwen2.5_coder_1.5b.yaml
    assert {k: rails[k] for k in model_rails} == model_rails


@pytest.mark.parametrize(
    ("config", "args", "named"),
    [
        ("evaluate", ["limt=3"], "limit"),
        ("evaluate", ["+corpus=2wikimultihopqa", "agent.max_stepz=3"], "agent.max_steps"),
        ("evaluate", ["+agent.max_step=3"], "agent.max_steps"),
        ("evaluate", ["model=openai", "model.temprature=0.1"], "model.temperature"),
        ("ask", ["qustion=x's y"], "question"),
        ("evaluate", ["runtime.workrs=2"], "runtime.workers"),
        ("evaluate", ["+runtime.worker_cpu=2"], "runtime.worker_cpus"),
        ("rejudge", ["judge=strict", "judge.max_token=64"], "judge.max_tokens"),
        ("serve", ["serve.prot=9000"], "serve.port"),
        ("serve", ["+serve.max_document_settings.search_result=5"], "serve.max_document_settings.search_results"),
        ("serve", ["tools.nprobes=4"], "tools.nprobe"),
        ("serve", ["+tools.encoder_thread=2"], "tools.encoder_threads"),
        ("ask", ["show.observation_line=3"], "show.observation_lines"),
        ("evaluate", ["+questions.on_bad_lines=skip"], "questions.on_bad_line"),
        ("evaluate", ["results.paths=x"], "results.path"),
        ("rejudge", ["+results.paths=x"], "results.path"),
        ("report", ["report.titel=x"], "report.title"),
        ("report", ["+report.paper_column=true"], "report.paper_columns"),
        ("view", ["view.hots=0.0.0.0"], "view.host"),
        ("view", ["+results.pth=x"], "results.path"),
    ],
)
def test_a_misspelled_key_is_named_with_the_likely_one(config, args, named):
    with pytest.raises(ValueError, match=rf"unknown setting .*did you mean {named}\?"):
        check_command_line(config, args)


def test_an_unreadable_or_mistyped_value_is_one_line():
    with pytest.raises(ValueError, match="cannot read the setting") as caught:
        check_command_line("evaluate", ["data_dir=x's y"])
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"setting agent\.max_steps: .*Integer"):
        check_command_line("evaluate", ["agent.max_steps=many"])
    with pytest.raises(ValueError, match=r"setting runtime\.workers: .*Integer"):
        check_command_line("evaluate", ["runtime.workers=many"])


@pytest.mark.parametrize(
    "args",
    [
        ["-m", "agent.max_steps=5,10", "method=arag_full,arag_naive", "limit=3"],
        ["+sweep=test_time_scaling_steps", "+corpus=2wikimultihopqa", "model=openai", "model.reasoning_effort=low"],
        ["model=openai", "+model.extra=1", "index.timeout_s=900", "agent.guard_rails.tool_steps=2"],
        ["-m", "method=glob(arag_*)", "limit=1"],  # a sweep Hydra expands against the options itself
        ["runtime.worker_cpus=0.5", "runtime.num_cpus=2", "runtime.episode_timeout_s=60"],
        ["judge=strict", "+model@judge.model=openai", "judge.model.model=gpt-4o-mini", "judge.max_tokens=64"],
    ],
)
def test_valid_command_lines_pass(args):
    check_command_line("evaluate", args)  # raises nothing
    # and the check did read these lines: the same lines with one key misspelled are refused
    with pytest.raises(ValueError, match=r"did you mean limit\?"):
        check_command_line("evaluate", [*args, "limt=3"])


def test_the_pipeline_prints_our_line_not_hydras_advice(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pipelines.evaluate", "limt=3", f"hydra.run.dir={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line
    assert "did you mean limit?" in result.stderr and "+limt" not in result.stderr


def test_a_quoting_error_is_one_line_not_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pipelines.ask", "qustion=x's y", f"hydra.run.dir={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "did you mean question?" in result.stderr


def test_the_serve_configs_tools_keys_are_checked_once_with_the_likely_key():
    """The `tools:` node's schema (ToolOptions) names a key added after composing, as the function that
    reads the keys (arag.serve.app.tool_context_options) does for a library caller."""
    from pipelines.config_checks import checked_settings

    cfg = compose("serve")
    checked_settings(cfg)
    OmegaConf.update(cfg, "tools.nprobes", 4, force_add=True)
    with pytest.raises(ValueError, match=r"^unknown setting tools\.nprobes \(did you mean tools\.nprobe\?\); valid keys of tools: [^\n]*$"):
        checked_settings(cfg)


def test_the_protocol_cards_assumed_index_is_the_index_pipelines_defaults():
    """An evaluation whose index is gone assumes what pipelines.index builds at its defaults: conf/index.yaml
    over IndexBuild (chunk_overlap is the schema's only), as composing the index config gives."""
    from arag.evaluation.protocol import assumed_index_facts

    for corpus in ("jsonl", "2wikimultihopqa-linearrag"):
        index = OmegaConf.to_container(compose("index", f"+corpus={corpus}").index, resolve=True)
        corpus_cfg = OmegaConf.to_container(compose("index", f"+corpus={corpus}").corpus, resolve=True)
        facts = assumed_index_facts(corpus_cfg)
        assert {k: facts[k] for k in ("chunking", "chunk_tokens", "chunk_overlap")} == {k: index[k] for k in ("chunking", "chunk_tokens", "chunk_overlap")}
    assert assumed_index_facts(None)["chunk_overlap"] == IndexBuild.chunk_overlap == 100


# pipeline → the overrides its config needs to compose (the optional corpus group, where it has one)
PIPELINES = {"index": ["+corpus=jsonl", "corpus.path=x"], "graph": [], "ask": [], "evaluate": ["+corpus=jsonl", "corpus.path=x"], "rejudge": [], "serve": [], "report": [], "view": []}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_top_level_keys_are_those_the_pipelines_yaml_declares(name):
    """A pipeline's top-level keys are its root schema's (arag.config.schemas), which its YAML builds on:
    the keys its check accepts are the composed config's."""
    from arag.strict_settings import UnknownSettingError
    from pipelines.config_checks import checked_settings

    cfg = compose(name, *PIPELINES[name])
    checked_settings(cfg)
    keys = sorted(cfg.keys())
    first = keys[0]
    OmegaConf.update(cfg, first[:-1] + "z" + first[-1], 1, force_add=True)
    with pytest.raises(UnknownSettingError, match=rf"did you mean {first}\?\); valid keys of the config: {', '.join(keys)}$"):
        checked_settings(cfg)


def test_a_mandatory_value_left_unset_is_named():
    """A generic corpus config leaves its path unset (???): the conversion names the setting to give."""
    with pytest.raises(ValueError, match=r"^setting corpus\.path has no value: give one with corpus\.path=\.\.\.$"):
        typed_config(compose("index", "+corpus=jsonl"))


def test_an_untyped_node_of_the_yaml_is_now_a_schema_node():
    """serve's `index:` node is IndexPath: it holds only `path`, and a key added to it is named."""
    from arag.config.schemas import IndexPath
    from arag.strict_settings import UnknownSettingError

    cfg = compose("serve")
    assert OmegaConf.get_type(cfg.index) is IndexPath and typed_config(cfg).index == IndexPath()
    with pytest.raises(UnknownSettingError, match=r"unknown setting index\.pth \(did you mean index\.path\?\); valid keys of index: path$"):
        typed_config(compose("serve", "+index.pth=x"))


def test_a_mapping_sets_the_embedding_actors_resources():
    """runtime.embed.resources (the two-node cluster's command line) composes in our check and in
    Hydra's, and an amount that is not a number is one line naming the setting."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from arag.config.files import conf_dir
    from arag.config.schemas import EmbedRuntime

    check_command_line("index", ["+corpus=2wikimultihopqa", "runtime.embed.resources={worker:1}"])
    with initialize_config_dir(str(conf_dir()), version_base="1.3"):
        cfg = compose("index", overrides=["+corpus=2wikimultihopqa", "runtime.embed.resources={worker:1}"])
    assert EmbedRuntime(**OmegaConf.to_container(cfg.runtime.embed)).resources == {"worker": 1}
    with pytest.raises(ValueError, match=r"setting runtime\.embed\.resources: the amount of 'worker' must be a number"):
        EmbedRuntime(resources={"worker": "x"})
