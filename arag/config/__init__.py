"""The settings' schemas: one dataclass per config node, the one home of its keys, types and
defaults. They are registered in Hydra's ConfigStore (arag.config.store), so the YAML under conf/
holds only what a pipeline sets differently, and a misspelled key is refused by name before Hydra
composes anything (pipelines.command_line)."""
