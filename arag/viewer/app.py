"""The viewer's web app (Starlette) and its server (uvicorn): `/` lists the runs and their episodes
with filters, `/episode?run=…&q=…` shows one episode step by step, `/compare?dataset=…&q=…` one
question across runs side by side."""

from __future__ import annotations

import re
import socket
import threading
import webbrowser
from pathlib import Path
from typing import Any, Callable, TextIO

import arag.viewer.pages as pages
from arag.evaluation.evidence import TITLE_SEPARATOR
from arag.evaluation.results import RUN_INFO
from arag.viewer.data import ResultsTree, Run

TITLES_RECORDED = "chunk titles as recorded with the run"
TITLES_FROM_TEXT = "chunk titles read from the tool results' chunk headers (the run did not record them)"
TITLES_MISSING = "the run recorded no chunk titles and its tool results show none: gold chunks cannot be marked"
# A hit's header line in a tool result (arag.tools.render): "chunk_id: <id> | title: <t1>; <t2> | ...".
HEADER_TITLE = re.compile(r"chunk_id: (?P<id>[^\s|\]]+) \| title: (?P<title>[^|\]\n]+?)\s*(?:\||\]|$)", re.MULTILINE)


def chunk_titles(trajectory: dict[str, Any]) -> tuple[dict[str, str], str]:
    """{chunk id: title field} of the chunks an episode saw, and a note on where they come from: the
    titles the runner recorded, else (runs evaluated before it did) the headers of the tool results."""
    if "chunk_titles" in trajectory:
        return dict(trajectory.get("chunk_titles") or {}), TITLES_RECORDED
    found: dict[str, str] = {}
    for call in trajectory.get("tool_calls") or []:
        ids = set(call.get("chunk_ids") or [])
        for m in HEADER_TITLE.finditer(call.get("text") or ""):
            if m["id"] in ids:
                found.setdefault(m["id"], TITLE_SEPARATOR.join(m["title"].split("; ")))
    return found, TITLES_FROM_TEXT if found else TITLES_MISSING


def create_app(results: str | Path | ResultsTree):
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import HTMLResponse
        from starlette.routing import Route
    except ImportError:
        raise ValueError("the viewer needs Starlette and uvicorn: pip install -e '.[serve]'") from None

    tree = results if isinstance(results, ResultsTree) else ResultsTree(results)

    def html(render: Callable[[Request], str]) -> Callable[[Request], HTMLResponse]:
        def endpoint(request: Request) -> HTMLResponse:  # sync: Starlette runs it in a thread, off the event loop
            try:
                return HTMLResponse(render(request))
            except LookupError as exc:
                return HTMLResponse(pages.error_page(404, str(exc.args[0])), status_code=404)
            except ValueError as exc:
                return HTMLResponse(pages.error_page(400, str(exc)), status_code=400)

        return endpoint

    def run_named(run_id: str) -> Run:
        run = tree.run(run_id)
        if run is None:
            raise LookupError(f"no run {run_id!r} under {tree.root}")
        return run

    def index(request: Request) -> str:
        runs, problems = tree.runs()
        return pages.index_page(str(tree.root), runs, problems, dict(request.query_params))

    def episode(request: Request) -> str:
        run_id, question_id = request.query_params.get("run", ""), request.query_params.get("q", "")
        run = run_named(run_id)
        found = tree.episode(run, question_id)
        if found is None:
            raise LookupError(f"run {run_id} has no episode of question {question_id!r}")
        row, trajectory = found
        return pages.episode_page(run, row, trajectory, *chunk_titles(trajectory))

    def compare(request: Request) -> str:
        dataset, question_id = request.query_params.get("dataset", ""), request.query_params.get("q", "")
        found = tree.same_question(dataset, question_id)
        if not found:
            raise LookupError(f"no run of dataset {dataset!r} has question {question_id!r}")
        return pages.compare_page(dataset, question_id, [(run, row, t, chunk_titles(t)[0]) for run, row, t in found])

    return Starlette(routes=[Route("/", html(index)), Route("/episode", html(episode)), Route("/compare", html(compare))])


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (port 0: any free one); a clear error when it cannot be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ValueError(f"view.host={host!r} is not an address of this machine ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another view.port") from None
    sock.listen(128)
    return sock


def serve(results_root: str | Path, *, host: str = "127.0.0.1", port: int = 8770, open_browser: bool = True, out: TextIO) -> None:
    """Serve the viewer until interrupted; prints its address first (one line, flushed)."""
    import uvicorn

    root = Path(results_root)
    tree = ResultsTree(root)
    runs, _ = tree.runs()  # a missing folder is an error before anything listens
    if not runs:
        raise ValueError(f"no runs (folders with {RUN_INFO}) under {root}: give the results.path an evaluation wrote to")
    app = create_app(tree)
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{bound}/"
    print(f"viewing {len(runs)} runs of {root} at {url} (Ctrl-C stops)", file=out, flush=True)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, [url]).start()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
