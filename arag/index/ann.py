"""One approximate-nearest-neighbour (ANN) index over all of an index's exact vector shards.

One IVF quantizer trained across all parts, each part's vectors encoded with it as inverted lists,
merged at query time; candidates are re-ranked by their exact inner product read from the Flat
shards, so ranking errors only come from true neighbours the probe missed. The rules and figures:
docs/indexing.md, "Index format" (Vectors). No Ray here: arag.runtime.ann_job runs these as tasks.
"""

from __future__ import annotations

import itertools
import math
import mmap
import os
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import psutil

from arag.index.layout import PART_SHIFT, atomic_path, part_name
from arag.index.vectors import inner_products, read_shard, write_shard
from arag.small_sorted import best_first

# `index.ann` values besides an explicit FAISS IVF factory string such as "IVF4096,PQ48".
ANN_CHOICES = ("auto", "flat", "ivfpq")
# `auto` keeps exact search up to this many sentences. Measured with benchmarks/semantic_search.py
# (`--sizes 250000,1000000`): an exact scan of 250k 384-d vectors took 17 ms p50 per query on 2
# cores, 1M took ~175 ms, growing linearly, while IVF-PQ stays at a few ms at 1M.
AUTO_FLAT_MAX_SENTENCES = 250_000
# FAISS's k-means warns below 39 training vectors per list; 64 per list is a choice above that, not
# a measured optimum (a larger sample costs k-means time linearly).
TRAIN_PER_LIST = 64
MIN_TRAIN_PER_LIST = 39
PQ_TRAIN_SIZE = 256 * MIN_TRAIN_PER_LIST  # 8-bit PQ codebooks: 256 centroids per sub-quantizer
# 384-d -> PQ96: 96 bytes per vector. With 4 dimensions per byte the PQ order of the candidates
# is close to exact (PQ48 needed ~10x more re-rank candidates for the same recall at 1M:
# `python -m benchmarks.semantic_search --sizes 1000000 --factory IVF1024,PQ48`).
PQ_DIMS_PER_SUBVECTOR = 4
# From this many sentences `auto`/`ivfpq` derive a fast-scan IVF-PQ (`IVF<lists>,PQ<m>x4fs`): ~1/2.6 of
# 8-bit PQ's cost per code byte (`python -m benchmarks.fastscan_cost`), but recall 0.99 needs ~10x the
# exact re-rank (1,280 rows at 500k, 2,560 at 1M static vectors: benchmarks/RESULTS.md, "Fast-scan"). 4M is an unmeasured
# estimate of the crossing at 3 µs a re-ranked row (lower at ann_recall.RERANK_NS_PER_ROW's warm 1.1 µs;
# `python -m benchmarks.ann_side_by_side` measures a size). One 4-bit sub-quantizer per 4 dimensions
# reached only recall@10 0.948 on questions (2,560 candidates, 500k: `python -m benchmarks.semantic_search
# --embedder static --sizes 500000 --tune-questions 500 --queries 300 --factory IVF2048,PQ64x4fs`).
FASTSCAN_MIN_SENTENCES = 4_000_000
FASTSCAN_LISTS_PER_SQRT = 4
FASTSCAN_BITS = 4
FASTSCAN_DIMS_PER_SUBVECTOR = 2
SAMPLE_SEED = 0
# Search settings of an ANN built before recall targets (newer builds record their own:
# arag.index.ann_recall): at 10M, IVF4096,PQ96 with nprobe 256 and rerank 64 gave recall@10 0.994 at
# 21.4 ms p50 (`python -m benchmarks.semantic_search --sizes 1000000,4000000,10000000 --reuse
# --nprobe 128,256,512 --rerank 16,64 --keep`, an earlier version of the script: benchmarks/RESULTS.md).
DEFAULT_NPROBE = 256
DEFAULT_RERANK = 64
MIN_CANDIDATES = 256
# Re-rank rows are held in memory by default when the shards take at most this share of MemAvailable.
RESIDENT_SHARE = 0.5
# One query's probed lists are scanned in this many slices at once by default (`tools.probe_slices`): a
# fixed number, not the cores, so an answer is the same on every machine. At 10M on 2 cores, 2 slices: 12.6 ms
# p50 against 18.4 ms for 1, and 6% fewer queries/s with 4 callers (`python -m benchmarks.semantic_search
# --embedder static --sizes 10000000 --tune-questions 500 --queries 300 --keep --reuse --factory
# IVF16384,PQ256x4fs --target 0.996 --nprobe 512,1024 --rerank 64,128 --slices 1,2 --callers 1,4`).
DEFAULT_PROBE_SLICES = 2

_FACTORY = re.compile(r"^IVF(?P<nlist>\d+)(_HNSW\d+)?,(PQ(?P<m>\d+)(x(?P<bits>\d+))?(?P<fs>fs)?|SQ8|SQfp16|Flat)$")
_ROW_MASK = (1 << PART_SHIFT) - 1


class AnnSettingError(ValueError):
    pass


def check_ann_setting(value: str) -> str:
    if isinstance(value, str) and (value in ANN_CHOICES or _FACTORY.match(value)):
        return value
    raise AnnSettingError(
        f"index.ann={value!r} is not valid: choose one of {', '.join(ANN_CHOICES)} "
        "or a FAISS IVF factory string such as 'IVF4096,PQ48' (IVF<lists>[_HNSW<M>],PQ<m>[x<bits>]|PQ<m>x4fs|SQ8|SQfp16|Flat)"
    )


@dataclass(frozen=True)
class AnnPlan:
    """What the ANN phase builds. `factory` None means exact search over the Flat shards only."""

    setting: str
    num_vectors: int
    dimension: int
    factory: str | None = None
    nlist: int = 0
    pq_m: int | None = None
    pq_bits: int | None = None
    train_size: int = 0
    seed: int = SAMPLE_SEED

    @property
    def kind(self) -> str:
        if self.factory is None:
            return "flat"
        return "ivfpq" if self.pq_m else "ivf"

    @property
    def fast_scan(self) -> bool:
        return bool(self.factory and self.factory.endswith("fs"))


def plan_ann(setting: str, num_vectors: int, dimension: int) -> AnnPlan:
    check_ann_setting(setting)
    if setting == "flat" or num_vectors == 0 or (setting == "auto" and num_vectors <= AUTO_FLAT_MAX_SENTENCES):
        return AnnPlan(setting, num_vectors, dimension)
    factory = derived_factory(num_vectors, dimension) if setting in ("auto", "ivfpq") else setting
    match = _FACTORY.match(factory)
    nlist = int(match["nlist"])
    if num_vectors < MIN_TRAIN_PER_LIST * nlist:
        raise AnnSettingError(f"index.ann={setting!r}: {nlist} lists need at least {MIN_TRAIN_PER_LIST * nlist} vectors to train, the index has {num_vectors}")
    m, bits = (int(match["m"]), int(match["bits"] or 8)) if match["m"] else (None, None)
    if m and dimension % m:
        raise AnnSettingError(f"index.ann={setting!r}: PQ{m} needs a dimension divisible by {m}, the vectors have {dimension}")
    if match["fs"] and bits != FASTSCAN_BITS:
        raise AnnSettingError(f"index.ann={setting!r}: fast-scan PQ (fs) codes have {FASTSCAN_BITS} bits: write PQ{m}x{FASTSCAN_BITS}fs")
    try:
        faiss.index_factory(dimension, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise AnnSettingError(f"index.ann={setting!r}: FAISS cannot build {factory!r} for {dimension}-d vectors: {exc}") from exc
    train_size = min(num_vectors, max(TRAIN_PER_LIST * nlist, PQ_TRAIN_SIZE if m else 0))
    return AnnPlan(setting, num_vectors, dimension, factory, nlist, m, bits, train_size)


def with_larger_code(plan: AnnPlan) -> AnnPlan | None:
    """The same IVF with PQ codes twice as long (at most 2 dimensions per 8-bit byte, 1 per 4-bit
    sub-quantizer); None when there is none or the factory was given explicitly (the user chose it)."""
    if plan.setting not in ("auto", "ivfpq") or not plan.pq_m:
        return None
    m = plan.pq_m * 2
    if m > (plan.dimension if plan.fast_scan else plan.dimension // 2) or plan.dimension % m:
        return None
    factory = f"IVF{plan.nlist},PQ{m}" + ("" if plan.pq_bits == 8 else f"x{plan.pq_bits}") + ("fs" if plan.fast_scan else "")
    return replace(plan, factory=factory, pq_m=m)


def derived_factory(num_vectors: int, dimension: int) -> str:
    """The IVF factory `auto` and `ivfpq` build: fast-scan 4-bit PQ over ~4·sqrt(N) lists from
    FASTSCAN_MIN_SENTENCES on, 8-bit PQ over ~sqrt(N) lists below."""
    fast = num_vectors >= FASTSCAN_MIN_SENTENCES
    # A power of two near that many lists, at most N/39 (k-means needs ~39 vectors per list).
    nlist = 2 ** round(math.log2(max(1.0, (FASTSCAN_LISTS_PER_SQRT if fast else 1) * math.sqrt(num_vectors))))
    while nlist > 1 and nlist * MIN_TRAIN_PER_LIST > num_vectors:
        nlist //= 2
    train_size = min(num_vectors, max(TRAIN_PER_LIST * nlist, PQ_TRAIN_SIZE))
    if fast:
        return f"IVF{nlist},PQ{_divisor_at_most(dimension, dimension // FASTSCAN_DIMS_PER_SUBVECTOR)}x{FASTSCAN_BITS}fs"
    # One byte per 4 dimensions; fewer bits for tiny training sets.
    m = _divisor_at_most(dimension, dimension // PQ_DIMS_PER_SUBVECTOR)
    bits = 8 if train_size >= PQ_TRAIN_SIZE else max(4, min(8, int(math.log2(max(16, train_size) / MIN_TRAIN_PER_LIST))))
    return f"IVF{nlist},PQ{m}" + ("" if bits == 8 else f"x{bits}")


def _divisor_at_most(dimension: int, m: int) -> int:
    return next(k for k in range(max(1, m), 0, -1) if dimension % k == 0)


def ann_dir(root: Path) -> Path:
    return Path(root) / "vectors" / "ann"


def trained_path(root: Path) -> Path:
    return ann_dir(root) / "trained.faiss"


def part_lists_path(root: Path, part: int) -> Path:
    return ann_dir(root) / f"{part_name(part)}.ivf"


_HEADER = struct.Struct("<iqqq?i")  # d, ntotal, dummy, dummy, is_trained, metric_type


class FlatShardError(ValueError):
    pass


def flat_shard_layout(path: Path) -> tuple[int, int, int]:
    """(byte offset of the vectors, rows, dimension) of an exact shard file.

    FAISS's own reader would build IndexIDMap2's id hash map (~50 bytes per vector, 12 GB at 250M
    sentences), needless when ids are the row order. The layout ("IxM2" header, "IxFI" header,
    float count, floats, id count, ids) is checked: a shard of another kind is an error, never misread."""
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(2 * (4 + _HEADER.size) + 8)
    if len(head) < 2 * (4 + _HEADER.size) + 8 or head[:4] != b"IxM2" or head[4 + _HEADER.size : 8 + _HEADER.size] != b"IxFI":
        raise FlatShardError(f"{path}: not an exact IndexIDMap2(IndexFlatIP) shard (index.ann re-ranks from exact shards)")
    d, ntotal, _, _, _, metric = _HEADER.unpack_from(head, 8 + _HEADER.size)
    (count,) = struct.unpack_from("<Q", head, 2 * (4 + _HEADER.size))
    offset = 2 * (4 + _HEADER.size) + 8
    if metric != faiss.METRIC_INNER_PRODUCT or count != ntotal * d or size != offset + 4 * count + 8 + 8 * ntotal:
        raise FlatShardError(f"{path}: unexpected exact shard layout (d={d}, rows={ntotal}, floats={count}, {size} bytes)")
    return offset, ntotal, d


def map_flat_shard(path: Path) -> np.ndarray:
    """The (rows, d) float32 vectors of an exact shard, memory-mapped (for bulk reads)."""
    offset, rows, d = flat_shard_layout(path)
    if rows == 0:
        return np.zeros((0, d), np.float32)
    return np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=(rows, d))


class StoredVectors:
    """Single rows of the exact shards, by sentence id. Resident (`resident`; None: when the shards take
    at most RESIDENT_SHARE of the memory available): each shard memory-mapped and read whole at load, so a
    row is a memory read; pages no process maps may be reclaimed while idle (docs/indexing.md, "Re-rank
    rows"). Else a row is read with `pread`: through a memory map each scattered row would also map its
    neighbours, and the resident memory grow towards all shards."""

    def __init__(self, parts: dict[int, Path], resident: bool | None = None):
        self.files = {part: (str(path), *flat_shard_layout(path)) for part, path in parts.items()}
        if resident is None:
            resident = fits_in_memory([f[0] for f in self.files.values()])
        self.resident = {part: _mapped_rows(*f) for part, f in self.files.items()} if resident else {}

    def scores(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        stored = np.empty((len(ids), len(query)), np.float32)
        parts, local = ids >> PART_SHIFT, ids & _ROW_MASK
        for part in np.unique(parts).tolist():
            where = np.flatnonzero(parts == part)
            path, offset, rows, d = self.files[part]
            part_rows = local[where]
            if d != len(query):
                raise ValueError(f"{path}: {d}-d vectors, the query has {len(query)} dimensions")
            if part_rows.max() >= rows:
                raise IndexError(f"{path}: sentence row {part_rows.max()} beyond its {rows} rows")
            if part in self.resident:
                stored[where] = self.resident[part][part_rows]
                continue
            with open(path, "rb", buffering=0) as f:  # one pread a row, the loop in C
                data = b"".join(map(os.pread, itertools.repeat(f.fileno()), itertools.repeat(4 * d, len(where)), (offset + 4 * d * part_rows).tolist()))
            stored[where] = np.frombuffer(data, np.float32).reshape(len(where), d)
        # FAISS's kernel on this thread: the exact search's scores, no BLAS threads (arag.index.vectors.inner_products).
        return inner_products(stored, query)


def fits_in_memory(paths: list[str] | list[Path]) -> bool:
    """Whether the files take at most RESIDENT_SHARE of the memory the kernel reports available."""
    return sum(os.path.getsize(p) for p in paths) <= RESIDENT_SHARE * psutil.virtual_memory().available


def _mapped_rows(path: str, offset: int, rows: int, d: int) -> np.ndarray:
    with open(path, "rb") as f:  # the map outlives the file; MAP_POPULATE reads it all now
        whole = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    return np.frombuffer(whole, np.float32, count=rows * d, offset=offset).reshape(rows, d)


def sample_rows(part_rows: dict[int, int], size: int, seed: int = SAMPLE_SEED) -> dict[int, np.ndarray]:
    """`size` distinct (part, row) positions drawn uniformly over the whole corpus, by part."""
    parts = sorted(p for p, n in part_rows.items() if n)
    counts = np.asarray([part_rows[p] for p in parts], dtype=np.int64)
    total = int(counts.sum())
    picks = np.sort(np.random.default_rng(seed).choice(total, size=min(size, total), replace=False))
    starts = np.concatenate([[0], np.cumsum(counts)])
    owner = np.searchsorted(starts, picks, side="right") - 1
    return {parts[i]: picks[owner == i] - starts[i] for i in np.unique(owner).tolist()}


def read_sample(flat_shards: dict[int, Path], part_rows: dict[int, int], size: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    chosen = sample_rows(part_rows, size, seed)
    out = [np.asarray(map_flat_shard(flat_shards[p])[rows]) for p, rows in sorted(chosen.items())]
    return np.ascontiguousarray(np.concatenate(out), dtype=np.float32)


def train(plan: AnnPlan, sample: np.ndarray, use_gpu: bool = False, centroids: np.ndarray | None = None) -> faiss.Index:
    """`plan`'s index trained on `sample`; with `centroids` (nlist, d), those of an earlier training on the
    same sample and seed (a larger code of the same lists): only the PQ codebooks are trained."""
    index = faiss.index_factory(plan.dimension, plan.factory, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.extract_index_ivf(index)
    ivf.cp.seed = plan.seed
    if hasattr(index, "do_polysemous_training"):
        # Polysemous codes speed up Hamming-filtered search, which we do not use; training them costs minutes.
        index.do_polysemous_training = False
    if centroids is not None:
        ivf.quantizer.add(np.ascontiguousarray(centroids, dtype=np.float32))  # FAISS skips k-means over a full quantizer
        use_gpu = False
    if use_gpu:
        if faiss.get_num_gpus() < 1:
            raise RuntimeError("the ANN phase was asked to train on a GPU (runtime with GPUs), but this FAISS has no GPU: install the gpu extra (faiss-gpu-cu12)")
        # k-means assignment (the costly part) on the GPU; the trained index is the same CPU index.
        ivf.clustering_index = faiss.index_cpu_to_all_gpus(faiss.IndexFlat(plan.dimension, ivf.quantizer.metric_type))
    index.train(sample)
    if use_gpu:
        ivf.clustering_index = None
    return index


# The trained index is written and read as a shard is: one FAISS index file, written atomically.
write_trained, read_trained = write_shard, read_shard


def coarse_centroids(trained: faiss.Index) -> np.ndarray:
    """The (nlist, d) coarse centroids of a trained IVF index."""
    ivf = faiss.extract_index_ivf(trained)
    return ivf.quantizer.reconstruct_n(0, ivf.nlist)


def encode_part(trained: faiss.Index, flat_shard: Path, part: int, target: Path, batch: int = 65_536, lists: np.ndarray | None = None) -> int:
    """Write one part's vectors encoded with `trained` as inverted lists (codes, ids) to `target`; returns rows.
    `lists`: each row's list, known already (`list_assignment`): the coarse quantizer is not searched."""
    vectors = map_flat_shard(flat_shard)
    index = faiss.clone_index(trained)
    if lists is None:
        for start in range(0, len(vectors), batch):
            chunk = np.ascontiguousarray(vectors[start : start + batch])
            ids = (np.int64(part) << PART_SHIFT) | np.arange(start, start + len(chunk), dtype=np.int64)
            index.add_with_ids(chunk, ids)
    elif len(lists) != len(vectors):
        raise ValueError(f"{flat_shard}: {len(vectors)} vectors, {len(lists)} list assignments")
    else:
        _add_assigned(index, vectors, part, lists, batch)
    writer = faiss.VectorIOWriter()
    faiss.write_InvertedLists(faiss.extract_index_ivf(index).invlists, writer)
    with atomic_path(target) as tmp:  # written and closed here, not by a SWIG destructor; fsynced by atomic_path
        tmp.write_bytes(faiss.vector_to_array(writer.data).tobytes())
    return len(vectors)


def list_assignment(trained: faiss.Index, path: Path, part: int, rows: int) -> np.ndarray:
    """The list of each of a part's `rows` rows in its lists file `path`, written with `trained`'s coarse
    centroids: a larger code of the same lists encodes the part again without searching them."""
    holder_index = faiss.clone_index(trained)  # takes the lists over and deletes them (merge_parts says why)
    holder, lists = faiss.extract_index_ivf(holder_index), read_part_lists(path)
    if lists.code_size != faiss.InvertedLists.INVALID_CODE_SIZE:
        holder.code_size = lists.code_size  # the earlier code's, which only the holder has to accept
    holder.replace_invlists(lists, True)
    if lists.nlist != holder.nlist:
        raise ValueError(f"{path}: {lists.nlist} lists, the trained index has {holder.nlist}")
    assigned = np.full(rows, -1, np.int64)
    for list_no in range(lists.nlist):
        if size := lists.list_size(list_no):
            ids = faiss.rev_swig_ptr(lists.get_ids(list_no), size)
            if np.any(ids >> PART_SHIFT != part) or int((ids & _ROW_MASK).max()) >= rows:
                raise ValueError(f"{path}: list {list_no} holds ids of another part or beyond row {rows}")
            assigned[ids & _ROW_MASK] = list_no
    if missing := int((assigned < 0).sum()):
        raise ValueError(f"{path}: {missing} of {rows} rows are in no list")
    return assigned


def _add_assigned(index: faiss.Index, vectors: np.ndarray, part: int, lists: np.ndarray, batch: int) -> None:
    """Add `vectors` to their `lists` as `add_with_ids` would (each list holds its rows in order),
    without the coarse search. Fast-scan lists hold their codes packed in blocks, which FAISS's
    `add_core` does not write, so those are encoded, then packed list by list."""
    ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
    ids = (np.int64(part) << PART_SHIFT) | np.arange(len(vectors), dtype=np.int64)
    lists = np.ascontiguousarray(lists, dtype=np.int64)
    if not isinstance(ivf, faiss.IndexIVFFastScan):
        for start in range(0, len(vectors), batch):
            chunk = np.ascontiguousarray(vectors[start : start + batch])
            ivf.add_core(len(chunk), faiss.swig_ptr(chunk), faiss.swig_ptr(ids[start:]), faiss.swig_ptr(lists[start:]))
        return
    codes = np.empty((len(vectors), ivf.code_size), np.uint8)
    for start in range(0, len(vectors), batch):
        chunk = np.ascontiguousarray(vectors[start : start + batch])
        ivf.encode_vectors(len(chunk), faiss.swig_ptr(chunk), faiss.swig_ptr(lists[start:]), faiss.swig_ptr(codes[start:]), False)
    packer = ivf.get_CodePacker()
    order = np.argsort(lists, kind="stable")  # rows in order within each list, as add_with_ids leaves them
    for rows in np.split(order, np.flatnonzero(np.diff(lists[order])) + 1) if len(order) else []:
        blocks = -(-len(rows) // packer.nvec)
        flat, packed = np.zeros((blocks * packer.nvec, ivf.code_size), np.uint8), np.zeros(blocks * packer.block_size, np.uint8)
        flat[: len(rows)], list_ids = codes[rows], ids[rows]  # named: a pointer does not keep its array alive
        for b in range(blocks):
            packer.pack_all(faiss.swig_ptr(flat[b * packer.nvec :]), faiss.swig_ptr(packed[b * packer.block_size :]))
        ivf.invlists.add_entries(int(lists[rows[0]]), len(rows), faiss.swig_ptr(list_ids), faiss.swig_ptr(packed))
    ivf.ntotal += len(vectors)
    index.ntotal = ivf.ntotal


def read_part_lists(path: Path) -> faiss.InvertedLists:
    return faiss.read_InvertedLists(faiss.FileIOReader(str(path)))  # not owned by Python (merge_parts)


def part_list_sizes(path: Path) -> np.ndarray:
    """Entries per list of a part's lists file, from its header (FAISS "ilar": nlist, code size,
    "full" + every list's size, or "sprs" + (list, size) pairs); fast-scan lists ("ilbl": nlist, code
    size, entries per block, block bytes, then per list its ids and blocks, each a length and the
    items) are skipped through list by list."""
    with open(path, "rb") as f:
        head = f.read(32)
        if head[:4] == b"ilbl" and len(head) >= 20:
            return _block_list_sizes(f, path, struct.unpack_from("<Q", head, 4)[0])
        if len(head) < 32 or head[:4] != b"ilar" or head[20:24] not in (b"full", b"sprs"):
            raise ValueError(f"{path}: not a FAISS inverted-lists file")
        nlist, _, kind, count = struct.unpack_from("<QQ4sQ", head, 4)
        values = np.fromfile(f, dtype="<u8", count=count)
    if kind == b"full":
        return values.astype(np.int64)
    sizes = np.zeros(nlist, np.int64)
    sizes[values[0::2].astype(np.int64)] = values[1::2]
    return sizes


def _block_list_sizes(f, path: Path, nlist: int) -> np.ndarray:
    sizes = np.zeros(nlist, np.int64)
    f.seek(4 + 4 * 8)
    for list_no in range(nlist):
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: truncated FAISS block inverted-lists file (list {list_no} of {nlist})")
        (ids,) = struct.unpack("<Q", head)
        sizes[list_no] = ids
        f.seek(8 * ids, os.SEEK_CUR)
        (code_bytes,) = struct.unpack("<Q", f.read(8))
        f.seek(code_bytes, os.SEEK_CUR)
    return sizes


def merge_parts(trained: faiss.Index, list_files: list[Path]) -> faiss.Index:
    """`trained` with every part's lists appended, in part order. Each list's final size is reserved
    first, so appending never reallocates (which left up to 2x slack: 2.3 GB instead of 1.0 GB at 10M)."""
    ivf = faiss.extract_index_ivf(trained)
    # read_InvertedLists' lists are not owned by Python, and deleting them through SWIG (`thisown`)
    # corrupts SWIG's type table in faiss 1.15.1: one empty copy of the trained index takes each
    # part's lists over, and deletes them in C++ as it takes the next (replace_invlists) or goes.
    holder_index = faiss.clone_index(trained)
    holder = faiss.extract_index_ivf(holder_index)
    totals = np.zeros(ivf.nlist, np.int64)
    part_sizes = []
    for path in list_files:
        sizes = part_list_sizes(path)
        if len(sizes) != ivf.nlist:
            raise ValueError(f"{path}: {len(sizes)} lists, the trained index has {ivf.nlist}")
        totals += sizes
        part_sizes.append(sizes)
    invlists = faiss.downcast_InvertedLists(ivf.invlists)
    for list_no in np.flatnonzero(totals).tolist():
        invlists.resize(list_no, int(totals[list_no]))  # allocates exactly ...
        invlists.resize(list_no, 0)  # ... and keeps the capacity
    held = np.zeros(ivf.nlist, np.int64)
    for path, sizes in zip(list_files, part_sizes):
        lists = read_part_lists(path)
        # Block (fast-scan) lists record no per-entry code size: their blocks are the index's own layout.
        code_size = ivf.code_size if lists.code_size == faiss.InvertedLists.INVALID_CODE_SIZE and isinstance(faiss.downcast_index(ivf), faiss.IndexIVFFastScan) else lists.code_size
        if lists.nlist != ivf.nlist or code_size != ivf.code_size:
            raise ValueError(f"{path}: {lists.nlist} lists of {lists.code_size}-byte codes, the trained index has {ivf.nlist} of {ivf.code_size}")
        if isinstance(invlists, faiss.BlockInvertedLists) and _merge_would_corrupt(invlists, held, sizes):
            _append_block_lists(invlists, lists)
        else:
            invlists.merge_from(lists, 0)  # copies the entries (in C++, lists in parallel)
        held += sizes
        holder.replace_invlists(lists, True)
    del holder, holder_index
    ivf.ntotal = int(totals.sum())  # `ivf` is `trained` itself (a view of the same FAISS object)
    return trained


def _merge_would_corrupt(target: faiss.BlockInvertedLists, held: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether FAISS's merge_from would corrupt the heap appending lists of `sizes` to lists that
    hold `held` entries: FAISS 1.15.1's BlockInvertedLists.add_entries, when a list already holds
    a non-zero multiple of `block_size` (bytes, compared with an entry count) entries, copies all
    the list's blocks to an address computed from the lists' invalid per-entry code size (a
    10M-vector build crashed once a list held 2,048 codes at a part boundary)."""
    return bool(((held > 0) & (held % int(target.block_size) == 0) & (sizes > 0)).any())


def _append_block_lists(target: faiss.BlockInvertedLists, lists: faiss.InvertedLists) -> None:
    """Append fast-scan `lists` to `target` without merge_from (`_merge_would_corrupt`): a list ending
    on a block boundary gets the new blocks copied after its own, any other goes through add_entries.
    A Python loop, so only for a part where merge_from would corrupt."""
    per_block, block_bytes = int(target.n_per_block), int(target.block_size)
    for list_no in range(lists.nlist):
        n = lists.list_size(list_no)
        if n == 0:
            continue
        held = target.list_size(list_no)
        if held % per_block:
            target.add_entries(list_no, n, lists.get_ids(list_no), lists.get_codes(list_no))
            continue
        target.resize(list_no, held + n)
        blocks = -(-(held + n) // per_block)
        ids = faiss.rev_swig_ptr(target.get_ids(list_no), held + n)
        ids[held:] = faiss.rev_swig_ptr(lists.get_ids(list_no), n)
        codes = faiss.rev_swig_ptr(target.get_codes(list_no), blocks * block_bytes)
        first = held // per_block * block_bytes
        codes[first:] = faiss.rev_swig_ptr(lists.get_codes(list_no), blocks * block_bytes - first)


def top_exact(scores: np.ndarray, ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The `n` best, by score descending, then smaller sentence id."""
    order = best_first(scores, ids)[:n]
    return scores[order], ids[order]


def rerank(vectors: StoredVectors, candidates: np.ndarray, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    candidates = np.unique(candidates[candidates >= 0])
    return top_exact(vectors.scores(candidates, query), candidates, n)


class AnnSearcher:
    """The merged IVF index and the on-disk exact vectors of one index; immutable, so threads search without a lock.
    probe_slices: one query's probed lists (ranked by exact centroid score, then smaller list) are dealt
    into this many slices, the list of rank r to slice r mod probe_slices, scanned at once on as many
    threads as the cores allow, and their candidates merged by approximate score, then smaller id: an
    answer depends on this number, never on the threads or the load. 1: one FAISS search."""

    def __init__(self, root: Path, entry: dict[str, Any], parts: dict[int, Path], resident: bool | None = None, probe_slices: int = DEFAULT_PROBE_SLICES):
        self.index = merge_parts(read_trained(Path(root) / entry["trained"]), [Path(root) / p["file"] for p in entry["parts"] if p["rows"]])
        self.vectors = StoredVectors(parts, resident)
        self.nlist = int(entry["nlist"])
        self.nprobe, self.rerank_factor = search_settings(entry)
        self.probe_slices = int(probe_slices)
        # Every IVF search runs on this pool, FAISS at one OpenMP thread: one query's search otherwise wakes
        # OpenMP threads that spin, taking a core from concurrent searches (docs/indexing.md, "Probe slices").
        self._pool = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="ivf-search", initializer=faiss.omp_set_num_threads, initargs=(1,))
        self._ivf = faiss.extract_index_ivf(self.index)
        self._centroids = self._ivf.quantizer.reconstruct_n(0, self._ivf.nlist)

    def search(self, query: np.ndarray, n: int, nprobe: int | None = None, rerank_factor: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top `n` sentences for one query of shape (1, d): (exact scores descending, sentence ids)."""
        return rerank(self.vectors, self.candidates(query, n, nprobe, rerank_factor), query[0], n)

    def candidates(self, query: np.ndarray, n: int, nprobe: int | None = None, rerank_factor: int | None = None) -> np.ndarray:
        """The IVF's ids to re-rank for the top `n` (-1 where a probe found fewer)."""
        nprobe, rerank_factor = min(int(nprobe or self.nprobe), self.nlist), rerank_factor or self.rerank_factor
        k = min(self.index.ntotal, max(rerank_factor * n, MIN_CANDIDATES)) if n else 0
        if not k:
            return np.zeros(0, np.int64)
        if self.probe_slices == 1:
            return self._pool.submit(self.index.search, query, k, params=faiss.SearchParametersIVF(nprobe=nprobe)).result()[1][0]
        query = np.ascontiguousarray(query, np.float32)
        coarse = inner_products(self._centroids, query[0])
        lists = np.argpartition(-coarse, nprobe - 1)[:nprobe] if nprobe < len(coarse) else np.arange(len(coarse))
        lists = lists[best_first(coarse[lists], lists)]
        dealt = [lists[s :: self.probe_slices] for s in range(min(self.probe_slices, nprobe))]
        found = list(self._pool.map(lambda slice_: _scan_lists(self._ivf, query, k, slice_, coarse[slice_]), dealt))
        scores, ids = np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])
        scores, ids = scores[ids >= 0], ids[ids >= 0]
        return ids[best_first(scores, ids)[:k]]


def _scan_lists(ivf: faiss.IndexIVF, query: np.ndarray, k: int, lists: np.ndarray, coarse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best `k` of the given probed lists (their centroid scores `coarse`) for one query, on this thread
    (FAISS releases the GIL)."""
    scores, ids = np.empty((1, k), np.float32), np.empty((1, k), np.int64)
    lists, coarse = np.ascontiguousarray(lists, np.int64), np.ascontiguousarray(coarse, np.float32)
    params = faiss.SearchParametersIVF(nprobe=len(lists))  # the Python wrapper takes no params: the C++ call
    ivf.search_preassigned_c(1, faiss.swig_ptr(query), k, faiss.swig_ptr(lists), faiss.swig_ptr(coarse), faiss.swig_ptr(scores), faiss.swig_ptr(ids), False, params)
    return scores[0], ids[0]


def search_settings(entry: dict[str, Any]) -> tuple[int, int]:
    """(nprobe, rerank) the build chose (the manifest's `ann.search`), else the defaults."""
    chosen = entry.get("search") or {}
    return int(chosen.get("nprobe", DEFAULT_NPROBE)), int(chosen.get("rerank", DEFAULT_RERANK))


def ann_entry(plan: AnnPlan, root: Path, trained: dict[str, Any], parts: list[dict[str, Any]], recall: dict[str, Any], search: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": plan.kind, "setting": plan.setting, "num_vectors": plan.num_vectors, "recall": recall}
    if search is not None:
        entry["search"] = search
    if plan.factory is None:
        entry["auto_flat_max_sentences"] = AUTO_FLAT_MAX_SENTENCES
        return entry
    entry.update({k: getattr(plan, k) for k in ("factory", "nlist", "pq_m", "pq_bits", "train_size", "seed")})
    entry.update(
        metric="inner_product",
        trained=str(trained_path(root).relative_to(root)),
        train_seconds=trained["seconds"],
        train_device=trained["device"],
        **({"coarse_centroids_from": trained["coarse_from"]} if trained.get("coarse_from") else {}),
        rerank="exact, rows read from vectors/part-*.faiss",
        parts=sorted(parts, key=lambda p: p["part"]),
    )
    return entry
