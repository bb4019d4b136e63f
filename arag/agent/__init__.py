"""The agent: the A-RAG loop (Algorithm 1), action protocols, and episode records.

    from arag.agent import Agent, AgentConfig
    agent = Agent(backend, load_method("arag_full"), ToolContext(index_dir), protocol="json")
    episode = agent.run("Who was the mother of Lothair II?")
"""

from arag.agent.episode import ANSWERED, EPISODE_FAILED, Episode, ModelCallRecord, ToolCallRecord
from arag.agent.loop import Agent, AgentConfig, GuardRails

__all__ = ["ANSWERED", "EPISODE_FAILED", "Agent", "AgentConfig", "Episode", "GuardRails", "ModelCallRecord", "ToolCallRecord"]
