"""The A-RAG hierarchical index: documents → chunks → sentences → vectors, the keyword engine's read
caches (arag.index.keyword), and its on-disk layout and manifest."""
