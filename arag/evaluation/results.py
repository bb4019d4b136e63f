"""The results tree: one folder per run, Parquet part files written atomically, exact resume; the
one module that spells its layout (docs/evaluation.md, "Results layout" and "Resume")."""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager, suppress
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arag.evaluation.rows import ROW_FAILED, OK, row_schema, rows_to_table
from arag.index.layout import fsync

# Spelled here only (tests/project/test_entry_points.py); everything else asks this module.
RUN_INFO = "run.json"
INVOCATIONS = "invocations.jsonl"
RUN_LOCK = "run.lock"
EPISODES = "episodes"
FAILED_DIR = "failed"


class RunLockedError(RuntimeError):
    """Another evaluation process is writing this run."""


class RunStore:
    def __init__(self, results_root: str | Path, run_id: str):
        self.root = Path(results_root) / run_id
        self.run_id = run_id
        self.episodes = self.root / EPISODES
        self.failed_dir = self.root / FAILED_DIR
        self.info_path = self.root / RUN_INFO
        self._lock_fd: int | None = None
        self._seq = 0

    def open(self) -> "RunStore":
        self.episodes.mkdir(parents=True, exist_ok=True)
        self.failed_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / RUN_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLockedError(f"another evaluation is writing {self.root} (its run.lock is held); wait for it or stop it") from None
        self._lock_fd = fd
        for folder in (self.root, self.episodes, self.failed_dir):
            for stale in folder.glob(".*.tmp"):
                stale.unlink(missing_ok=True)
        return self

    def close(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "RunStore":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def write_run_info(self, info: dict[str, Any]) -> None:
        """run.json, once: a rerun of the same run keeps the first description."""
        path = self.info_path
        if path.exists():
            existing = json.loads(path.read_text())
            if existing.get("run_id") != self.run_id:
                raise ValueError(f"{path} belongs to run {existing.get('run_id')!r}, not {self.run_id!r}")
            return
        with _atomic(path) as tmp:
            tmp.write_text(json.dumps(info, indent=2, ensure_ascii=False, default=str), encoding="utf-8")

    def log_invocation(self, record: dict[str, Any]) -> None:
        with open(self.root / INVOCATIONS, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")

    @classmethod
    def at(cls, run_dir: str | Path) -> "RunStore":
        run_dir = Path(run_dir)
        return cls(run_dir.parent, run_dir.name)

    def read_info(self) -> dict[str, Any]:
        """run.json; a missing or unreadable one is a ValueError naming the file."""
        path = self.info_path
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read the run's description ({exc})") from None
        if not isinstance(info, dict):
            raise ValueError(f"{path}: not a JSON object")
        return info

    def has_info(self) -> bool:
        return self.info_path.is_file()

    def files(self) -> list[Path]:
        return [self.info_path, *self.row_files()]

    def row_files(self) -> list[Path]:
        return self.part_files() + self.failed_files()

    def read_rows(self, columns: Iterable[str] | None = None, question_id: str | None = None) -> list[dict[str, Any]]:
        """The stored rows, answered then failed; columns an older schema version lacks read as None."""
        return [row for path in self.row_files() for row in read_file_rows(path, columns, question_id)]

    def read_rows_by_file(self, columns: Iterable[str] | None = None) -> list[tuple[Path, list[dict[str, Any]]]]:
        return [(path, read_file_rows(path, columns)) for path in self.row_files()]

    def read_invocations(self) -> list[dict[str, Any]]:
        path = self.root / INVOCATIONS
        records = []
        for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
            with suppress(ValueError):  # a line cut short by a kill
                records.append(json.loads(line))
        return [r for r in records if isinstance(r, dict)]

    def part_files(self) -> list[Path]:
        return sorted(self.episodes.glob("part-*.parquet"))

    def done_ids(self) -> set[str]:
        return {q for part in self.part_files() for q in _question_ids(part)}

    def failed_files(self) -> list[Path]:
        return sorted(self.failed_dir.glob("*.parquet"))

    def failed_table(self) -> pa.Table | None:
        files = self.failed_files()
        return pa.concat_tables([pq.read_table(f, schema=row_schema()) for f in files]) if files else None

    def claim_failed(self, question_ids: Iterable[str]) -> dict[str, int]:
        """Take the retried questions' rows out of failed/; returns each one's last attempt number."""
        table = self.failed_table()
        wanted = set(question_ids)
        rows = table.select(["question_id", "attempt"]).to_pylist() if table is not None else []
        claimed = {r["question_id"]: int(r["attempt"] or 1) for r in rows if r["question_id"] in wanted}
        if claimed:
            self._drop_failed(set(claimed))
        return claimed

    def write(self, rows: list[dict[str, Any]]) -> tuple[int, int]:
        """Store one batch: answered rows as a new part, failed rows merged into failed/."""
        ok = [r for r in rows if r["status"] == OK]
        failed = [r for r in rows if r["status"] == ROW_FAILED]
        if ok:
            atomic_write_table(rows_to_table(ok), self.episodes / self._part_name())
        if failed:
            new = {r["question_id"] for r in failed}
            stored = self._stored_failed_ids
            if new & stored:
                # Removed before the new rows are written: a kill in between leaves the question
                # unrecorded (run again), never recorded twice.
                self._drop_failed(new & stored)
            atomic_write_table(rows_to_table(failed), self.failed_dir / self._part_name())
            stored |= new
        return len(ok), len(failed)

    def _part_name(self) -> str:
        self._seq += 1
        return f"part-{time.time_ns():020d}-{os.getpid()}-{self._seq:05d}.parquet"

    @cached_property
    def _stored_failed_ids(self) -> set[str]:
        """Question ids in failed/, read on first need and kept up to date by this store's writes."""
        return {q for f in self.failed_files() for q in _question_ids(f)}

    def _drop_failed(self, question_ids: set[str]) -> None:
        for path in self.failed_files():
            ids = _question_ids(path)
            if question_ids.isdisjoint(ids):
                continue
            table = pq.read_table(path, schema=row_schema())
            keep = table.filter(pa.array([q not in question_ids for q in ids]))
            if keep.num_rows:
                atomic_write_table(keep, path)
            else:
                path.unlink()
                _fsync_dir(path.parent)
        self._stored_failed_ids.difference_update(question_ids)


def _question_ids(path: Path) -> list[str]:
    return pq.read_table(path, columns=["question_id"]).column("question_id").to_pylist()


def read_file_rows(path: Path, columns: Iterable[str] | None = None, question_id: str | None = None) -> list[dict[str, Any]]:
    """The rows of one row file in file order; columns its schema version lacks read as None."""
    wanted = list(columns) if columns is not None else row_schema().names
    with pq.ParquetFile(path) as f:  # one file: no dataset discovery
        names = set(f.schema_arrow.names)
        present = [c for c in wanted if c in names]
        table = f.read(columns=present if question_id is None else list(dict.fromkeys([*present, "question_id"])))
    if question_id is not None:
        table = table.filter(pc.equal(table.column("question_id"), question_id)).select(present)
    return [{**dict.fromkeys(wanted), **r} for r in table.to_pylist()]


def read_row(path: Path, index: int) -> dict[str, Any]:
    with pq.ParquetFile(path) as f:
        table = f.read()
    if not 0 <= index < table.num_rows:
        raise LookupError(f"{path} has {table.num_rows} rows, no row {index}")
    row = table.slice(index, 1).to_pylist()[0]
    return {**dict.fromkeys(row_schema().names), **row}


def find_run_dirs(results_root: str | Path, *, nested: bool = True) -> list[Path]:
    """Every run folder (one holding run.json) under `results_root`; a tree may group runs in folders."""
    root = Path(results_root)
    if not root.is_dir():
        raise FileNotFoundError(f"no results folder at {root}")
    return sorted(p.parent for p in (root.rglob(RUN_INFO) if nested else root.glob(f"*/{RUN_INFO}")))


def row_files(results_root: str | Path) -> list[Path]:
    root = Path(results_root)
    return sorted([*root.glob(f"**/{EPISODES}/part-*.parquet"), *root.glob(f"**/{FAILED_DIR}/*.parquet")])


@contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """A temporary name beside `path` that no `*.parquet` glob matches, renamed onto it on success."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    yield tmp
    fsync(tmp)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def atomic_write_table(table: pa.Table, path: Path) -> None:
    with _atomic(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def _fsync_dir(path: Path) -> None:
    with suppress(OSError):  # some filesystems do not sync directories; the rename is still atomic
        fsync(path)
