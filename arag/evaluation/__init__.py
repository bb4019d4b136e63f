"""Evaluation of agents over benchmark questions in plain Python, one module per job (docs/evaluation.md);
the Ray side is `arag.runtime.evaluate_job`, the library calls `arag.runtime.evaluate` and `arag.runtime.rejudge`."""
