"""The differential run's parts on small made-up conversations, without the authors' code: the
stand-in's policy (tests/support/parity_model.py) decides the same on results in either side's form,
and the diff (tests/support/official_parity.py) names each difference's kind. The run itself:
tests/evaluation/test_official_parity.py."""

from __future__ import annotations

import json

from tests.support import official_parity as P
from tests.support import parity_model as M

RULE, DASH = "=" * 80, "-" * 80
QUESTION = "When did Lothair II's mother die?"


def their_read(chunks: dict[str, str]) -> str:
    return "\n".join(f"\n{RULE}\n[Chunk {i}]\n{DASH}\n{t}\n{RULE}" for i, t in chunks.items())


def our_read(chunks: dict[str, str]) -> str:
    return "\n\n".join(f"[chunk_id: {i} | previous: none (first chunk of the part) | next: 0:9]\n{t}" for i, t in chunks.items())


SEARCH = "Chunk ID: 0:1, Matched keywords in chunk: ... Lothair II was king ...\n\nChunk ID: 0:2, Matched keywords in chunk: ... His mother was Ermengarde ..."
TEXTS = {"0:1": "Lothair II was king. His mother was Ermengarde of Tours.", "0:2": "Ermengarde of Tours died on 20 March 851. She was a queen."}


def body(read_tool: str, question: str, turns: list[tuple[str, dict, str]], label: bool) -> dict:
    tools = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("keyword_search", "semantic_search", read_tool)]
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": ("Question: " if label else "") + question}]
    for i, (name, args, result) in enumerate(turns):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return {"model": "gpt-5-mini", "messages": messages, "tools": tools}


def replies(model: M.ParityModel, b: dict) -> dict:
    return model.reply(b)["choices"][0]["message"]


def test_the_policy_decides_the_same_on_either_sides_results():
    model = M.ParityModel(two_call_every=10**9, budget_every=10**9)  # every question plain
    sem = "Chunk ID: 0:2 (Similarity: 0.612)\nMatched: ... She died in 851 ..."
    ours = body("chunk_read", QUESTION, [("keyword_search", {}, SEARCH), ("semantic_search", {}, sem)], label=True)
    theirs = body("read_chunk", QUESTION, [("keyword_search", {}, SEARCH), ("semantic_search", {}, sem)], label=False)
    o, t = replies(model, ours)["tool_calls"], replies(model, theirs)["tool_calls"]
    assert [c["function"]["name"] for c in o] == ["chunk_read"] and [c["function"]["name"] for c in t] == ["read_chunk"]
    assert json.loads(o[0]["function"]["arguments"]) == json.loads(t[0]["function"]["arguments"]) == {"chunk_ids": ["0:1", "0:2"]}
    # after the read, both answer with the same sentence of the text read
    ours["messages"] += [{"role": "assistant", "content": None, "tool_calls": [{"id": "r", "type": "function", "function": {"name": "chunk_read", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "r", "content": our_read(TEXTS)}]
    theirs["messages"] += [{"role": "assistant", "content": None, "tool_calls": [{"id": "r", "type": "function", "function": {"name": "read_chunk", "arguments": "{}"}}]},
                           {"role": "tool", "tool_call_id": "r", "content": their_read(TEXTS)}]
    answer = replies(model, ours)["content"]
    assert answer == replies(model, theirs)["content"] == "Lothair II was king."  # the sentence sharing most words with the question


def test_a_not_run_call_is_asked_again_and_two_calls_come_in_one_reply():
    model = M.ParityModel(two_call_every=2, budget_every=10**9)
    question = next(q for q in (QUESTION, "Who directed Phoolwari?", "Who was Lothair II's wife?") if M.mode_of(q, 2, 10**9) == M.TWO_CALLS)
    first = replies(model, body("chunk_read", question, [], label=True))
    assert [c["function"]["name"] for c in first["tool_calls"]] == ["keyword_search", "semantic_search"]
    not_run = "Not run: only one tool call is carried out per step."
    again = replies(model, body("chunk_read", question, [("keyword_search", {}, SEARCH), ("semantic_search", {}, not_run)], label=True))
    assert [c["function"]["name"] for c in again["tool_calls"]] == ["semantic_search"]


def test_a_budget_episode_searches_wide_and_reads_every_unread_chunk():
    view = M.View(QUESTION, {"keyword_search": {}, "chunk_read": {}})
    first = M.next_calls(view, M.BUDGET)
    assert first == [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair II's"], "top_k": 20}}]
    view = M.view_of(body("chunk_read", QUESTION, [("keyword_search", first[0]["arguments"], SEARCH)], label=True))
    assert M.next_calls(view, M.BUDGET) == [{"tool": "chunk_read", "arguments": {"chunk_ids": ["0:1", "0:2", "0:0", "0:3", "0:4", "0:5", "0:6"]}}]


def test_the_judge_accepts_a_prediction_holding_every_gold_word():
    judge = {"messages": [{"role": "system", "content": "j"}, {"role": "user", "content": "Predicted answer: She died on 20 March 851.\nGold answer: 20 March 851\n\nReply ..."}]}
    assert M.verdict_of(judge) == "correct"
    judge["messages"][1]["content"] = "Predicted answer: In 851.\nGold answer: 20 March 851\n\nReply ..."
    assert M.verdict_of(judge) == "incorrect"
    assert M.verdict_of(body("chunk_read", QUESTION, [], label=True)) is None


def episode(calls: list[P.Call], answer: str, steps: int, forced=None, not_run=0, llm=1.0) -> P.Episode:
    return P.Episode("q", calls, steps, forced, answer, not_run, None, llm)


def test_headers_alone_move_nothing_and_name_their_kind():
    ours = episode([P.Call(1, "keyword_search", {"keywords": ["x"]}, SEARCH, 10), P.Call(2, "chunk_read", {"chunk_ids": ["0:1"]}, our_read({"0:1": TEXTS["0:1"]}), 12)], "a", 3)
    theirs = episode([P.Call(1, "keyword_search", {"keywords": ["x"]}, SEARCH, 10), P.Call(2, "chunk_read", {"chunk_ids": ["0:1"]}, their_read({"0:1": TEXTS["0:1"]}), 12)], "a", 3)
    qd = P.diff_question(ours, theirs, ["a"])
    assert qd.root is None and [(d.aspect, d.kind) for d in qd.differences] == [("result", "chunk_read_header")]


def test_a_call_not_run_is_the_root_of_what_follows():
    ours = episode([P.Call(1, "keyword_search", {"k": 1}, SEARCH, 10), P.Call(2, "semantic_search", {"q": 1}, "No results for: q", 0)], "b", 3, not_run=1, llm=0.0)
    theirs = episode([P.Call(1, "keyword_search", {"k": 1}, SEARCH, 10), P.Call(1, "semantic_search", {"q": 1}, "No results for: q", 0)], "a", 2)
    qd = P.diff_question(ours, theirs, ["a"])
    assert qd.root == "tool_calls_per_step" and qd.kinds() == {"tool_calls_per_step"}
    assert {d.aspect for d in qd.differences if d.consequence} == {"steps", "answer", "contain_acc", "llm_acc"}


def test_another_keyword_ranking_is_unexplained():
    other = SEARCH.replace("0:2", "0:3")
    qd = P.diff_question(episode([P.Call(1, "keyword_search", {}, SEARCH, 10)], "a", 2), episode([P.Call(1, "keyword_search", {}, other, 10)], "a", 2), ["a"])
    assert qd.root == P.UNEXPLAINED


def test_their_forced_answer_is_read_back_from_the_budget():
    record = {"qid": "q", "question": "?", "loops": 4, "pred_answer": "x",
              "trajectory": [{"loop": 1, "tool_name": "keyword_search", "arguments": {}, "tool_result": "big " * 300, "retrieved_tokens": 5},
                             {"loop": 3, "tool_name": "read_chunk", "arguments": {}, "tool_result": "text " * 300, "retrieved_tokens": 300}]}
    ep = P.their_episode(record, "system", max_loops=15, token_budget=500)
    assert (ep.forced, ep.steps, [c.tool for c in ep.calls]) == ("token_budget", 3, ["keyword_search", "chunk_read"])
    assert P.their_episode(record, "system", max_loops=15, token_budget=10**6).forced is None


def test_the_prompt_checklist_compares_rules_not_wording():
    rules = {r["rule"]: r for r in P.prompt_checklist("Call one tool per step. Cite the chunks; do not speculate.", "Cite the specific chunks. Avoid speculation.")}
    assert rules["one tool call per step"] == {"rule": "one tool call per step", "ours": True, "theirs": False}
    assert rules["cites the supporting chunks"]["theirs"] and rules["does not speculate"]["ours"] and rules["does not speculate"]["theirs"]


def test_the_texts_every_request_carries_are_compared_once_by_kind():
    def request(system, read_tool, question, description, **fields):
        tools = [{"type": "function", "function": {"name": n, "description": description, "parameters": {}}} for n in ("keyword_search", read_tool)]
        first = {"model": "m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}], "tools": tools, **fields}
        forced = {"model": "m", "messages": first["messages"] + [{"role": "tool", "content": "r"}, {"role": "user", "content": f"{system} answer now"}]}
        return [first, forced]

    ours = request("Cite the chunks. Call one tool per step.", "chunk_read", "Question: q?", "ours", max_completion_tokens=16384, parallel_tool_calls=False)
    theirs = request("Cite the chunks.", "read_chunk", "q?", "theirs", max_tokens=16384, temperature=0.0, tool_choice="auto")
    found = {d.kind: d.detail for d in P.static_differences(ours, theirs)}
    assert set(found) == {"system_prompt_rules", "read_tool_name", "tool_descriptions", "question_message", "forced_answer_prompt", "request_parameters"}
    assert "one tool call per step (ours only)" in found["system_prompt_rules"]
    assert P.static_differences(ours, ours) == []
