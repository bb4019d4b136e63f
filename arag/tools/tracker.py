"""Which chunks the agent has already read in the current episode."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class ReadTracker:
    """Per-episode memory of chunk_read: a chunk read once is not put into the context again.

    Create one per episode (question) and pass it to every chunk_read call of that episode.
    Against a served index (arag.serve.client.RemoteTools) the server keeps the episode's reads
    under `session_id`, a random id per tracker.
    """

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
