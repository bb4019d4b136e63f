"""tests/support/tool_call_proxy.py reads tool calls written as text (Hermes tags, or a reply that is
one JSON call) into `tool_calls`, for the side-by-side benchmark's llama.cpp endpoint."""

from __future__ import annotations

import json

from tests.support.tool_call_proxy import parse_tool_calls, rewrite_reply


def test_proxy_reads_tagged_and_bare_tool_calls():
    names = {"keyword_search", "read_chunk"}
    text = 'Let me search.\n<tool_call>\n{"name": "keyword_search", "arguments": {"keywords": ["Lothair II"]}}\n</tool_call>'
    content, calls = parse_tool_calls(text, names)
    assert content == "Let me search."
    assert calls == [{"name": "keyword_search", "arguments": json.dumps({"keywords": ["Lothair II"]})}]
    assert parse_tool_calls('```json\n{"name": "read_chunk", "arguments": {"chunk_ids": ["1"]}}\n```', names)[1][0]["name"] == "read_chunk"
    assert parse_tool_calls('{"name": "other", "arguments": {}}', names) == ('{"name": "other", "arguments": {}}', [])  # not an offered tool
    assert parse_tool_calls("The answer is 851.", names) == ("The answer is 851.", [])


def test_proxy_rewrites_only_replies_to_requests_with_tools():
    reply = {"id": "r1", "choices": [{"message": {"role": "assistant", "content": '<tool_call>{"name": "read_chunk", "arguments": {"chunk_ids": ["2"]}}</tool_call>'}, "finish_reason": "stop"}]}
    plain = rewrite_reply({"messages": []}, json.loads(json.dumps(reply)))
    assert plain == reply
    done = rewrite_reply({"tools": [{"type": "function", "function": {"name": "read_chunk"}}]}, reply)
    choice = done["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "read_chunk", "arguments": '{"chunk_ids": ["2"]}'}
    assert choice["message"]["tool_calls"][0]["type"] == "function" and choice["message"]["tool_calls"][0]["id"]


def test_the_benchmark_starts_it_as_a_module_from_the_checkout():
    import subprocess
    import sys

    from tests.support.paths import REPO

    proc = subprocess.run([sys.executable, "-m", "tests.support.tool_call_proxy", "--help"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and "--upstream" in proc.stdout
