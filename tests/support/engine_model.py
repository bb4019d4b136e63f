"""The arithmetic of the stand-in model server's simulated vLLM engine (tests/support/model_server.py,
latency `EngineModel()`): how long one engine serving Llama-3.1-8B-Instruct in BF16 on one H100 SXM
80GB takes for a request, and which part of its prompt the prefix cache holds. Each figure says
whether it is published or derived, and from what:

* Batch slots: at most `max_num_seqs` = 256 sequences run at once (vLLM's default `--max-num-seqs`,
  docs.vllm.ai "Engine Arguments"); later requests wait in FIFO order for a slot.
* Decode: each engine step emits one token for every running sequence and takes
  `decode_base + decode_per_seq * running` seconds.
  - decode_base = 6.5 ms (~155 tokens/s for a lone sequence): derived. One request at a time runs at
    ~75 tokens/s on an A100 40GB, ~77% of its memory-bandwidth roofline (J. Musgrave, "vLLM
    throughput-latency sweep on NVIDIA A100", Llama-3.1-8B-Instruct BF16, vLLM 0.23); decode at
    batch 1 is bound by reading the weights, so it scales with memory bandwidth: x 3.35/1.56 TB/s
    for the H100 SXM.
  - decode_per_seq = 0.055 ms: derived from the published saturated rate, ~12,500 output tokens/s for
    Llama 3.1 8B BF16 on one H100 80GB with vLLM (FlashInfer, gpu_memory_utilization 0.8; the table
    of third-party results at morphllm.com/vllm-benchmarks): 256 sequences / 12,500 tokens/s =
    20.5 ms per step at 256 running, so (20.5 - 6.5) / 255 ms per extra sequence.
* Prefill: 24,000 prompt tokens/s for the whole engine, one prompt after another (a request's prefill
  waits for the ones ahead of it): derived, 2 x 8.0e9 FLOP per token at ~40% of the H100 SXM's
  989 TFLOP/s dense BF16. Prefill does not slow the decode steps running beside it (vLLM's chunked
  prefill mixes both into one step; ignored here).
* Prefix cache (vLLM's automatic prefix caching): the longest prefix of the conversation that an
  earlier request left in the cache, in whole 16-token blocks (vLLM's default block size), is not
  prefilled again. Prefixes end at message boundaries: an episode's next request finds its previous
  request and the reply to it. The tools and system prompt are one shared prefix of every episode of a
  method. Cached blocks are evicted least recently used first when the cache plus the running
  sequences' own blocks exceed the KV cache: 400,000 tokens, derived (80 GB x 0.9 default
  gpu_memory_utilization, less 16 GB of weights and ~4 GB of activations, at 128 KiB per token:
  32 layers x 8 KV heads x 128 dims x K and V x 2 bytes).
* Tokens (every latency option of the server counts them so): 4 characters per token (a rule of thumb
  for English), counted over the messages and the tool schemas; a reply's tokens are its text (or
  tool call) plus the reasoning tokens of its `reasoning_effort` (none/minimal 0, low 256, medium
  1,024, high 4,096: an assumption, reported as reasoning_tokens).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tests.support.agent_policy import text_of

CHARS_PER_TOKEN = 4
REASONING_TOKENS = {None: 0, "none": 0, "minimal": 0, "low": 256, "medium": 1024, "high": 4096}
# Tokens decoded between two re-readings of the batch size (the step time follows the running count).
DECODE_CHUNK_TOKENS = 16


@dataclass(frozen=True)
class EngineModel:
    """One vLLM engine's timing (see the module doc for where each default comes from)."""

    max_num_seqs: int = 256
    prefill_tps: float = 24_000.0
    decode_base_s: float = 0.0065
    decode_per_seq_s: float = 0.000055
    kv_cache_tokens: int = 400_000
    block_tokens: int = 16

    def step_s(self, running: int) -> float:
        """One decode step with `running` sequences in the batch."""
        return self.decode_base_s + self.decode_per_seq_s * max(1, min(running, self.max_num_seqs))

    def decode_s(self, tokens: int, running: int) -> float:
        return tokens * self.step_s(running)

    def prefill_s(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        return max(0, prompt_tokens - cached_tokens) / self.prefill_tps

    def cached(self, prefix_tokens: int) -> int:
        """The part of a cached prefix that is reused: whole blocks only."""
        return prefix_tokens // self.block_tokens * self.block_tokens

    def ideal_episodes_per_min(self, episodes_in_flight: int, calls_per_episode: float, uncached_prompt_tokens: float, completion_tokens: float) -> float:
        """Episodes/min with `episodes_in_flight` episodes each making `calls_per_episode` model calls
        in a chain, with no time outside the model (tools, harness): the least of the latency bound
        (each episode waits for its own calls, at the batch its load makes) and the prefill bound
        (the engine prefills one prompt at a time). Above `max_num_seqs` the extra episodes only
        queue: the slots bound."""
        if episodes_in_flight <= 0 or calls_per_episode <= 0:
            return 0.0
        running = min(episodes_in_flight, self.max_num_seqs)
        call_s = self.prefill_s(round(uncached_prompt_tokens)) + self.decode_s(round(completion_tokens), running)
        per_s = running / (calls_per_episode * call_s) if call_s > 0 else float("inf")
        if uncached_prompt_tokens > 0:
            per_s = min(per_s, self.prefill_tps / (calls_per_episode * uncached_prompt_tokens))
        return 60.0 * per_s


def tokens_of(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class PrefixCache:
    """Cached conversation prefixes, each ending at a message boundary and keyed by a hash chain over
    the messages up to there; each entry holds the tokens it adds to its parent prefix, and the
    total stays within the KV cache left beside the running sequences (LRU eviction)."""

    def __init__(self, model: EngineModel):
        self.model = model
        self.entries: OrderedDict[str, int] = OrderedDict()
        self.tokens = 0

    @staticmethod
    def keys(pieces: list[str]) -> list[str]:
        keys, h = [], hashlib.blake2b(digest_size=16)
        for piece in pieces:
            h.update(piece.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
            keys.append(h.copy().hexdigest())
        return keys

    def lookup(self, keys: list[str], sizes: list[int]) -> int:
        """Tokens of the longest cached prefix (whole blocks); the entries found become most recent."""
        hit = 0
        for key, size in zip(keys, sizes):
            if key not in self.entries:
                break
            self.entries.move_to_end(key)
            hit += size
        return self.model.cached(hit)

    def insert(self, keys: list[str], sizes: list[int], running_tokens: int) -> None:
        for key, size in zip(keys, sizes):
            if key in self.entries:
                self.entries.move_to_end(key)
            else:
                self.entries[key] = size
                self.tokens += size
        room = max(0, self.model.kv_cache_tokens - running_tokens)
        while self.tokens > room and self.entries:
            _, size = self.entries.popitem(last=False)
            self.tokens -= size


def canonical(message: dict[str, Any]) -> str:
    """What a message puts into the prompt, the same whichever way a client spells it (a null or
    empty content, extra fields): role, text and tool calls."""
    calls = ";".join(f"{c['function']['name']}({c['function'].get('arguments') or ''})" for c in message.get("tool_calls") or [])
    return f"{message.get('role')}\x1f{text_of(message.get('content'))}\x1f{calls}"
