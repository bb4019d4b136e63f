"""A call whose client disconnects is cancelled, so a backlog left by clients that gave up (timed
out, stopped) does not hold the tool workers from the calls behind it."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from arag.serve.http_api import ClientGone, unless_disconnected


def request_then(disconnect: asyncio.Event) -> Request:
    """A POST whose body arrives at once and whose client disconnects when `disconnect` is set."""
    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await disconnect.wait()
        return {"type": "http.disconnect"}

    return Request({"type": "http", "method": "POST", "path": "/tools/keyword_search", "headers": []}, receive)


def test_a_call_whose_client_left_is_cancelled():
    events: list[str] = []

    async def slow_call():
        try:
            await asyncio.sleep(30)
            events.append("answered")
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    async def scenario():
        gone = asyncio.Event()
        request = request_then(gone)
        assert await request.body() == b"{}"
        waiting = asyncio.ensure_future(unless_disconnected(request, slow_call()))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # the client is still there: the call goes on
        gone.set()
        with pytest.raises(ClientGone):
            await asyncio.wait_for(waiting, 5)
        await asyncio.sleep(0)

    asyncio.run(scenario())
    assert events == ["cancelled"]


def test_a_call_answered_before_any_disconnect_returns_its_result():
    async def scenario():
        request = request_then(asyncio.Event())  # never disconnects
        await request.body()

        async def quick():
            await asyncio.sleep(0.01)
            return "answer"

        return await asyncio.wait_for(unless_disconnected(request, quick()), 5)

    assert asyncio.run(scenario()) == "answer"
