"""Entry points, run as `python -m pipelines.<name>`: parse Hydra config, call arag."""
