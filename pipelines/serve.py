"""Serve an index's retrieval tools: `python -m pipelines.serve index.path=<dir> [serve.transport=stdio|http]`.

stdio: MCP over stdin/stdout, for an MCP client that starts the server itself.
http: MCP streamable HTTP at /mcp and the JSON API (GET /tools, POST /tools/<name>, /openapi.json)
on serve.host:serve.port (127.0.0.1 by default), behind an optional bearer token (serve.token or
ARAG_SERVE_TOKEN). See the README's "Tool server" section and arag.service.
"""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from arag.conf_files import conf_dir
from arag.index.store import IncompleteIndexError, IndexNotFoundError
from pipelines.settings import check_serve_config


@hydra.main(config_path=str(conf_dir()), config_name="serve", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from arag.service.app import ServeSettings, open_service, serve_http, serve_stdio

    try:
        check_serve_config(cfg)
        settings = ServeSettings.from_dict(OmegaConf.to_container(cfg.serve, resolve=True))
    except (ValueError, TypeError) as exc:
        sys.exit(f"error: {exc}")
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    if not cfg.index.path:
        sys.exit("error: give the index to serve: index.path=<dir>")
    try:
        service = open_service(str(cfg.index.path), settings, OmegaConf.to_container(cfg.tools, resolve=True))
    except (IndexNotFoundError, IncompleteIndexError) as exc:
        sys.exit(f"error: cannot open index: {exc}")
    except (ValueError, TypeError, RuntimeError) as exc:  # RuntimeError: a worker process could not start
        sys.exit(f"error: {exc}")
    try:
        if settings.transport == "stdio":
            serve_stdio(service)
        else:
            serve_http(service, settings)
    finally:
        service.close()
        service.ctx.close()


if __name__ == "__main__":
    main()
