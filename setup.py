"""Which packages the distribution holds (everything else is in pyproject.toml).

The Hydra configs stay in the repository's top-level conf/ folder and ship inside the package as
`arag.conf` (and `arag.conf.<group>`), so an installed arag finds them (arag/config/files.py)."""

from setuptools import find_namespace_packages, setup

CONF_PACKAGES = ["arag.conf"] + [f"arag.conf.{group}" for group in find_namespace_packages(where="conf")]

setup(
    packages=find_namespace_packages(include=["arag", "arag.*", "pipelines", "pipelines.*"]) + CONF_PACKAGES,
    package_dir={"arag.conf": "conf"},
)
