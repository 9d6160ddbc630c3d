"""The trial-control messages: parsing, a real exchange with a server agent's handler, and our
own server counting a client's trials by them (a client that sends no trial header)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from agent.engines.nghttp2.procfs import ProcessProbe
from agent.engines.nghttp2.server import Supervisor
from agent.errors import TrialControlError, UsageError
from agent.trial_control import (
    Begin,
    End,
    TrialControl,
    listen_control,
    parse_address,
    parse_request,
)
from agent.trial_log import TrialLog
from tests.agent.servers import agent_server
from tests.conftest import require_tool


def test_parse_requests() -> None:
    assert parse_request(b'{"op":"begin","trial_id":"t1"}\n') == Begin("t1")
    end = b'{"op":"end","trial_id":"t1","ok":true,"requests":8,"responses_completed":7}'
    assert parse_request(end) == End("t1", True, 8, 7)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"begin t1", "not a JSON line"),
        (b"[1]", "must be a JSON object"),
        (b'{"op":"begin"}', "trial_id must be"),
        (b'{"op":"stop","trial_id":"t"}', "unknown op 'stop'"),
        (b'{"op":"end","trial_id":"t","ok":1,"requests":1,"responses_completed":1}', "ok true"),
        (b'{"op":"end","trial_id":"t","ok":true,"requests":-1,"responses_completed":1}', "count"),
    ],
)
def test_bad_requests(line: bytes, message: str) -> None:
    with pytest.raises(TrialControlError, match=message):
        parse_request(line)


def test_addresses() -> None:
    assert parse_address("10.0.0.2:9000") == ("10.0.0.2", 9000)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    for bad in ("host", "host:", ":80", "host:0", "host:http"):
        with pytest.raises(UsageError, match="must be HOST:PORT"):
            parse_address(bad)


def test_exchange_with_a_supervisor_writes_one_record_per_trial() -> None:
    """The supervisor watches this test's own process in place of nghttpd."""
    sink = io.StringIO()
    ready = threading.Event()
    port: list[int] = []
    stop: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        supervisor = Supervisor(ProcessProbe(os.getpid()), TrialLog(None, sink))
        server = await listen_control(supervisor, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        stop.append(asyncio.get_running_loop())
        ready.set()
        async with server:
            await server.serve_forever()

    thread = threading.Thread(target=lambda: _run(main()), daemon=True)
    thread.start()
    assert ready.wait(10)
    control = TrialControl(f"127.0.0.1:{port[0]}")
    try:
        control.begin("t1")
        with pytest.raises(TrialControlError, match="trial t1 is still open"):
            control.begin("t2")
        with pytest.raises(TrialControlError, match="trial t9 is not open"):
            control.end("t9", ok=True, requests=1, responses_completed=1)
        control.end("t1", ok=True, requests=8, responses_completed=8)
    finally:
        control.close()
        stop[0].call_soon_threadsafe(stop[0].stop)
    (line,) = sink.getvalue().splitlines()
    record = json.loads(line)
    assert record["trial_id"] == "t1" and record["requests"] == 8
    assert record["cpu_s"] >= 0 and record["engine"] == "nghttp2"
    # The node's conditions over the trial, as the h2 server's records carry them.
    conditions = record["conditions"]
    assert {"cpu_freq_mhz", "governor", "temp_c", "other_cpu_pct", "unavailable"} <= set(conditions)


def _run(coroutine: Coroutine[Any, Any, None]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop stopped from the test's thread
        asyncio.run(coroutine)


def test_a_refused_connection_names_the_address() -> None:
    with pytest.raises(TrialControlError, match=r"trial control 127.0.0.1:1: cannot connect"):
        TrialControl("127.0.0.1:1")


def test_our_server_counts_a_headerless_clients_trial_by_control_messages(tmp_path: Path) -> None:
    # curl sends no trial header, as gtlsclient does not: between `begin` and `end` its
    # requests, each on a new connection, are one trial; outside a bracket they are none.
    require_tool("curl")
    with agent_server(
        None, tmp_path, "--workload", "periodic", "--protocol", "h2c", "--control-port", "0"
    ) as server:
        url = f"http://127.0.0.1:{server.port}/periodic/1024"

        def fetch() -> None:
            argv = ["curl", "-sS", "--http2-prior-knowledge", "-o", os.devnull, url]
            subprocess.run(argv, check=True, timeout=30)

        fetch()  # before any bracket: counted to no trial
        control = TrialControl(f"127.0.0.1:{server.listening['control_port']}")
        control.begin("c1")
        fetch()
        fetch()
        control.end("c1", ok=True, requests=2, responses_completed=2)
        control.close()
        trials = server.wait_for_trials("c1")
    assert list(trials) == ["c1"]
    record = trials["c1"]
    assert (record["requests"], record["responses_completed"], record["ok"]) == (2, 2, True)
    assert record["received"]["frames"]["HEADERS"] == 2
