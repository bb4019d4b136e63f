"""Stand-ins that tests and benchmarks share: a synthetic index writer, brute-force reference
scorers, ANN test data, the simulated OpenAI-compatible model servers and the proxy that reads
text tool calls into `tool_calls`. They live with the tests
because the installed package never needs them; benchmarks run from the checkout and import them
from here (the in-process test double that a run can name, model=scripted, is arag/llm/scripted.py)."""
