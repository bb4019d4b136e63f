"""LLM backends behind one interface (`LLMBackend`): scripted (tests), llamacpp (embedded CPU default),
openai (HTTP) and vllm (engines in Ray actors; this package imports no Ray). arag.llm.factory builds them."""

from arag.llm.base import JSON, NATIVE, BlockingBackend, LLMBackend
from arag.llm.types import Completion, ConfigurationError, LLMError, Message, ToolCall

__all__ = ["JSON", "NATIVE", "BlockingBackend", "Completion", "ConfigurationError", "LLMBackend", "LLMError", "Message", "ToolCall"]
