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
    from arag.config.store import register

    register()  # the schemas the YAML builds on
    package = Path(__file__).resolve().parents[1]  # arag/
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


def method_names() -> list[str]:
    """The methods with a config in conf/method, by name."""
    return sorted(p.stem for p in conf_path("method").glob("*.yaml"))


def read_method_config(name: str) -> dict:
    """conf/method/<name>.yaml with its Hydra `defaults` (other method configs) merged in, as Hydra
    composes it: a config built on another (an ablation) sets only what it changes, top-level keys."""
    import yaml

    path = conf_path("method", f"{name}.yaml")
    if not path.exists():
        raise ValueError(f"unknown method {name!r}; known: {', '.join(method_names())}")
    own = yaml.safe_load(path.read_text())
    defaults = own.pop("defaults", None) or ["_self_"]
    cfg: dict = {}
    for entry in defaults if "_self_" in defaults else [*defaults, "_self_"]:
        cfg.update(own if entry == "_self_" else read_method_config(str(entry)))
    return cfg


@lru_cache(maxsize=1)
def method_declarations() -> dict[str, dict]:
    """What each method config declares for the rest of the code, by method name: `label` (its name in
    reports; the name when unset) and `tools` (the tool set it offers its agent)."""
    out = {}
    for name in method_names():
        cfg = read_method_config(name)
        out[name] = {"label": cfg.get("label") or name, "tools": tuple(cfg.get("tools") or ())}
    return out
