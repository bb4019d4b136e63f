"""Browse a results tree in a web browser: `python -m pipelines.view results.path=<dir>
[view.port=8770] [view.host=127.0.0.1] [view.open_browser=true|false]` (arag.viewer)."""

from __future__ import annotations

import sys

from pipelines.command_line import pipeline_main
from arag.config.schemas import ViewPipeline
from pipelines.errors import exit_on_error


@pipeline_main("view")
def main(config: ViewPipeline) -> None:
    from arag.viewer import serve

    with exit_on_error():
        serve(config.results.path, host=config.view.host, port=config.view.port, open_browser=config.view.open_browser, out=sys.stdout)


if __name__ == "__main__":
    main()
