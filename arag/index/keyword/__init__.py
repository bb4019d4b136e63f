"""The keyword engine's read caches, built per index part and read by keyword_search (arag.tools.keyword):

    part_cache.py   one part's read cache (chunk and sentence text by row, trigram postings, gram slices)
    ngrams.py       trigram posting lists over lowered chunk text (compressed bitmaps): keyword candidates
    gram_slices.py  hashed 6-gram slices: the second filter where trigrams cannot narrow
    counts.py       a bounded LRU memory of one keyword's counts over the chunks
"""
