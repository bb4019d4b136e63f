"""A results viewer: a small local web page over a results tree (`python -m pipelines.view`).

Runs (with their identity: judge, re-judged origin, guard rails, commit) → episodes (filtered by run,
dataset, method, outcome, forced answer, gold evidence, tool errors, repeated calls, gold seen but
wrong, text in questions, predictions and trajectories; sortable; exported as CSV or JSON) → one
episode step by step: each model reply with its tokens and time, each tool call with its arguments,
its result as the model saw it and its chunks (those holding gold evidence marked, for every method),
tool errors and repeated calls labelled, guard-rail events, the forced answer, the prediction against
the gold answers and the judge's verdict and reply; one question across runs side by side; a run's
figures with intervals, its settings and its report. Server-rendered HTML and inline SVG with no
script and nothing fetched from elsewhere, so it works offline; it reads the tree only through
arag.evaluation.results."""

from arag.viewer.app import create_app, serve

__all__ = ["create_app", "serve"]
