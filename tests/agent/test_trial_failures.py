"""Every failure of a trial is its JSON record (`ok` false, the reason), exit status 1, and no
traceback: against a server that accepts and never answers, one that never accepts, and a port
nobody listens on; before the trial (the page's manifest) as well as during it."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.agent.servers import run_agent
from tests.conftest import require_tool

HANG_GUARD_S = 60  # a bound on the command, never a timing assertion


@pytest.fixture
def mute_server() -> Iterator[int]:
    """Accepts every connection and never sends a byte."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


@pytest.fixture
def deaf_server() -> Iterator[int]:
    """Listens but never accepts, its queue full: a connection attempt gets no answer."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for filler in fillers:
        filler.close()
    listener.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def failed_records(*args: str, count: int = 1) -> list[dict[str, object]]:
    result = run_agent(*args, "--json", "--trial-id", "t", timeout=HANG_GUARD_S)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == count, result.stdout
    for record in records:
        assert record["ok"] is False
        assert isinstance(record["error"], str) and "\n" not in record["error"]
    return records


def test_a_fetch_from_a_server_that_never_answers_is_a_failed_record(mute_server: int) -> None:
    """The page's manifest is fetched before the trial: that failure is the trial's too."""
    url = f"http://127.0.0.1:{mute_server}/"
    (record,) = failed_records("fetch", url, "--timeout", "2")
    assert "timeout" in str(record["error"])
    assert "manifest.json" in str(record["error"])
    assert record["trial_id"] == "t" and record["repetition"] == 1
    assert record["workload"] == "page" and record["url"] == url
    assert record["metrics"] == {"resource_count": None, "body_bytes": None}


def test_every_repetition_gets_its_record(mute_server: int) -> None:
    url = f"http://127.0.0.1:{mute_server}/"
    records = failed_records("fetch", url, "--timeout", "1", "--repeat", "2", count=2)
    assert [r["trial_id"] for r in records] == ["t-1", "t-2"]
    assert [r["repetition"] for r in records] == [1, 2]


def test_a_blob_trial_against_a_server_that_never_answers(mute_server: int) -> None:
    url = f"http://127.0.0.1:{mute_server}/"
    (record,) = failed_records("trial", url, "--workload", "blob", "--timeout", "2")
    assert str(record["error"]).startswith("timeout")
    assert record["metrics"] == {
        "request_count": 0,
        "body_bytes": 0,
        "latency_mean_s": None,
        "latency_max_s": None,
    }


@pytest.mark.parametrize("workload", ["page", "blob"])
def test_a_server_that_never_accepts_is_a_timeout_record(deaf_server: int, workload: str) -> None:
    url = f"http://127.0.0.1:{deaf_server}/"
    (record,) = failed_records("trial", url, "--workload", workload, "--timeout", "2")
    assert "timeout" in str(record["error"])


@pytest.mark.parametrize("workload", ["page", "blob"])
def test_a_refused_connection_is_a_failed_record(workload: str) -> None:
    port = closed_port()
    (record,) = failed_records(
        "trial", f"http://127.0.0.1:{port}/", "--workload", workload, "--timeout", "5"
    )
    assert f"cannot connect to 127.0.0.1:{port}" in str(record["error"])


@pytest.mark.nghttp2
def test_the_nghttp2_engine_without_a_manifest_is_a_failed_record(mute_server: int) -> None:
    require_tool("nghttp")
    url = f"http://127.0.0.1:{mute_server}/"
    (record,) = failed_records("fetch", url, "--engine", "nghttp2", "--timeout", "2")
    assert record["engine"] == "nghttp2"
    assert "manifest.json" in str(record["error"])
