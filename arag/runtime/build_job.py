"""What the build jobs (index_job, graph_job) share: joining Ray, and their result."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from arag.index.layout import read_json
from arag.runtime.part_runner import ray_data_for_parts


def join_ray(ray_init: Callable[[], object], log: logging.Logger) -> None:
    log.info("ray: %s", ray_init())
    ray_data_for_parts()


@dataclass(frozen=True)
class JobResult:
    action: Any  # the job's own value for what it did (built, resumed, up to date)
    manifest: dict[str, Any]
    elapsed_s: float

    @classmethod
    def since(cls, started: float, action: Any, manifest: Path) -> JobResult:
        """The result of a job started at `started` (perf_counter) that wrote `manifest`."""
        return cls(action, read_json(manifest), time.perf_counter() - started)
