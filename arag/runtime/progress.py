"""Progress bars of the runtime jobs (tqdm on stderr), shared by the jobs."""

from __future__ import annotations

import sys


def progress_bar(total: int | None, desc: str, enabled: bool, unit: str = "it", smoothing: float = 0.3):
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, disable=not enabled, file=sys.stderr, dynamic_ncols=True, smoothing=smoothing)
