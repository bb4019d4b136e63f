import pytest

from tests.support.tiny_index import fake_encode


@pytest.fixture(scope="module")
def ctx(eval_index):
    """The scripted evaluation's index, opened once per test file."""
    from arag.tools import ToolContext

    with ToolContext(eval_index.path, encoder=fake_encode) as c:
        yield c
