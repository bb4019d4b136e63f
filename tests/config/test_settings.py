"""Unknown settings are refused in every config group: the command stops before any work with one
line naming the key and listing the valid ones (no traceback), and the settings objects the library
reads configs into refuse them too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from arag.config.files import conf_dir
from pipelines.config_checks import check_command_line
from arag.strict_settings import UnknownSettingError, check_keys, constructor_keys, from_settings
from pipelines.config_checks import checked_settings

REPO = Path(__file__).resolve().parents[2]


def cli(pipeline: str, *overrides: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"pipelines.{pipeline}", *overrides, f"hydra.run.dir={tmp_path}/hydra"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )


def assert_refused(result: subprocess.CompletedProcess, key: str, *valid: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert f"unknown setting {key}" in line and all(v in line.split("valid keys", 1)[1] for v in valid), line


def compose_config(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides))


# ---- the commands ---------------------------------------------------------------------------------------


def test_index_refuses_a_misspelled_embedder_key(tmp_path):
    result = cli("index", "+corpus=2wikimultihopqa", "+embedder.batchsize=8", f"index.path={tmp_path}/idx", "progress=false", tmp_path=tmp_path)
    assert_refused(result, "embedder.batchsize", "batch_size", "threads")
    assert "did you mean embedder.batch_size?" in result.stderr and not (tmp_path / "idx").exists()


def test_ask_refuses_a_misspelled_agent_key(tmp_path):
    result = cli("ask", "model=scripted", "method=direct", "question=Who?", "+agent.max_step=3", tmp_path=tmp_path)
    assert_refused(result, "agent.max_step", "max_steps", "guard_rails")


def test_evaluate_refuses_a_misspelled_runtime_key(tmp_path):
    result = cli("evaluate", "model=scripted", "method=direct", f"questions.path={tmp_path}/q.jsonl", "+runtime.worker=2", f"results.path={tmp_path}/r", "progress=false", tmp_path=tmp_path)
    assert_refused(result, "runtime.worker", "workers", "concurrency")
    assert not (tmp_path / "r").exists()


def test_report_refuses_a_misspelled_report_key(tmp_path):
    result = cli("report", f"results.path={tmp_path}", "+report.titel=x", tmp_path=tmp_path)
    assert_refused(result, "report.titel", "title", "where")


# ---- every group, through the pipelines' checks ---------------------------------------------------------


@pytest.mark.parametrize(
    "config, override, key",
    [
        ("index", "+data_dirr=x", "data_dirr"),
        ("index", "+index.chunk_token=5", "index.chunk_token"),
        ("index", "+corpus.part_size=3", "corpus.part_size"),
        ("index", "+corpus.fields.txt=body", "corpus.fields.txt"),
        ("index", "+embedder.batchsize=8", "embedder.batchsize"),
        ("index", "+runtime.numcpus=2", "runtime.numcpus"),
        ("index", "+runtime.embed.actor=2", "runtime.embed.actor"),
        ("ask", "+agent.max_step=3", "agent.max_step"),
        ("ask", "+agent.guard_rails.tool_step=1", "agent.guard_rails.tool_step"),
        ("ask", "+model.temprature=1", "model.temprature"),
        ("ask", "+method.tool=x", "method.tool"),
        ("ask", "+show.lines=3", "show.lines"),
        ("evaluate", "+judge.skip_exac=true", "judge.skip_exac"),
        ("evaluate", "+questions.on_bad=skip", "questions.on_bad"),
        ("evaluate", "+runtime.engine=2", "runtime.engine"),
        ("evaluate", "+results.dir=x", "results.dir"),
        ("evaluate", "+limt=2", "limt"),
        ("report", "+results.pth=x", "results.pth"),
        ("rejudge", "+judge.skip_exac=true", "judge.skip_exac"),
        ("rejudge", "+batchsize=5", "batchsize"),
        ("serve", "+tools.nprob=3", "tools.nprob"),
        ("serve", "+index.pth=x", "index.pth"),
        ("graph", "+graph.chunk_per_part=3", "graph.chunk_per_part"),
        ("graph", "+graph.extractor.knd=rule", "graph.extractor.knd"),
        ("graph", "+runtime.graph.num_cpu=1", "runtime.graph.num_cpu"),
        ("graph", "+indx=x", "indx"),
        ("graph", "model@graph.extractor.model=llamacpp_qwen2.5_coder_1.5b +graph.extractor.model.temprature=1", "graph.extractor.model.temprature"),
    ],
)
def test_each_group_names_an_unknown_key(config, override, key):
    extra = ["+corpus=2wikimultihopqa"] if config == "index" else ["model=scripted"] if config in ("ask", "evaluate") else []
    checked_settings(compose_config(config, *extra))  # the shipped configs pass
    with pytest.raises(UnknownSettingError, match=rf"unknown setting {key.replace('.', '[.]')}\b.*valid keys"):
        checked_settings(compose_config(config, *extra, *override.split()))


def test_every_shipped_model_and_method_config_passes():
    for model in sorted(p.stem for p in (conf_dir() / "model").glob("*.yaml")):
        checked_settings(compose_config("ask", f"model={model}"))
    for method in sorted(p.stem for p in (conf_dir() / "method").glob("*.yaml")):
        checked_settings(compose_config("evaluate", "model=scripted", f"method={method}", "+corpus=2wikimultihopqa"))
    checked_settings(compose_config("evaluate", "model=scripted", "+model@judge.model=openai"))
    with pytest.raises(UnknownSettingError, match=r"judge\.model\.base_ulr"):
        checked_settings(compose_config("evaluate", "model=scripted", "+model@judge.model=openai", "+judge.model.base_ulr=x"))


def test_the_node_only_ablation_is_a2rag_with_one_setting_changed():
    from omegaconf import OmegaConf

    from arag.methods import read_method_config

    def method(name):
        return OmegaConf.to_container(compose_config("evaluate", "model=scripted", f"method={name}", "+corpus=2wikimultihopqa")["method"])

    full, ablation = method("a2rag"), method("a2rag_node_only")
    assert (full["relation_seeds"], ablation["relation_seeds"]) == (True, False)  # the paper's Full (S_V + S_R) and Node-only (S_V)
    assert ablation["name"] == "a2rag_node_only"  # its own method name, so the report shows it as its own row
    differing = {k for k in full.keys() | ablation.keys() if full.get(k) != ablation.get(k)}
    assert differing == {"name", "label", "relation_seeds"}
    assert read_method_config("a2rag_node_only") == ablation  # load_method composes `defaults` as Hydra does
    with pytest.raises(Exception, match="a2rag_relation_seeds"):  # the old name is gone, and says so
        compose_config("evaluate", "model=scripted", "method=a2rag_relation_seeds", "+corpus=2wikimultihopqa")


# ---- the settings objects themselves ---------------------------------------------------------------------


def test_settings_objects_refuse_unknown_keys():
    from arag.agent.loop import AgentConfig
    from arag.evaluation.judge import JudgeConfig
    from arag.index.embedding import EmbedderSpec
    from arag.llm.factory import make_backend
    from arag.methods import load_method, method_from_config
    from arag.config.typed import typed_config

    with pytest.raises(UnknownSettingError, match=r"embedder\.batchsize .*batch_size"):
        EmbedderSpec.from_config({"name": "m", "batchsize": 8})
    assert EmbedderSpec.from_config({"name": "m", "batch_size": 8}).batch_size == 8
    with pytest.raises(UnknownSettingError, match=r"judge\.attempt\b"):
        JudgeConfig.from_dict({"system_prompt": "s", "user_template": "u", "attempt": 2})
    assert JudgeConfig.from_dict({"system_prompt": "s", "user_template": "u", "model": None}).attempts == 3
    with pytest.raises(UnknownSettingError, match=r"agent\.max_step\b"):
        AgentConfig.from_dict({"max_step": 3})
    with pytest.raises(UnknownSettingError, match=r"agent\.guard_rails\.tool_step\b"):
        AgentConfig.from_dict({"guard_rails": {"tool_step": 1}})
    assert AgentConfig.from_dict({"guard_rails": {"tool_steps": 1}}).guard_rails.tool_steps == 1
    with pytest.raises(UnknownSettingError, match=r"runtime\.worker\b"):
        typed_config(compose_config("evaluate", "model=scripted", "+runtime.worker=2"))
    with pytest.raises(UnknownSettingError, match=r"method\.tool\b"):
        method_from_config({"name": "x", "system_prompt": "s", "tool": ["keyword_search"]})
    with pytest.raises(UnknownSettingError, match=r"method\.k\b"):  # a kind's own fields only
        load_method("naive_rag", {"k": 3})
    with pytest.raises(UnknownSettingError, match=r"method\.gate_treshold\b.*gate_threshold"):
        load_method("a2rag", {"gate_treshold": 0.5})
    with pytest.raises(UnknownSettingError, match=r"model\.replays\b.*replay"):
        make_backend({"backend": "scripted", "script": [], "replays": True})


def test_the_helper():
    with pytest.raises(UnknownSettingError) as err:
        check_keys("a.b", {"x": 1, "y": 2, "ok": 3}, ["ok", "xx"])
    assert str(err.value) == "unknown settings a.b.x, a.b.y (did you mean a.b.xx?); valid keys of a.b: ok, xx"
    assert isinstance(err.value, ValueError)  # the pipelines print ValueErrors as one line

    class Base:
        def __init__(self, model, *, temperature=0.0):
            pass

    class Child(Base):
        def __init__(self, script, replay=False, **kwargs):
            super().__init__(**kwargs)

    assert constructor_keys(Child) == ("script", "replay", "model", "temperature")
    from dataclasses import dataclass

    @dataclass
    class Settings:
        size: int = 1

    assert from_settings(Settings, {"size": 2}, "s") == Settings(2)
    with pytest.raises(UnknownSettingError, match="valid keys of s: size"):
        from_settings(Settings, {"sise": 2}, "s")


def test_sweeps_name_only_valid_keys():
    """The `sweep` group sets Hydra sweeper params: each must be a key the evaluation accepts (a
    misspelled one without `+` is refused by Hydra itself; with `+`, by the check above)."""
    import yaml
    from hydra.errors import ConfigCompositionException

    for path in sorted((conf_dir() / "sweep").glob("*.yaml")):
        params = yaml.safe_load(path.read_text())["hydra"]["sweeper"]["params"]
        first = [f"{key}={str(values).split(',')[0]}" for key, values in params.items()]
        checked_settings(compose_config("evaluate", "model=openai", *first))
    with pytest.raises(ConfigCompositionException, match="agent.max_step"):
        compose_config("evaluate", "model=scripted", "agent.max_step=5")
    with pytest.raises(UnknownSettingError, match=r"agent\.max_step\b"):
        checked_settings(compose_config("evaluate", "model=scripted", "+agent.max_step=5"))
    # On the command line both are refused before any work (pipelines.config_checks), naming the key meant.
    for override in ("agent.max_step=5", "+agent.max_step=5"):
        with pytest.raises(UnknownSettingError, match=r"agent\.max_step \(did you mean agent\.max_steps\?\)"):
            check_command_line("evaluate", ["model=scripted", override])
