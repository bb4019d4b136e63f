"""A results viewer: a small local web page over a results tree (`python -m pipelines.view`).

Runs → episodes (filtered by run, dataset, method, outcome, forced answer, question text) → one
episode step by step: each model reply with its tokens and time, each tool call with its arguments,
its result as the model saw it and its chunks (those holding gold evidence marked), guard-rail
events, the forced answer, the prediction against the gold answers and the judge's verdict and
reply; and one question across runs side by side. Server-rendered HTML with no script and nothing
fetched from elsewhere, so it works offline; it reads the tree only through arag.evaluation.results."""

from arag.viewer.app import create_app, serve

__all__ = ["create_app", "serve"]
