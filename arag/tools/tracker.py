"""The per-episode state of the tools: which chunks the agent has already read."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

# State that stays where it was made (a cache: DocumentSession's loaded documents), not sent on.
LOCAL_STATE = ("documents",)


@dataclass
class ReadTracker:
    """Per-episode memory of chunk_read: a chunk read once is not put into the context again. A worker
    process gets its `state` with each call (taken back by `update`); a tool server keeps it under
    `session_id`, and the caller's tracker follows the server's results (`follow`)."""

    read: set[str] = field(default_factory=set)
    order: list[str] = field(default_factory=list)
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False, repr=False)

    def seen(self, chunk_id: str) -> bool:
        return chunk_id in self.read

    def mark(self, chunk_id: str) -> None:
        if chunk_id not in self.read:
            self.read.add(chunk_id)
            self.order.append(chunk_id)

    def reset(self) -> None:
        self.read.clear()
        self.order.clear()
        self.session_id = uuid.uuid4().hex  # a served index forgets the old reads too

    def state(self) -> dict[str, Any]:
        """What another process needs of this tracker to run a call of its episode."""
        return {k: v for k, v in vars(self).items() if k not in LOCAL_STATE}

    def update(self, state: dict[str, Any]) -> None:
        """Take the state a call left in another process."""
        self.__dict__.update(state)

    def follow(self, spec: Any, result: Any) -> None:
        """Bring this tracker up to date with `result`, which `spec` answered on a tool server."""
        if spec.tracks_reads:
            for hit in result.results:
                if not hit.already_read:
                    self.mark(hit.chunk_id)
        if spec.mirror is not None:
            spec.mirror(self, result)
