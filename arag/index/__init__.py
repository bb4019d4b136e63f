"""The A-RAG hierarchical index: documents → chunks → sentences → vectors, and its on-disk layout."""
