"""Where the YAML configs are: the checkout's top-level conf/ folder, or the copy an installed package
carries as `arag.conf` (setup.py maps conf/ there). The library (method registry) and the pipelines
(Hydra's `config_path`) both ask here, so a wheel works like a checkout."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def conf_dir() -> Path:
    """The config folder (absolute). In a checkout (arag/ beside pyproject.toml and conf/) that is
    the checkout's conf/, so edits there count at once; otherwise the installed `arag/conf`."""
    package = Path(__file__).resolve().parent
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "conf").is_dir():
        return checkout / "conf"
    installed = package / "conf"
    if installed.is_dir():
        return installed
    raise FileNotFoundError(f"arag's configs are missing: neither {checkout / 'conf'} (a checkout) nor {installed} (an installed package) exists")


def conf_path(*parts: str) -> Path:
    """A file or folder under the config folder, e.g. `conf_path("method", "arag_full.yaml")`."""
    return conf_dir().joinpath(*parts)
