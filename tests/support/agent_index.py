"""A tiny index of 2Wiki-like passages for the agent tests (written directly, no pipeline), opened with
the tools' fake trigram encoder so semantic search needs no model."""

from __future__ import annotations

import pytest

from tests.support.tiny_index import Doc, fake_encode, make_index

AGENT_DOCS = [
    Doc("0", "Teutberga", [["Teutberga died 11 November 875.", "She was a queen of Lotharingia by marriage to Lothair II."]]),
    Doc("1", "Lothair II", [["Lothair II was the king of Lotharingia from 855.", "His mother was Ermengarde of Tours."], ["Lothair II died in 869."]]),
    Doc("2", "Ermengarde of Tours", [["Ermengarde of Tours was the wife of Lothair I.", "She died on 20 March 851."]]),
    Doc("3", "Phoolwari", [["Phoolwari is a 1946 Indian film.", "It was directed by Chaturbhuj Doshi."]], part=1),
]


@pytest.fixture(scope="session")
def agent_index(tmp_path_factory):
    return make_index(tmp_path_factory.mktemp("agent") / "index", AGENT_DOCS)


@pytest.fixture(scope="session")
def agent_ctx(agent_index):
    from arag.tools import ToolContext

    with ToolContext(agent_index.path, encoder=fake_encode) as ctx:
        yield ctx
