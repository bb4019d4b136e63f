"""LLM backends behind one interface (`LLMBackend`): scripted (tests), llamacpp (embedded CPU default),
and, later, openai (HTTP) and vllm (Ray actors). `make_backend(cfg)` builds one from a config mapping."""

from arag.llm.base import JSON, NATIVE, BlockingBackend, LLMBackend
from arag.llm.types import Completion, ConfigurationError, LLMError, Message, ToolCall

__all__ = ["JSON", "NATIVE", "BlockingBackend", "Completion", "ConfigurationError", "LLMBackend", "LLMError", "Message", "ToolCall"]
