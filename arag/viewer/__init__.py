"""A results viewer: a small local web page over a results tree (`python -m pipelines.view`): runs,
episodes step by step, one question across runs, a run's figures, settings and report. Server-rendered
HTML and inline SVG, no script, nothing fetched: it works offline (docs/viewer.md)."""

from arag.viewer.app import create_app, serve

__all__ = ["create_app", "serve"]
