"""The offline knowledge graph of an index (A2RAG): extraction, merge, and graph retrieval. Plain
Python; `arag.runtime.graph_job` runs the build on Ray."""
