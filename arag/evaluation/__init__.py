"""Evaluation of agents over benchmark questions (plain Python, no Ray), one module per job:

    questions.py    benchmark question files (JSON Lines) → `Question` records; bad lines named by line
    metrics.py      Contain-Acc, EM and F1 with SQuAD-style normalisation over every gold answer
    evidence.py     which supporting documents the agent saw and read (evidence recall)
    judge.py        LLM-Acc: an LLM decides whether a prediction means the gold answer
    run_settings.py what defines a run (method, model, agent, judge, questions, index) and its run id
    run_config.py   an evaluation's config → its `RunSettings` and the description stored in run.json
    rows.py         one result row per episode (`EpisodeRow`) and its fixed Parquet schema
    runner.py       one question end to end: agent episode → judge → metrics → row
    results.py      the results tree: atomic Parquet parts, resume keys, failed-episode bookkeeping; the
                    one module that reads and writes a run's folder (evaluate, rejudge, report, viewer)
    summary.py      a run's averages over its stored rows, as the commands print them

Reports over a results tree are arag.report, the results page arag.viewer; the Ray side is
`arag.runtime.evaluate_job`, the library calls `arag.runtime.evaluate.evaluate` and
`arag.runtime.rejudge.rejudge`; entry points in `pipelines/`.
"""
