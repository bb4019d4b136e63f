"""The keyword engine's read caches, built per index part and read by keyword_search (arag.tools.keyword)."""
