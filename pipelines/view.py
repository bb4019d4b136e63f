"""Browse a results tree in a web browser: `python -m pipelines.view results.path=<dir>
[view.port=8770] [view.host=127.0.0.1] [view.open_browser=true|false]` (arag.viewer)."""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from arag.config.cli import pipeline_main
from pipelines.config_checks import check_view_config
from pipelines.errors import exit_on_error


@pipeline_main("view")
def main(cfg: DictConfig) -> None:
    from arag.viewer import serve

    with exit_on_error():
        check_view_config(cfg)
        serve(str(cfg.results.path), host=str(cfg.view.host), port=int(cfg.view.port), open_browser=bool(cfg.view.open_browser), out=sys.stdout)


if __name__ == "__main__":
    main()
