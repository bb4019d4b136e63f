"""Where the tests find what lives outside the repository, the same way the configs do: the benchmark
data under $ARAG_DATA_DIR (else ../shared/data beside the checkout, conf/index.yaml's default) and the
2Wiki index under $ARAG_2WIKI_INDEX (else indexes/2wiki in the checkout, where the README's first
command writes it). No machine's own layout is written into a test."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("ARAG_DATA_DIR") or REPO.parent / "shared" / "data")
TWOWIKI_INDEX = Path(os.environ.get("ARAG_2WIKI_INDEX") or REPO / "indexes" / "2wiki")
TWOWIKI_QUESTIONS = DATA_DIR / "2wikimultihopqa" / "questions.jsonl"
