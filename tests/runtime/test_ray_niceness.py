"""A local Ray instance's workers run at the driver's priority: they do the job's own work."""

from __future__ import annotations

import os


def test_local_workers_run_at_the_drivers_niceness(ray_local):
    """Ray's default starts workers 15 niceness steps down, where an index build's embedding
    actor yields the cores to any other process on the machine."""
    ray = ray_local

    @ray.remote(num_cpus=0)
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)


def test_ray_worker_niceness_from_the_environment_decides(monkeypatch):
    from arag.runtime.cluster import _local_system_config

    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    assert _local_system_config() == {"worker_niceness": 0}
    monkeypatch.setenv("RAY_worker_niceness", "15")
    assert _local_system_config() == {}
