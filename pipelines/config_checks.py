"""Each pipeline's config check is its one conversion to typed settings (arag.config.typed.typed_config):
struct mode and the schemas' types, a key added with `+` refused by name, and the root schemas' own
checks of the model, method, corpus and embedder mappings (arag.config.schemas)."""

from arag.config.typed import typed_config

check_ask_config = check_evaluate_config = check_rejudge_config = check_index_config = typed_config
check_graph_config = check_serve_config = check_report_config = check_view_config = typed_config
