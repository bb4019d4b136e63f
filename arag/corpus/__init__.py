"""Corpus readers: raw files in several formats become uniform `Document` records."""

from arag.corpus.documents import Document, Reject
from arag.corpus.readers import CorpusSpec, InputPart, plan_parts, read_part

__all__ = ["Document", "Reject", "CorpusSpec", "InputPart", "plan_parts", "read_part"]
