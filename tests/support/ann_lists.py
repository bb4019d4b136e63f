"""What an ANN part's lists file holds, for comparing two encodings of a part (tests and benchmarks)."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from arag.index import ann


def list_entries(trained: faiss.Index, path: Path) -> list[tuple[list[int], list[bytes]]]:
    """Each list's ids and codes (unpacked from fast-scan blocks) in a part's lists file: what a search
    reads, without the bytes that pad a fast-scan list's last block (FAISS leaves them uninitialised)."""
    holder = faiss.clone_index(trained)  # owns the lists read into it; `ivf` is a view of it
    ivf = faiss.downcast_index(faiss.extract_index_ivf(holder))
    ivf.replace_invlists(ann.read_part_lists(path), True)
    packer = ivf.get_CodePacker() if isinstance(ivf, faiss.IndexIVFFastScan) else None
    out, code = [], np.zeros(ivf.code_size, np.uint8)
    for list_no in range(ivf.nlist):
        size, inv = ivf.invlists.list_size(list_no), ivf.invlists
        ids = faiss.rev_swig_ptr(inv.get_ids(list_no), size).tolist() if size else []
        codes = []
        flat = faiss.rev_swig_ptr(inv.get_codes(list_no), size * ivf.code_size) if size and packer is None else None
        for i in range(size):
            if packer is None:
                codes.append(flat[i * ivf.code_size : (i + 1) * ivf.code_size].tobytes())
            else:
                packer.unpack_1_c(inv.get_codes(list_no), i, faiss.swig_ptr(code))
                codes.append(code.tobytes())
        out.append((ids, codes))
    return out
