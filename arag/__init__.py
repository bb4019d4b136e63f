"""arag: A-RAG hierarchical indexes, retrieval tools and agent evaluation."""

__version__ = "0.1.0"
