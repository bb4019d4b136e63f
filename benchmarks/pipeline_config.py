"""The config a pipeline composes from its command line, for benchmarks that run a pipeline's code in
their own process: the same conf/ folder (a checkout's or the installed package's), the same schemas,
the same overrides, so what a benchmark times is what `python -m pipelines.<name> ...` would run."""

from __future__ import annotations


def compose_pipeline(config_name: str, overrides: list[str]):
    """`python -m pipelines.<config_name> <overrides>`'s config (`index`, `evaluate`, ...), unresolved."""
    from hydra import compose, initialize_config_dir

    from arag.config.files import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):  # conf_dir registers the schemas
        return compose(config_name=config_name, overrides=overrides)


def include_override(include: str) -> str:
    """`corpus.include` from a comma-separated list of file globs, each quoted for Hydra."""
    return f"corpus.include=[{','.join(repr(g) for g in include.split(','))}]"
