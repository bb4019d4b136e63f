"""A pipeline's settings checked before any work: Hydra's composition errors as one line naming the
setting and the key or choice probably meant (`explain`; `check_command_line` for every run of a
sweep), then the one conversion to typed settings with the untyped mappings' keys checked against the
library object that reads them (`checked_settings`)."""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any, Callable

from arag.config.files import conf_dir
from arag.config.typed import check_schema_nodes, typed_config, unknown_key
from arag.strict_settings import check_keys, field_names

RUN_FLAGS = ("-m", "--multirun")  # any other flag is a mode of Hydra's own (help, printing the config)
# Hydra's errors for a group chosen without `+` that the config does not choose, and with `+` one it does.
NOT_CHOSEN = re.compile(r"Could not override '([\w/]+)'\. No match")
ALREADY_CHOSEN = re.compile(r"Multiple values for ([\w/]+)\.|Could not (?:append|add)[^']*'([\w/]+)")
# A corpus's defaults for index.chunking, index.chunk_tokens and questions.path (a re-chunked benchmark).
CORPUS_DEFAULTS = ("chunking", "chunk_tokens", "questions")


def unknown_choice(group: str, choice: str, options: list[str]) -> str:
    close = difflib.get_close_matches(choice, options, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    where = f" (conf/{group}/)" if (conf_dir() / group).is_dir() else ""
    return f"unknown {group}={choice}{hint}; the choices of {group}{where}: {', '.join(options) or 'none'}"


def explain(config_name: str, exc: Exception, overrides: list[str], options: Callable[[str], list[str]]) -> ValueError:
    """Hydra's composition error `exc` as one line (an UnknownSettingError for an unknown key)."""
    cause, text = exc.__cause__, str(exc).strip()
    if getattr(exc, "options", None) is not None:  # MissingConfigException: no such group option
        group, _, choice = str(exc.missing_cfg_file).rpartition("/")
        return ValueError(unknown_choice(group, choice, list(exc.options)))
    if isinstance(cause, (KeyError, AttributeError)) and getattr(cause, "full_key", None) and (unknown := unknown_key(cause)):
        return unknown
    if type(cause).__name__ == "ValidationError":
        return ValueError(f"setting {cause.full_key}: {str(cause).splitlines()[0]}")
    chosen = {arg.lstrip("+~").partition("=")[0].split("@")[0]: arg for arg in overrides}
    if (match := NOT_CHOSEN.match(text)) and (group := match[1]) in chosen:
        return ValueError(f"{chosen[group]}: {config_name}'s config chooses no {group} to replace; add one with +{chosen[group]} (the choices of {group}: {', '.join(options(group))})")
    if (match := ALREADY_CHOSEN.match(text)) and (group := match[1] or match[2]) in chosen:
        return ValueError(f"{chosen[group]}: {config_name}'s config chooses a {group} already; replace it with {chosen[group].lstrip('+')}")
    return ValueError(f"{(text.splitlines() or [type(exc).__name__])[0]} (in {', '.join(overrides)})")


def check_command_line(config_name: str, args: list[str]) -> None:
    """Raise ValueError (one line) for what Hydra refuses in any run of `args`, or a key `+` adds to a
    schema node; an unreadable override once its key is checked (a misspelled key is likelier)."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a.startswith("-") and a not in RUN_FLAGS for a in args):
        return
    readable, unreadable = [], None
    for arg in (a for a in args if a not in RUN_FLAGS and not a.lstrip("+~").startswith("hydra")):
        try:
            OverridesParser.create().parse_override(arg)
            readable.append(arg)
        except HydraException as exc:
            reason = (str(exc).strip().splitlines() or ["cannot be parsed"])[0]
            unreadable = unreadable or ValueError(f"cannot read the setting {arg!r} ({reason}); quote a value with spaces, quotes or punctuation, e.g. key='...' inside the shell's quotes")
            key, sep, _ = arg.partition("=")
            if sep and not (conf_dir() / key.lstrip("+~").split("@")[0]).is_dir():
                readable.append(f"{key}=x")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf_dir()), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            for run in BasicSweeper.split_arguments(OverridesParser.create(config_loader=loader).parse_overrides(readable), None)[0]:
                try:
                    check_schema_nodes(compose(config_name, overrides=run))
                except HydraException as exc:
                    raise explain(config_name, exc, run, loader.get_group_options) from None
    finally:
        GlobalHydra.instance().clear()
    if unreadable:
        raise unreadable


def checked_settings(cfg: Any) -> Any:
    """The typed settings of the composed `cfg` (typed ones as they are), untyped mappings checked."""
    from arag.corpus.readers import CorpusSpec, FieldNames
    from arag.index.embedding import EmbedderSpec
    from arag.llm.factory import check_model_settings
    from arag.methods import method_class

    config = typed_config(cfg)
    if hasattr(config, "method"):
        method_class(config.method)
    for group in ("model", "judge.model", "graph.extractor.model"):
        if (model := functools.reduce(lambda node, name: getattr(node, name, None), group.split("."), config)) is not None:
            check_model_settings(model, group)
    if getattr(config, "corpus", None) is not None:
        check_keys("corpus", config.corpus, (*field_names(CorpusSpec), *CORPUS_DEFAULTS))
        check_keys("corpus.fields", config.corpus.get("fields") or {}, field_names(FieldNames))
    if hasattr(config, "embedder"):
        EmbedderSpec.from_config(config.embedder or {})
    return config
