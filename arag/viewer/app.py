"""The viewer's web app (Starlette) and its server (uvicorn); its routes are the pages of docs/viewer.md."""

from __future__ import annotations

import csv
import io
import json
import socket
import threading
import webbrowser
from pathlib import Path
from typing import Any, Callable, TextIO

import arag.viewer.pages as pages
from arag.evaluation.results import RUN_INFO, RunStore
from arag.viewer.data import ResultsTree, Run
from arag.viewer.errors import NotFound, Refused
from arag.viewer.listing import export_records, filter_rows
from arag.viewer.gold import chunk_titles

# Where pipelines.report writes a tree's report by default (report.path=null: <results.path>/report/report.md).
REPORT_DIR, REPORT_FILE = "report", "report.md"


def find_report(run: Run, root: Path) -> Path | None:
    """<folder>/report/report.md of the run's parent folder or the first above it, up to the tree's root."""
    folder, root = run.path.parent.resolve(), root.resolve()
    while True:
        candidate = folder / REPORT_DIR / REPORT_FILE
        if candidate.is_file():
            return candidate
        if folder == root or root not in folder.parents:
            return None
        folder = folder.parent


def create_app(results: str | Path | ResultsTree):
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import FileResponse, HTMLResponse, Response
        from starlette.routing import Route
    except ImportError:
        raise ValueError("the viewer needs Starlette and uvicorn: pip install -e '.[serve]'") from None

    tree = results if isinstance(results, ResultsTree) else ResultsTree(results)

    def html(render: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:  # sync: Starlette runs it in a thread, off the event loop
            out = render(request)
            return out if isinstance(out, Response) else HTMLResponse(out)

        return endpoint

    def error_page(status: int, message: Callable[[Exception], str]) -> Callable[[Request, Exception], Response]:
        return lambda request, exc: HTMLResponse(pages.render("error.html", status=status, message=message(exc)), status_code=status)

    def run_named(run_id: str) -> Run:
        run = tree.run(run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r} under {tree.root}")
        return run

    def index(request: Request) -> str:
        runs, problems = tree.runs()
        return pages.index_page(str(tree.root), runs, problems, dict(request.query_params))

    def paired(request: Request) -> str:
        runs, problems = tree.runs()
        found, problem = tree.comparisons()  # the report's reading of the tree: only here, never for the first page
        return pages.render("paired.html", root=str(tree.root), by_id={r.run_id: r for r in runs}, problems=[*problems, *([problem] if problem else [])], found=found)

    def episode(request: Request) -> str:
        run_id, question_id = request.query_params.get("run", ""), request.query_params.get("q", "")
        run = run_named(run_id)
        found = tree.episode(run, question_id)
        if found is None:
            raise NotFound(f"run {run_id} has no episode of question {question_id!r}")
        row, trajectory = found
        return pages.episode_page(run, row, trajectory, *chunk_titles(trajectory))

    def compare(request: Request) -> str:
        dataset, question_id = request.query_params.get("dataset", ""), request.query_params.get("q", "")
        found = tree.same_question(dataset, question_id)
        if not found:
            raise NotFound(f"no run of dataset {dataset!r} has question {question_id!r}")
        return pages.render("compare.html", dataset=dataset, question_id=question_id, found=[(run, row, t, chunk_titles(t)[0]) for run, row, t in found])

    def run_page(request: Request) -> str:
        run = run_named(request.query_params.get("run", ""))
        return pages.run_page(run, find_report(run, tree.root))

    def settings(request: Request) -> str:
        run = run_named(request.query_params.get("run", ""))
        return pages.render("settings.html", run=run, invocations=RunStore.at(run.path).read_invocations())

    def report_of(request: Request) -> Path:
        run = run_named(request.query_params.get("run", ""))
        found = find_report(run, tree.root)
        if found is None:
            raise NotFound(f"no {REPORT_DIR}/{REPORT_FILE} beside run {run.run_id} or above it under {tree.root}: python -m pipelines.report results.path={run.path.parent}")
        return found

    def report(request: Request) -> str:
        found = report_of(request)
        images = sorted(p.name for p in found.parent.glob("*.png"))
        return pages.render("report.html", run=run_named(request.query_params["run"]), report_md=found.read_text(encoding="utf-8"), where=str(found), images=images)

    def report_file(request: Request) -> Any:
        folder = report_of(request).parent
        name = request.query_params.get("name", "")
        wanted = folder / name
        if "/" in name or "\\" in name or not name.endswith(".png") or not wanted.is_file():
            raise NotFound(f"no plot {name!r} in {folder}")
        return FileResponse(wanted, media_type="image/png")

    def export(request: Request) -> Response:
        kind = request.query_params.get("format", "csv")
        if kind not in ("csv", "json"):
            raise Refused(f"format={kind!r} is not csv or json")
        records = export_records(filter_rows(tree.runs()[0], pages.listing_params(dict(request.query_params))))
        disposition = {"Content-Disposition": f'attachment; filename="episodes.{kind}"'}
        if kind == "json":
            return Response(json.dumps(records, ensure_ascii=False, indent=1, default=str), media_type="application/json", headers=disposition)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(records[0]) if records else ["question_id"])
        writer.writeheader()
        writer.writerows({k: " | ".join(v) if isinstance(v, list) else v for k, v in record.items()} for record in records)
        return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=disposition)

    routes = {"/": index, "/paired": paired, "/episode": episode, "/compare": compare, "/run": run_page, "/settings": settings, "/report": report, "/report/file": report_file, "/export": export}
    errors = {NotFound: error_page(404, lambda exc: str(exc.args[0])), Refused: error_page(400, str)}
    return Starlette(routes=[Route(path, html(fn)) for path, fn in routes.items()], exception_handlers=errors)


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
