"""The offline knowledge graph of an index (A2RAG): extraction, merge, and graph retrieval."""
