"""vLLM engines in Ray actors, one `EngineServer` each, shared by backends with equal engine settings
(in a process through the registry below, across a cluster by name). Importing this module connects
`VLLMBackend` to them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from arag.llm.types import LLMError
from arag.llm.vllm import DEFAULT_MAX_INFLIGHT, set_engine_connector
from arag.llm.vllm_server import EngineServer, EngineSpec
from arag.runtime.cluster import init_ray

NAMESPACE = "arag"

# The actors this process uses, and how many of its backends use each.
_ACTORS: dict[str, Any] = {}
_USERS: dict[str, int] = {}
_REGISTRY_LOCK = threading.Lock()


def engine_actor(spec: EngineSpec, *, name: str | None = None, detached: bool = False, max_inflight: int = DEFAULT_MAX_INFLIGHT) -> tuple[str, Any]:
    """The actor serving `spec` (created if no actor of that name exists in the cluster)."""
    init_ray()
    name = name or spec.actor_name()
    with _REGISTRY_LOCK:
        handle = _ACTORS.get(name)
        if handle is None:
            env = {"VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false", **spec.env}
            options: dict[str, Any] = {
                "name": name,
                "namespace": NAMESPACE,
                "get_if_exists": True,
                "num_cpus": spec.num_cpus,
                "num_gpus": spec.num_gpus,
                "max_concurrency": max_inflight,
                "max_restarts": 1,
                "runtime_env": {"env_vars": {k: str(v) for k, v in env.items()}},
            }
            if detached:
                options["lifetime"] = "detached"
            payload = {"model": spec.model, "max_model_len": spec.max_model_len, "tool_parser": spec.tool_parser, "engine_args": spec.engine_args()}
            handle = ray.remote(EngineServer).options(**options).remote(payload)
            _ACTORS[name] = handle
        _USERS[name] = _USERS.get(name, 0) + 1
    return name, handle


def release_actor(name: str, *, kill: bool) -> None:
    """One user fewer; the last user of a non-detached actor in this process stops it."""
    with _REGISTRY_LOCK:
        _USERS[name] = max(0, _USERS.get(name, 0) - 1)
        if _USERS[name] or not kill:
            return
        handle = _ACTORS.pop(name, None)
        _USERS.pop(name, None)
    if handle is not None and ray.is_initialized():
        with contextlib.suppress(Exception):
            ray.get(handle.shutdown.remote(), timeout=60)  # the engine's own processes end with it
        ray.kill(handle)


class RayEngineConnection:
    """`arag.llm.vllm.EngineConnection` to the engine actor serving a spec."""

    def __init__(self, spec: EngineSpec, *, name: str | None = None, detached: bool = False, max_inflight: int = DEFAULT_MAX_INFLIGHT):
        self.detached = detached
        self.name, self.handle = engine_actor(spec, name=name, detached=detached, max_inflight=max_inflight)

    def start(self, timeout_s: float) -> dict[str, Any]:
        return ray.get(self.handle.ready.remote(), timeout=timeout_s)

    async def chat(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        ref = self.handle.chat.remote(req)
        try:
            return await asyncio.wait_for(ref, timeout_s)  # an ObjectRef is awaitable
        except (asyncio.TimeoutError, GetTimeoutError) as exc:
            ray.cancel(ref)
            raise LLMError(f"vllm: no reply in {timeout_s:.0f}s", retryable=True) from exc
        except RayActorError as exc:  # the actor died (it is restarted once): worth a retry
            raise LLMError(f"vllm actor died: {str(exc)[:300]}", retryable=True) from exc
        except RayError as exc:
            raise LLMError(f"vllm actor call failed: {str(exc)[:300]}", retryable=False) from exc

    def close(self) -> None:
        release_actor(self.name, kill=not self.detached)


set_engine_connector(RayEngineConnection)
