"""Serve an index's retrieval tools: `python -m pipelines.serve index.path=<dir> [serve.transport=stdio|http]`.

stdio: MCP over stdin/stdout, for an MCP client that starts the server itself.
http: MCP streamable HTTP at /mcp and the JSON API (GET /tools, POST /tools/<name>, /openapi.json)
on serve.host:serve.port (127.0.0.1 by default), behind a bearer token (serve.token_file,
ARAG_SERVE_TOKEN or serve.token; serve.token=none for an open server on loopback). See
docs/tools.md and arag.serve.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Any

from hydra.core.hydra_config import HydraConfig

from pipelines.command_line import given_text, pipeline_main
from arag.config.schemas import ServePipeline
from arag.index.store import IncompleteIndexError, IndexNotFoundError
from pipelines.errors import exit_on_error


def token_as_typed(serve: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """serve.token as the text given on the command line: Hydra reads `serve.token=1e3` as the
    number 1000.0 and `true` as a boolean; a token is text, so the override's own characters are
    used (a quoted override is already text)."""
    if isinstance(serve.get("token"), str) or (raw := given_text("serve.token", overrides)) is None:
        return serve
    return {**serve, "token": raw}


@pipeline_main("serve")
def main(config: ServePipeline) -> None:
    from arag.serve.app import ServeSettings, open_service, serve_http, serve_stdio

    token = None
    with exit_on_error(also=(TypeError,)):
        settings = ServeSettings.from_dict(token_as_typed(dataclasses.asdict(config.serve), list(HydraConfig.get().overrides.task)))
        if not config.index.path:
            raise ValueError("give the index to serve: index.path=<dir>")
        if settings.transport == "http":
            token = settings.resolved_token()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    if token is not None and settings.token is not None:
        logging.getLogger("arag.serve").warning("serve.token on the command line is visible to every local user (ps); serve.token_file or ARAG_SERVE_TOKEN keep it private")
    with exit_on_error(also=(TypeError, RuntimeError)):  # RuntimeError: a worker process could not start
        try:
            service = open_service(str(config.index.path), settings, dataclasses.asdict(config.tools))
        except (IndexNotFoundError, IncompleteIndexError) as exc:
            raise IndexNotFoundError(f"cannot open index: {exc}") from exc
    try:
        if settings.transport == "stdio":
            serve_stdio(service)
        else:
            serve_http(service, settings, token)
    finally:
        service.close()
        service.ctx.close()


if __name__ == "__main__":
    main()
