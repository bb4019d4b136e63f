"""Fair shares of the tool server (issue 52), against a real server process on 127.0.0.1: stalled
bodies with the token, idle kept-alive connections and idle MCP event streams cannot refuse a
ready client, and one client's flood of tool calls (from its own loopback address) takes no more
than its share of the slots and delays another client's call by one call, not by the flood. Outcomes are statuses and the order calls ran in."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import select
import signal
import socket
import threading
from contextlib import contextmanager
from typing import Iterator

import httpx

from tests.support.tool_server import TOKEN, server_env, start_http_server, stop
from tests.serve.probes import MCP_HEADERS, WAIT_S, assert_json_error, connect, mcp_session, noted, read_answer, status_of, until_closed, wait_for_notes

MAX_CONNECTIONS = 4
MAX_WAITING = 8


def held_calls_server(index, logs, threads: int):
    """Few request slots and waiting places, `threads` tool threads whose calls can be held, and
    keep-alive, body and stream timeouts long enough that none of them decides an outcome."""
    (logs / "release").mkdir()
    env = server_env(ARAG_SERVE_TOKEN=TOKEN, ARAG_TEST_CALL_LOG=str(logs / "calls.log"), ARAG_TEST_QUEUE_LOG=str(logs / "queued.log"), ARAG_TEST_RELEASE_DIR=str(logs / "release"))
    server = start_http_server(
        index, logs / "server.log", f"serve.max_connections={MAX_CONNECTIONS}", f"serve.max_waiting_connections={MAX_WAITING}", f"serve.threads={threads}", "serve.preload=false",
        "serve.keep_alive_s=60", "serve.header_timeout_s=60", "serve.body_timeout_s=60", "serve.stream_idle_s=600",
        token=TOKEN, env=env, module="tests.serve.slow_server",
    )
    server.calls, server.queued, server.release = logs / "calls.log", logs / "queued.log", logs / "release"
    return server


@pytest.fixture(scope="module")
def shares(served_index, tmp_path_factory):
    server = held_calls_server(served_index.path, tmp_path_factory.mktemp("shares"), threads=1)
    yield server
    stop(server)


@pytest.fixture(scope="module")
def running(served_index, tmp_path_factory):
    """A tool thread per request slot: a flood's held calls all run, none waits in the tool queue (where its slot could be taken)."""
    server = held_calls_server(served_index.path, tmp_path_factory.mktemp("running"), threads=MAX_CONNECTIONS)
    yield server
    stop(server)


def ready_call(server, source: str | None = None) -> httpx.Response:
    transport = httpx.HTTPTransport(local_address=source) if source else None
    with httpx.Client(transport=transport, timeout=WAIT_S) as client:
        return client.post(f"{server.url}/tools/keyword_search", json={"keywords": ["Lothair"], "top_k": 1}, headers=server.headers())


@contextmanager
def connections(server, n: int, request: str, source: str | None = None, answered: int | None = None) -> Iterator[list[socket.socket]]:
    """`n` connections from `source` that each sent `request` (and read its answer, of status `answered`, if given); closed after."""
    conns = []
    try:
        for _ in range(n):
            conns.append(connect(server, source))
            conns[-1].sendall(request.encode())
            if answered is not None:
                assert status_of(read_answer(conns[-1])) == answered
        yield conns
    finally:
        for conn in conns:
            conn.close()


def assert_one_closed(conns, fragment: str) -> None:
    """One of `conns` lost its place: answered a retryable JSON 503 saying `fragment`, and closed."""
    readable, _, _ = select.select(conns, [], [], WAIT_S)
    assert readable, "none of the connections lost its place"
    assert_json_error(until_closed(readable[0]), 503, fragment)


def test_stalled_bodies_with_the_token_give_their_slots_to_a_ready_request(shares):
    stalled_body = f"POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"keywo"
    with connections(shares, MAX_CONNECTIONS, stalled_body) as stalled:
        response = ready_call(shares)
        assert response.status_code == 200, response.text  # was 503 for body_timeout_s
        assert_one_closed(stalled, "another request needed its slot")


def test_idle_kept_alive_connections_do_not_refuse_a_new_client(shares):
    # Answered, then kept alive, idle (as a client's pool, or pinging /health now and then).
    with connections(shares, MAX_WAITING + 2, f"GET /tools HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n", answered=200):
        response = ready_call(shares)
        assert response.status_code == 200, response.text  # was 503 "too many connections are waiting"


def test_idle_event_streams_take_no_request_slots(shares):
    sessions = [mcp_session(shares) for _ in range(MAX_CONNECTIONS + 1)]
    with httpx.Client(timeout=WAIT_S) as client:
        streams = [client.stream("GET", f"{shares.url}/mcp", headers={**MCP_HEADERS, **shares.headers(), "mcp-session-id": session}) for session in sessions]
        responses = []
        try:
            for stream in streams:
                responses.append(stream.__enter__())
                assert responses[-1].status_code == 200  # the 5th was 503
            response = ready_call(shares)
            assert response.status_code == 200, response.text  # was 503: the streams held every slot
            list(responses[0].iter_bytes())  # the oldest stream was ended (streams have a budget of their own), not held for stream_idle_s
        finally:
            for stream in streams[: len(responses)]:
                stream.__exit__(None, None, None)


def test_a_flood_from_one_client_neither_refuses_nor_delays_another_clients_call(shares):
    flood = MAX_CONNECTIONS - 1  # queued behind the held call: with it, every request slot

    def call(source: str, word: str) -> None:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, timeout=WAIT_S) as client:
            answers.append(client.post(f"{shares.url}/tools/keyword_search", json={"keywords": [word]}, headers=shares.headers()).status_code)

    answers: list[int] = []
    threads = [threading.Thread(target=call, args=("127.0.0.2", "held-flood"))]
    threads[0].start()
    wait_for_notes(shares.calls, "held-flood")  # the flood's first call holds the one tool thread
    threads += [threading.Thread(target=call, args=("127.0.0.2", "note-flood")) for _ in range(flood)]
    for thread in threads[1:]:
        thread.start()
    wait_for_notes(shares.queued, "note-flood", flood)
    victim = threading.Thread(target=call, args=("127.0.0.3", "note-victim"))
    victim.start()
    wait_for_notes(shares.queued, "note-victim")
    (shares.release / "flood").touch()
    for thread in [*threads, victim]:
        thread.join(WAIT_S)
    # The victim got a slot (was 503): the flooding client's newest queued call gave its own up,
    # with a retryable 503; and the victim's call ran next (was last, after the whole flood).
    assert sorted(answers) == [200] * (flood + 1) + [503], answers
    ran = [word for word in noted(shares.calls) if word in ("held-flood", "note-flood", "note-victim")]
    assert ran[:2] == ["held-flood", "note-victim"], ran


def flood_then_victim(server, answers: dict[str, httpx.Response]) -> tuple[list[threading.Thread], threading.Thread]:
    """Every request slot held by a running call from 127.0.0.2 (held until the test releases "flood"),
    then a call from 127.0.0.3, returned once it waits for a slot (or was answered: refused).
    Each call's answer goes to `answers` (flood0.., victim)."""

    def call(source: str, word: str, key: str) -> None:
        with httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=WAIT_S) as client:
            answers[key] = client.post(f"{server.url}/tools/keyword_search", json={"keywords": [word]}, headers=server.headers())

    flood = [threading.Thread(target=call, args=("127.0.0.2", "held-flood", f"flood{i}")) for i in range(MAX_CONNECTIONS)]
    for thread in flood:
        thread.start()
    wait_for_notes(server.calls, "held-flood", MAX_CONNECTIONS)  # every request slot: a running call of the flooder's
    assert ready_call(server, "127.0.0.2").status_code == 503  # the flooder's excess
    victim = threading.Thread(target=call, args=("127.0.0.3", "note-victim", "victim"))
    victim.start()
    while "slot-127.0.0.3" not in noted(server.queued) and victim.is_alive():
        victim.join(0.02)
    return flood, victim


def statuses(answers: dict[str, httpx.Response]) -> dict[str, int]:
    return {key: response.status_code for key, response in answers.items()}


def test_a_flood_running_in_every_slot_makes_a_new_client_wait_for_the_next_slot_not_fail(running):
    answers: dict[str, httpx.Response] = {}
    flood, victim = flood_then_victim(running, answers)
    assert "victim" not in answers, statuses(answers)  # was 503: nothing of the flooder's to take, so the newcomer was refused
    excess = ready_call(running, "127.0.0.2")
    assert excess.status_code == 503, excess.text  # while the victim waits, the flooder gets no slot
    (running.release / "flood").touch()
    for thread in [*flood, victim]:
        thread.join(WAIT_S)
    assert statuses(answers) == {**{f"flood{i}": 200 for i in range(MAX_CONNECTIONS)}, "victim": 200}, statuses(answers)
    ran = [word for word in noted(running.calls) if word in ("held-flood", "note-victim")]
    assert ran == ["held-flood"] * MAX_CONNECTIONS + ["note-victim"], ran


def test_a_stop_answers_a_request_waiting_for_a_slot(served_index, tmp_path):
    server = held_calls_server(served_index.path, tmp_path, threads=MAX_CONNECTIONS)
    try:
        answers: dict[str, httpx.Response] = {}
        flood, victim = flood_then_victim(server, answers)
        server.process.send_signal(signal.SIGTERM)
        victim.join(WAIT_S)  # answered by the stop itself, before the running calls' grace period
        assert answers["victim"].status_code == 503, answers["victim"].text
        assert "stopping" in answers["victim"].json()["error"] and answers["victim"].headers["retry-after"] == "1"
        (server.release / "flood").touch()
        for thread in flood:
            thread.join(WAIT_S)
        assert statuses(answers) == {**{f"flood{i}": 200 for i in range(MAX_CONNECTIONS)}, "victim": 503}, statuses(answers)
    finally:
        stop(server)


def test_a_flood_of_waiting_connections_loses_its_own_place_to_another_clients_newcomer(shares):
    # Every waiting place: uploads answered 413 on their Content-Length, their bodies still to come.
    upload = f"POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"
    with connections(shares, MAX_WAITING, upload, "127.0.0.2", answered=413) as flood:
        response = ready_call(shares, "127.0.0.3")
        assert response.status_code == 200, response.text  # was 503: the newcomer was the one closed
        assert_one_closed(flood, "too many connections are waiting")


def test_an_unauthenticated_flood_from_an_authorised_clients_address_takes_none_of_its_share(shares):
    # Every waiting place, from the address the authorised client calls from, with no token.
    with connections(shares, MAX_WAITING, "POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\n", "127.0.0.2") as flood:
        response = ready_call(shares, "127.0.0.2")
        assert response.status_code == 200, response.text
        assert_one_closed(flood, "too many connections are waiting")


def test_a_new_clients_connection_keeps_its_place_when_a_client_holding_more_connects_again(shares):
    # Every waiting place: another client's kept-alive connections; then the newcomer connects, and
    # that client connects once more before the newcomer has sent anything.
    kept_alive = f"GET /tools HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    with connections(shares, MAX_WAITING, kept_alive, "127.0.0.2", answered=200):
        victim = connect(shares, "127.0.0.3")
        try:
            with connections(shares, 1, kept_alive, "127.0.0.2", answered=200):  # answered: the server took it in after the victim
                victim.sendall(kept_alive.encode())
                assert status_of(read_answer(victim)) == 200  # was closed with a 503: it had shown no token yet
        finally:
            victim.close()
