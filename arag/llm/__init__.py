"""LLM backends behind one interface (`arag.llm.base.LLMBackend`): scripted (tests), llamacpp (embedded CPU
default), openai (HTTP) and vllm (engines in Ray actors; this package imports no Ray). arag.llm.factory builds them."""
