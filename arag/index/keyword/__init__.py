"""The keyword engine's read caches, built per index part and read by keyword_search (arag.tools.keyword):
part_cache (one part's read cache), words (word postings with counts), counts (an LRU of keyword counts)."""
