"""Connecting to Ray: a local instance by default, an existing cluster when RAY_ADDRESS is set."""

from __future__ import annotations

import logging
import os
from typing import Any

from arag.verbosity import quiet_libraries, verbose

log = logging.getLogger("arag.runtime")


def init_ray(num_cpus: int | None = None) -> str:
    """Start or join Ray once per process; a description of the cluster (docs/cluster.md)."""
    quiet = quiet_libraries()  # before Ray starts: its workers inherit the environment
    import ray

    if ray.is_initialized():
        return describe_cluster()
    address = os.environ.get("RAY_ADDRESS") or None
    level = logging.WARNING if verbose() else logging.ERROR
    kwargs: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False, "log_to_driver": True, "logging_level": level}
    if address and quiet:  # a cluster's workers do not inherit this process's environment
        kwargs["runtime_env"] = {"env_vars": quiet}
    if address:
        log.info("joining Ray cluster at %s", address)
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, _system_config=_local_system_config(), **kwargs)
    description = describe_cluster()
    log.info("ray: %s", description)
    return description


def _local_system_config() -> dict[str, Any]:
    """A local instance's workers at the driver's niceness: Ray's default +15 makes the job's own work
    yield the cores to anything else on the machine (docs/indexing.md); RAY_worker_niceness decides where set."""
    return {} if "RAY_worker_niceness" in os.environ else {"worker_niceness": 0}


def describe_cluster() -> str:
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    resources = ray.cluster_resources()
    return f"{len(nodes)} nodes, {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs"
