"""Corpus readers: raw files in several formats become uniform `Document` records (arag.corpus.readers)."""
