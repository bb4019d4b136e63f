"""Which chunks the agent has already read in the current episode."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReadTracker:
    """Per-episode memory of chunk_read: a chunk read once is not put into the context again.

    Create one per episode (question) and pass it to every chunk_read call of that episode.
    """

    read: set[str] = field(default_factory=set)
    order: list[str] = field(default_factory=list)

    def seen(self, chunk_id: str) -> bool:
        return chunk_id in self.read

    def mark(self, chunk_id: str) -> None:
        if chunk_id not in self.read:
            self.read.add(chunk_id)
            self.order.append(chunk_id)

    def reset(self) -> None:
        self.read.clear()
        self.order.clear()
