"""Naive RAG: the top-k chunks by embedding similarity pasted into one prompt; one model call, no tools."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from arag.llm.types import Message
from arag.methods.tool_calls import ToolCallRecord
from arag.methods.base import Method
from arag.tools.failures import checked

RETRIEVAL_TOOL = "naive_embedding_search"


@dataclass
class NaiveRagMethod(Method):
    top_k: int = 5
    user_template: str = "Context:\n{context}\n\nQuestion: {question}"

    def needs_index(self) -> bool:
        return True

    def initial_messages(self, question, ctx, tracker):
        if ctx is None:
            raise ValueError(f"method {self.name!r} needs an index")
        started = time.perf_counter()
        arguments = {"query": question, "top_k": self.top_k}
        # A retrieval that failed on its own (or a tool server gone, which raises) fails the episode:
        # the model must not answer from an error text as if it were the context.
        result = checked(ctx.call(RETRIEVAL_TOOL, arguments, tracker=tracker, result_format=self.result_format))
        record = ToolCallRecord(
            step=0, name=RETRIEVAL_TOOL, arguments=arguments, text=result.text, retrieved_tokens=result.retrieved_tokens,
            latency_s=time.perf_counter() - started, error=result.error, failure=result.failure,
            chunk_ids=[h.chunk_id for h in result.results],
        )
        messages = [Message("system", self.system_text), Message("user", self.user_template.format(question=question, context=result.text))]
        return messages, [record]

    def shows_tool_results(self) -> bool:
        return True  # its prompt holds naive_embedding_search's text

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "retrieval": RETRIEVAL_TOOL, "top_k": self.top_k}
