"""CallGate's turns, in one event loop: the client served longest ago goes next, a queued call that
is cancelled or given up leaves no trace, and a stop answers the queued calls and, past its grace,
the running ones."""

from __future__ import annotations

import asyncio

import pytest

from arag.tools.hosting.admission import CallGate, ServerBusy, ServerStopping


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def run_order(calls: list[tuple[str, str]], slots: int = 1) -> list[str]:
    """The order in which `calls` (client, name), queued in that order behind one held call of
    client "flood", ran."""
    async def scenario() -> list[str]:
        gate, ran, release = CallGate(slots), [], asyncio.Event()

        async def call(client: str, name: str, held: bool = False) -> None:
            async with gate.turn(client, name):
                ran.append(name)
                if held:
                    await release.wait()

        tasks = [asyncio.ensure_future(call("flood", "held", held=True))]
        await settle()
        for client, name in calls:
            tasks.append(asyncio.ensure_future(call(client, name)))
            await settle()
        release.set()
        await asyncio.gather(*tasks)
        assert gate.running == 0 and gate.queued == 0 and not gate._last_turn and not gate._active
        return ran

    return asyncio.run(scenario())


def test_the_client_served_longest_ago_goes_next():
    calls = [("flood", "f1"), ("flood", "f2"), ("flood", "f3"), ("victim", "v1"), ("other", "o1")]
    assert run_order(calls) == ["held", "v1", "o1", "f1", "f2", "f3"]


def test_clients_take_turns_while_both_have_calls_queued():
    calls = [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")]
    assert run_order(calls) == ["held", "a1", "b1", "a2", "b2"]


def test_callers_of_one_client_take_turns_too():
    async def scenario() -> list[str]:
        gate, ran, release = CallGate(1), [], asyncio.Event()

        async def call(caller: str, name: str, held: bool = False) -> None:
            async with gate.turn("one address", caller):
                ran.append(name)
                if held:
                    await release.wait()

        tasks = [asyncio.ensure_future(call("episode-1", "held", held=True))]
        await settle()
        for caller, name in [("episode-1", "e1-a"), ("episode-1", "e1-b"), ("episode-2", "e2-a")]:
            tasks.append(asyncio.ensure_future(call(caller, name)))
            await settle()
        release.set()
        await asyncio.gather(*tasks)
        return ran

    assert asyncio.run(scenario()) == ["held", "e2-a", "e1-a", "e1-b"]


class Ticket:
    waiter = None


def test_a_queued_call_cancelled_or_given_up_leaves_its_place():
    async def scenario() -> None:
        gate, release = CallGate(1), asyncio.Event()

        async def held() -> None:
            async with gate.turn("a", "a"):
                await release.wait()

        async def queued(ticket: Ticket | None = None) -> str:
            async with gate.turn("b", "b", ticket):
                return "ran"

        first = asyncio.ensure_future(held())
        await settle()
        cancelled, ticket = asyncio.ensure_future(queued()), Ticket()
        busy = asyncio.ensure_future(queued(ticket))
        await settle()
        assert gate.queued == 2 and ticket.waiter is not None
        cancelled.cancel()
        ticket.waiter.set_exception(ServerBusy())
        await settle()
        assert gate.queued == 0 and ticket.waiter is None
        with pytest.raises(ServerBusy):
            await busy
        release.set()
        await first
        assert gate.running == 0 and await gate.wait_idle(1)

    asyncio.run(scenario())


def test_a_stop_answers_the_queued_calls_then_past_its_grace_the_running_ones():
    async def scenario() -> None:
        gate, never = CallGate(1), asyncio.Event()

        async def call() -> None:
            async with gate.turn("a", "a"):
                await gate.run(never.wait())

        running, queued = asyncio.ensure_future(call()), asyncio.ensure_future(call())
        await settle()
        gate.close()
        with pytest.raises(ServerStopping):
            await queued
        assert not await gate.wait_idle(0.05)  # the running call goes on
        gate.abandon()
        with pytest.raises(ServerStopping):
            await running
        assert await gate.wait_idle(1)
        with pytest.raises(ServerStopping):
            await call()  # nothing new once stopped

    asyncio.run(scenario())
