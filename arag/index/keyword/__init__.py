"""The keyword engine's read caches, built per index part and read by keyword_search (arag.tools.keyword):

    part_cache.py   one part's read cache (chunk and sentence text by row, word postings)
    words.py        the distinct words of the lowered chunk text with their chunk rows and counts:
                    keyword counts from words alone, or candidates to count on the text
    counts.py       a bounded LRU memory of one keyword's counts over the chunks
"""
