"""The A-RAG hierarchical index: documents → chunks → sentences → vectors, and the keyword read caches."""
