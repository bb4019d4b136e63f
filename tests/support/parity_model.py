"""The stand-in model of the differential run against the authors' A-RAG code
(benchmarks/official_side_by_side.py --phase episodes, tests/evaluation/test_official_parity.py): an
OpenAI-compatible `/v1/chat/completions` endpoint whose replies carry real `tool_calls`, chosen by
one deterministic policy that reads only the question and the tool results in the request, so both
agent loops get the same decisions whenever they show the same results.

The policy reads results in either side's form: search results head each chunk with "Chunk ID: <id>"
(both sides); a read chunk is headed "[chunk_id: <id> | ...]" (ours) or "[Chunk <id>]" between rules
(theirs), and a chunk read before is answered with a note instead of its text. The reading tool is
whichever of `chunk_read` (ours) and `read_chunk` (theirs) the request offers.

An episode's plan depends on the question alone (`mode_of`):
  * plain: keyword_search (the question's names, tests/support/agent_policy.keywords_of), then
    semantic_search (the question), then one read of the first two unread chunks the searches
    showed, then the answer;
  * two_calls: the first reply holds keyword_search AND semantic_search (two calls in one message),
    then as plain;
  * budget: keyword_search with top_k 20 and one keyword at a time, then a read of every unread chunk
    it showed and of their neighbours (ids ± 1 to ± 4), 45 at most, again and again with the next
    keyword (the question's, then the capitalised words of the chunks read, in order), so the
    conversation runs into a 128k-token budget.
The answer (also a forced one, requested without tools) is the sentence of the chunks read that
shares the most words with the question (snippets when nothing was read), so Contain-Acc varies.

A judge's request (conf/judge/paper: "Predicted answer: ... Gold answer: ...") gets {"verdict":
...}: correct when every word of the gold answer is among the prediction's words. Usage reports
o200k_base tokens of the tools' JSON and of each message (+4 per message) as the prompt and of
the reply as the completion, the way an endpoint counts what a model reads and writes.

    python -m tests.support.parity_model --port 8000   # on its own
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tests.support.agent_policy import keywords_of, text_of

READ_TOOLS = ("chunk_read", "read_chunk")
TWO_CALLS, BUDGET, PLAIN = "two_calls", "budget", "plain"
PLAIN_READS = 2  # chunks read per plain episode
BUDGET_TOP_K = 20  # both sides cap top_k at 20
BUDGET_READS = 45  # chunks per read of a budget episode (ours takes up to 50 ids a call)
NEIGHBOURS = (1, -1, 2, -2, 3, -3, 4, -4)  # the ids around a shown one that a budget episode reads too

_SEARCH_ID = re.compile(r"^Chunk ID: (\S+?)(?=,| \(|$)", re.M)
_OUR_READ = re.compile(r"^\[chunk_id: ([^\s|\]]+)[^\n]*\]\n(.*?)(?=\n\n\[chunk_id: |\n\nUnknown chunk id|\Z)", re.S | re.M)
_THEIR_READ = re.compile(r"^\[Chunk ([^\]\n]+)\]\n-{80}\n(.*?)\n={80}", re.S | re.M)
_READ_HEAD = re.compile(r"^\[(?:chunk_id: |Chunk )", re.M)
_SNIPPET = re.compile(r"\.\.\. (.*?) \.\.\.(?=$|\n)", re.M)
_WORD = re.compile(r"[A-Za-z0-9]+")
_NUMBERED = re.compile(r"^(.*?)(\d+)$")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]{3,}\b")
_JUDGE = re.compile(r"Predicted answer: (?P<prediction>.*?)\nGold answer: (?P<gold>.*?)\n", re.S)
STOPWORDS = frozenset("the a an of in on at to for and or is was were who what when where which whom whose how did does do are be by from with as that this his her its their film movie".split())
MESSAGE_OVERHEAD = 4


def mode_of(question: str, two_call_every: int = 4, budget_every: int = 9) -> str:
    """The question's plan: by a CRC-32 of its text, so the same on both sides and in every run."""
    h = zlib.crc32(question.encode("utf-8"))
    if h % budget_every == 0:
        return BUDGET
    if h % two_call_every == 1:
        return TWO_CALLS
    return PLAIN


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOPWORDS and len(w) > 1}


@dataclass
class View:
    """What a request shows: the question, the tools offered, every call made so far with its
    result text (None while not answered), the chunk ids searches showed, the chunk texts read."""

    question: str
    offered: dict[str, dict[str, Any]]
    calls: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    read: dict[str, str] = field(default_factory=dict)
    snippets: list[str] = field(default_factory=list)

    @property
    def read_tool(self) -> str | None:
        return next((t for t in READ_TOOLS if t in self.offered), None)

    def results_of(self, tool: str) -> list[str]:
        """Texts of `tool`'s results that show chunks or say none was found (a call that was not
        run, or refused, shows neither)."""
        return [r for name, _, r in self.calls if name == tool and r and (_SEARCH_ID.search(r) or r.startswith("No result") or _READ_HEAD.search(r))]

    def unread(self) -> list[str]:
        return [i for i in self.shown if i not in self.read]

    def unread_around(self) -> list[str]:
        """The unread chunks shown, each followed by its unread neighbours (the ids up to four
        before and after, by the number that ends the id; their read_chunk description says to
        read "adjacent chunks (± 1)")."""
        out: list[str] = []
        for cid in self.unread():
            m = _NUMBERED.match(cid)
            near = [f"{m[1]}{int(m[2]) + d}" for d in NEIGHBOURS if int(m[2]) + d >= 0] if m else []
            out += [i for i in [cid, *near] if i not in self.read and i not in out]
        return out


def question_of(messages: list[dict[str, Any]]) -> str:
    """The first user turn, without a "Question: " label (ours labels it; theirs sends it bare)."""
    first = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    return first[len("Question: "):] if first.startswith("Question: ") else first


def read_texts(result: str) -> dict[str, str]:
    """{chunk id: text} of a read result in either form (notes for chunks read before are no text)."""
    out = {m[1]: m[2].strip() for m in _THEIR_READ.finditer(result)}
    for m in _OUR_READ.finditer(result):
        body = m[2].strip()
        if not body.startswith("Already read in this episode"):
            out[m[1]] = body
    return out


def view_of(body: dict[str, Any]) -> View:
    messages = body.get("messages") or []
    offered = {t["function"]["name"]: t["function"].get("parameters") or {} for t in body.get("tools") or []}
    view = View(question_of(messages), offered)
    pending: dict[str, int] = {}
    for m in messages:
        if m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                try:
                    args = json.loads(c["function"].get("arguments") or "{}")
                except ValueError:
                    args = {}
                pending[c.get("id", "")] = len(view.calls)
                view.calls.append((c["function"]["name"], args if isinstance(args, dict) else {}, None))
        elif m.get("role") == "tool":
            text = text_of(m.get("content"))
            at = pending.pop(m.get("tool_call_id", ""), None)
            if at is not None:
                name, args, _ = view.calls[at]
                view.calls[at] = (name, args, text)
            for cid in _SEARCH_ID.findall(text):
                if cid not in view.shown:
                    view.shown.append(cid)
            view.snippets += _SNIPPET.findall(text)
            for cid, chunk in read_texts(text).items():
                view.read.setdefault(cid, chunk)
    return view


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 3]


def best_sentence(question: str, texts: list[str]) -> str:
    """The sentence sharing the most content words with the question (the first of equals)."""
    want = content_words(question)
    best, score = "", -1
    for text in texts:
        for s in sentences(text):
            got = len(want & content_words(s))
            if got > score:
                best, score = s, got
    return best or "I could not find the answer in the documents."


def answer_of(view: View) -> str:
    return best_sentence(view.question, list(view.read.values()) or view.snippets)


def budget_keywords(view: View) -> list[str]:
    """The keywords a budget episode searches, one per search: the question's, then the capitalised
    words of the chunks read, in order of appearance."""
    out = list(keywords_of(view.question))
    for text in view.read.values():
        for w in _CAPITALISED.findall(text):
            if w not in out and w.lower() not in STOPWORDS:
                out.append(w)
    return out


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool": name, "arguments": arguments}


def next_calls(view: View, mode: str) -> list[dict[str, Any]]:
    """The tool calls of the next reply ([]: answer)."""
    reader = view.read_tool
    if not view.offered or reader is None:
        return []
    if mode == BUDGET:
        searches = [a for name, a, _ in view.calls if name == "keyword_search"]
        last = view.calls[-1][0] if view.calls else None
        if last == "keyword_search" and view.unread():
            return [call(reader, {"chunk_ids": view.unread_around()[:BUDGET_READS]})]
        keywords = budget_keywords(view)
        if len(searches) < len(keywords):
            return [call("keyword_search", {"keywords": [keywords[len(searches)]], "top_k": BUDGET_TOP_K})]
        return []
    if not view.results_of("keyword_search"):
        first = [call("keyword_search", {"keywords": keywords_of(view.question)})]
        if mode == TWO_CALLS and not view.calls:
            first.append(call("semantic_search", {"query": view.question}))
        return first
    if "semantic_search" in view.offered and not view.results_of("semantic_search"):
        return [call("semantic_search", {"query": view.question})]
    if not view.results_of(reader) and view.unread():
        return [call(reader, {"chunk_ids": view.unread()[:PLAIN_READS]})]
    return []


# ---- the judge --------------------------------------------------------------------------------
def verdict_of(body: dict[str, Any]) -> str | None:
    """A judge request's verdict (None: not a judge's request)."""
    messages = body.get("messages") or []
    last = text_of(messages[-1].get("content")) if messages else ""
    m = _JUDGE.search(last + "\n")
    if not m or body.get("tools"):
        return None
    gold = set(words(m["gold"]))
    return "correct" if gold and gold <= set(words(m["prediction"])) else "incorrect"


# ---- the endpoint -----------------------------------------------------------------------------
@lru_cache(maxsize=65536)
def o200k_tokens(text: str) -> int:
    from arag.index.tokens import count_retrieved_tokens

    return count_retrieved_tokens(text)


def prompt_tokens(body: dict[str, Any]) -> int:
    total = o200k_tokens(json.dumps(body.get("tools") or [], sort_keys=True)) if body.get("tools") else 0
    for m in body.get("messages") or []:
        total += MESSAGE_OVERHEAD + o200k_tokens(text_of(m.get("content")))
        for c in m.get("tool_calls") or []:
            total += o200k_tokens(c["function"]["name"] + (c["function"].get("arguments") or ""))
    return total


class ParityModel:
    """The endpoint (an ASGI app). `requests` keeps every body received; `two_call_every` and
    `budget_every` set how often the two-call and the budget plans come up (mode_of)."""

    def __init__(self, two_call_every: int = 4, budget_every: int = 9, keep_requests: bool = True):
        self.two_call_every = two_call_every
        self.budget_every = budget_every
        self.keep_requests = keep_requests
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._serial = 0
        self._app = None

    def mode(self, question: str) -> str:
        return mode_of(question, self.two_call_every, self.budget_every)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._serial += 1
            serial = self._serial
            if self.keep_requests:
                self.requests.append(body)
        verdict = verdict_of(body)
        if verdict is not None:
            message: dict[str, Any] = {"role": "assistant", "content": json.dumps({"verdict": verdict})}
            finish = "stop"
        else:
            view = view_of(body)
            calls = next_calls(view, self.mode(view.question))
            if calls:
                tool_calls = [{"id": f"call_{serial}_{i}", "type": "function", "function": {"name": c["tool"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                              for i, c in enumerate(calls)]
                message, finish = {"role": "assistant", "content": None, "tool_calls": tool_calls}, "tool_calls"
            else:
                message, finish = {"role": "assistant", "content": answer_of(view)}, "stop"
        completion = o200k_tokens(message.get("content") or "") + sum(o200k_tokens(c["function"]["name"] + c["function"]["arguments"]) for c in message.get("tool_calls") or [])
        prompt = prompt_tokens(body)
        return {"id": f"chatcmpl-parity-{serial}", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", "parity"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                          "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}}

    async def __call__(self, scope, receive, send) -> None:
        if self._app is None:
            self._app = self._create_app()
        await self._app(scope, receive, send)

    def _create_app(self):
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def chat(request: Request) -> JSONResponse:
            try:
                body = await request.json()
            except ValueError:
                return JSONResponse({"error": {"message": "We could not parse the JSON body of your request.", "type": "invalid_request_error"}}, status_code=400)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return JSONResponse({"error": {"message": "Missing required parameter: 'messages'.", "type": "invalid_request_error", "param": "messages"}}, status_code=400)
            return JSONResponse(await run_in_threadpool(self.reply, body))  # o200k counts of 100k-token prompts: off the event loop

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": "gpt-5-mini", "object": "model", "owned_by": "parity"}]})

        return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/chat/completions", chat, methods=["POST"]),
                                 Route("/v1/models", models), Route("/models", models)])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    args = p.parse_args(argv)
    import uvicorn

    print(f"parity stand-in model on http://{args.host}:{args.port}/v1", flush=True)
    uvicorn.run(ParityModel(keep_requests=False), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
