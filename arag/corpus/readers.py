"""Read raw corpus files into `Document`s, in deterministically planned parts (docs/indexing.md,
"Index format" (Parts)). Bad records come out as `Reject`s naming file, line and reason; a corpus
that cannot be read at all raises `CorpusError` up front."""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import html
import io
import json
import os
import re
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Iterator

import pyarrow.parquet as pq
from arag.corpus.digest import HashingFile, InputDigest, PartDigest, hash_range, parquet_ranges
from arag.corpus.documents import Document, Reject

FORMATS = ("jsonl", "json", "parquet", "wikiextractor")
DEFAULT_INCLUDE = {"jsonl": ["*.jsonl", "*.jsonl.gz", "*.jsonl.bz2", "*.ndjson"], "json": ["*.json"], "parquet": ["*.parquet"], "wikiextractor": ["wiki_*"]}


class CorpusError(ValueError):
    pass


@dataclass(frozen=True)
class FieldNames:
    id: str | None = "doc_id"  # None: ids are made from file and line
    title: str | None = "title"
    text: str = "text"


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    format: str
    path: str
    fields: FieldNames = field(default_factory=FieldNames)
    include: tuple[str, ...] = ()  # file-name globs when `path` is a folder; empty: per-format default
    prepend_title: bool = False  # put the title as the first line of the text (it becomes a sentence)
    part_size_mb: float = 64.0  # size of a JSON Lines byte-range part; large: a search does fixed work per part (benchmarks/keyword_parts.py)

    def validate(self) -> None:
        if self.format not in FORMATS:
            raise CorpusError(f"corpus '{self.name}': unknown format '{self.format}'; known formats: {', '.join(FORMATS)}")
        if not Path(self.path).exists():
            raise CorpusError(f"corpus '{self.name}': input path does not exist: {self.path}")
        if self.part_size_mb <= 0:
            raise CorpusError(f"corpus '{self.name}': part_size_mb must be positive, got {self.part_size_mb}")


@dataclass(frozen=True)
class InputPart:
    part: int  # position in the plan; output files are named after it
    file: str  # relative to the corpus root
    start: int = 0  # JSON Lines: byte range [start, end); Parquet: row group index in `start`
    end: int = -1
    first_line: int = 1


def corpus_root(spec: CorpusSpec) -> Path:
    path = Path(spec.path)
    return path.parent if path.is_file() else path


def list_input_files(spec: CorpusSpec) -> tuple[Path, list[Path]]:
    """The corpus root and its input files in a stable order."""
    spec.validate()
    root = Path(spec.path)
    if root.is_file():
        return root.parent, [root]
    patterns = list(spec.include) or DEFAULT_INCLUDE[spec.format]
    files = sorted(p for p in root.rglob("*") if p.is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns))
    if not files:
        raise CorpusError(f"corpus '{spec.name}': no input files matching {patterns} under {root} (format '{spec.format}')")
    return root, files


def plan_parts(spec: CorpusSpec) -> list[InputPart]:
    root, files = list_input_files(spec)
    parts: list[InputPart] = []
    for path in files:
        rel = str(path.relative_to(root))
        if spec.format == "parquet":
            try:
                groups = pq.ParquetFile(path).metadata.num_row_groups
            except Exception as exc:  # pyarrow raises several types for a bad footer
                raise CorpusError(f"{path}: not a readable Parquet file: {exc}") from exc
            for g in range(groups):
                parts.append(InputPart(len(parts), rel, start=g))
        elif spec.format == "jsonl" and not is_compressed(path):
            for start, end, line in _line_aligned_ranges(path, int(spec.part_size_mb * 2**20)):
                parts.append(InputPart(len(parts), rel, start, end, line))
        else:
            parts.append(InputPart(len(parts), rel))
    return parts


def part_digest(spec: CorpusSpec, part: InputPart) -> PartDigest:
    """The digest of `part` as its file is now, without parsing it: the bytes `read_part` hashes."""
    path = corpus_root(spec) / part.file
    digest = InputDigest()
    if spec.format == "parquet":
        for start, end in parquet_ranges(path, part.start):
            hash_range(path, start, end, digest)
    elif spec.format == "jsonl" and not is_compressed(path):  # a byte range of a plain JSON Lines file
        hash_range(path, part.start, part.end, digest)
    else:
        hash_range(path, 0, path.stat().st_size, digest)
    return digest.result()


def read_part(spec: CorpusSpec, part: InputPart, digest: InputDigest | None = None) -> Iterator[Document | Reject]:
    """Documents and rejects of one part, in input order; every byte it depends on goes into `digest`."""
    read = {"jsonl": _read_jsonl, "json": _read_json_list, "parquet": _read_parquet, "wikiextractor": _read_wikiextractor}[spec.format]
    for item in read(corpus_root(spec) / part.file, part, digest):
        yield item if isinstance(item, Reject) else _to_document(spec, *item)


# Formats: each yields (source, line, mapping) or Reject.
RawRecord = tuple[str, int, dict]


def is_compressed(path: Path) -> bool:
    return path.suffix in (".gz", ".bz2")


@contextmanager
def _open_binary(path: Path, digest: InputDigest | None = None) -> Iterator[IO[bytes]]:
    """The file's (decompressed) bytes; with `digest`, all of the file's own bytes are hashed."""
    raw: IO[bytes] = open(path, "rb")
    if digest is not None:
        raw = HashingFile(raw, digest)
    with raw:
        try:
            decompress = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix)
            if decompress is not None:
                with decompress(raw, "rb") as f:
                    yield f
            else:
                yield io.BufferedReader(raw) if digest is not None else raw
        finally:
            if digest is not None:
                raw.drain()  # also after a truncated stream stopped the reader: the digest is of the file


# The last part of a file may run this share of corpus.part_size_mb over it rather than leave a sliver.
PART_SLACK = 0.25


def _line_aligned_ranges(path: Path, target: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, first line number) of byte ranges that start at line starts, each ending at the
    first line end more than `target` bytes from its start (the last at the file's end). A range
    is not cut where less than PART_SLACK x `target` would be left: a file a little over the part
    size stays one part, not a full part and a sliver that costs a search as much as a full one."""
    size = path.stat().st_size
    start = end = 0
    first = line = 1
    with open(path, "rb") as f:
        for raw in f:
            end += len(raw)
            line += 1
            if end > start + target and size - end > PART_SLACK * target:
                yield start, end, first
                start, first = end, line
    if end > start:
        yield start, end, first


def _decode(source: str, line: int, raw: bytes) -> str | Reject:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Reject.of(source, line, f"invalid UTF-8 at byte {exc.start} of the line", raw)


def _read_jsonl(path: Path, part: InputPart, digest: InputDigest | None) -> Iterator[RawRecord | Reject]:
    source = part.file
    compressed = is_compressed(path)
    # A compressed file is one part: the reader hashes the whole file. A plain file's part is a
    # byte range: its lines are hashed here, exactly the bytes [start, end).
    with _open_binary(path, digest if compressed else None) as f:
        if not compressed:
            f.seek(part.start)
        pos, line = part.start, part.first_line - 1
        for raw in f:
            line += 1
            if part.end >= 0 and not compressed:
                if pos >= part.end:
                    break
                pos += len(raw)
                if digest is not None:
                    digest.update(raw)
            if not raw.strip():
                continue
            text = _decode(source, line, raw)
            if isinstance(text, Reject):
                yield text
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield Reject.of(source, line, f"invalid JSON: {exc.msg} at column {exc.colno}", text)
                continue
            if not isinstance(obj, dict):
                yield Reject.of(source, line, f"expected a JSON object, got {type(obj).__name__}", text)
                continue
            yield source, line, obj


def _read_json_list(path: Path, part: InputPart, digest: InputDigest | None) -> Iterator[RawRecord | Reject]:
    source = part.file
    try:
        with _open_binary(path, digest) as f:
            data = json.loads(f.read().decode("utf-8"))
    except UnicodeDecodeError as exc:
        yield Reject.of(source, 0, f"invalid UTF-8 at byte {exc.start} of the file")
        return
    except json.JSONDecodeError as exc:
        yield Reject.of(source, exc.lineno, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        return
    if not isinstance(data, list):
        yield Reject.of(source, 1, f"expected a JSON list of objects, got {type(data).__name__}")
        return
    # A JSON list has no lines per record; the record's 1-based position stands in for the line.
    for i, obj in enumerate(data, start=1):
        if not isinstance(obj, dict):
            yield Reject.of(source, i, f"element {i}: expected a JSON object, got {type(obj).__name__}", str(obj))
            continue
        yield source, i, obj


def _read_parquet(path: Path, part: InputPart, digest: InputDigest | None) -> Iterator[RawRecord | Reject]:
    source = part.file
    if digest is not None:
        # pyarrow reads the row group's pages itself; the same bytes, just read, come from the page cache.
        for start, end in parquet_ranges(path, part.start):
            hash_range(path, start, end, digest)
    pf = pq.ParquetFile(path)
    first_row = sum(pf.metadata.row_group(g).num_rows for g in range(part.start)) + 1
    for row, obj in enumerate(pf.read_row_group(part.start).to_pylist(), start=first_row):
        yield source, row, obj  # "line" is the 1-based row number in the file


_DOC_OPEN = re.compile(r'<doc\s+([^>]*)>')
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def _read_wikiextractor(path: Path, part: InputPart, digest: InputDigest | None) -> Iterator[RawRecord | Reject]:
    """WikiExtractor output: `<doc id=.. url=.. title=..>`, the title line, the body, `</doc>`."""
    source = part.file
    header: dict | None = None
    header_line = 0
    body: list[str] = []
    bad: Reject | None = None
    line = 0
    try:
        with _open_binary(path, digest) as f:
            for raw in f:
                line += 1
                text = _decode(source, line, raw)
                if isinstance(text, Reject):
                    if header is not None and bad is None:
                        bad = text
                    elif header is None:
                        yield text
                    continue
                stripped = text.rstrip("\n")
                if header is None:
                    m = _DOC_OPEN.match(stripped.strip())
                    if m:
                        header = {k: html.unescape(v) for k, v in _ATTR.findall(m.group(1))}
                        header_line, body, bad = line, [], None
                    elif stripped.strip():
                        yield Reject.of(source, line, "text outside a <doc> element", stripped)
                    continue
                if stripped.strip() == "</doc>":
                    if bad is not None:
                        yield Reject.of(source, header_line, f"document {header.get('id', '?')}: {bad.reason} (line {bad.line})", bad.raw)
                    else:
                        yield source, header_line, _wiki_record(header, body)
                    header = None
                    continue
                body.append(stripped)
    except (EOFError, OSError) as exc:
        # A truncated or corrupt compressed stream: everything before it is kept.
        where = f"document {header.get('id', '?')} starting at line {header_line}" if header else f"line {line}"
        yield Reject.of(source, line, f"truncated or corrupt file, stopped reading in {where}: {exc}")
        return
    if header is not None:
        yield Reject.of(source, header_line, f"document {header.get('id', '?')} has no closing </doc> (file ends)")


def _wiki_record(header: dict, body: list[str]) -> dict:
    title = header.get("title", "")
    # WikiExtractor repeats the title as the body's first line; the title has its own field.
    if body and body[0].strip() == title.strip():
        body = body[1:]
    return {"doc_id": header.get("id"), "title": title, "text": "\n".join(body).strip()}


def _to_document(spec: CorpusSpec, source: str, line: int, obj: dict) -> Document | Reject:
    fields = spec.fields if spec.format != "wikiextractor" else FieldNames()
    raw = json.dumps(obj, ensure_ascii=False, default=str)
    text = obj.get(fields.text)
    if text is None:
        return Reject.of(source, line, f"missing field '{fields.text}'", raw)
    if not isinstance(text, str):
        return Reject.of(source, line, f"field '{fields.text}' is a {type(text).__name__}, not a string", raw)
    if not text.strip():
        return Reject.of(source, line, f"field '{fields.text}' is empty", raw)
    if fields.id is None:
        doc_id = f"{source}:{line}"
    else:
        value = obj.get(fields.id)
        if value is None or (isinstance(value, str) and not value.strip()):
            return Reject.of(source, line, f"missing field '{fields.id}' (set corpus.fields.id=null to number documents by file and line)", raw)
        doc_id = str(value).strip()
    title = obj.get(fields.title) if fields.title else None
    title = "" if title is None else str(title).strip()
    text = text.strip()
    if spec.prepend_title and title:
        text = f"{title}\n{text}"
    return Document(doc_id=doc_id, title=title, text=text, source=source, line=line)


def corpus_spec_from_config(cfg) -> CorpusSpec:
    """From the Hydra `corpus` node (a DictConfig or a plain mapping)."""
    fields = cfg.get("fields") or {}
    return CorpusSpec(
        name=str(cfg["name"]),
        format=str(cfg["format"]),
        path=os.path.expanduser(str(cfg["path"])),
        fields=FieldNames(**{name: fields.get(name, default) for name, default in asdict(FieldNames()).items()}),
        include=tuple(cfg.get("include") or ()),
        prepend_title=bool(cfg.get("prepend_title", False)),
        part_size_mb=float(cfg.get("part_size_mb", CorpusSpec.part_size_mb)),
    )
