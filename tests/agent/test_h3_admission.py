"""The HTTP/3 server's connection caps from the node's memory (agent.h3.admission), the queue of
connections in their handshake, and the server under a flood of half-open handshakes: its
memory stays under a stated bound and a legitimate client is still served."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.h3.admission import (
    HALF_OPEN_CONNECTION_BYTES,
    HANDSHAKE_BUDGET_SHARE,
    OPEN_CONNECTION_BYTES,
    H3Limits,
    Handshakes,
    h3_limits,
)
from agent.limits import MAX_CONNECTION_BUDGET_BYTES, connection_budget_bytes
from tests.agent.h3_peers import Credentials, h3_server
from tests.agent.quic_flood import garbage_initials, half_open, silent_handshakes
from tests.agent.servers import run_agent

WINDOW = 65535  # the server's default connection window
PI_AVAILABLE_BYTES = 800 * 10**6  # what a 1 GB Raspberry Pi has available, idle


def test_a_1gb_pi_and_a_big_node_get_caps_their_memory_holds() -> None:
    pi = h3_limits(connection_budget_bytes(PI_AVAILABLE_BYTES), WINDOW)
    assert pi == H3Limits(max_connections=762, max_handshakes=381)
    big = h3_limits(connection_budget_bytes(24 * 2**30), WINDOW)
    assert big == H3Limits(max_connections=1024, max_handshakes=512)
    for limits in (pi, big):
        assert limits.max_handshakes * HALF_OPEN_CONNECTION_BYTES <= MAX_CONNECTION_BUDGET_BYTES


@given(st.integers(0, 2**36), st.integers(1, 2**24), st.one_of(st.none(), st.integers(1, 10**5)))
def test_the_caps_stay_within_the_budget_and_are_never_zero(
    budget_bytes: int, window_bytes: int, max_connections: int | None
) -> None:
    limits = h3_limits(budget_bytes, window_bytes, max_connections=max_connections)
    assert 1 <= limits.max_handshakes <= limits.max_connections
    if max_connections is not None:
        assert limits.max_connections == max_connections
    elif limits.max_connections > 1:
        assert limits.max_connections * (OPEN_CONNECTION_BYTES + window_bytes) <= budget_bytes
    if limits.max_handshakes > 1:
        handshakes_bytes = limits.max_handshakes * HALF_OPEN_CONNECTION_BYTES
        assert handshakes_bytes <= budget_bytes // HANDSHAKE_BUDGET_SHARE


def test_limits_refuse_values_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="max_handshakes <= max_connections"):
        H3Limits(max_connections=2, max_handshakes=3)
    with pytest.raises(ValueError, match="positive"):
        H3Limits(max_connections=2, max_handshakes=1, handshake_timeout_s=0)


def test_handshakes_expire_oldest_first_and_done_ones_are_forgotten() -> None:
    handshakes: Handshakes[str] = Handshakes(timeout_s=10.0)
    assert handshakes.next_expiry_s() is None
    for name, opened_s in (("a", 0.0), ("b", 1.0), ("c", 2.0), ("d", 3.0)):
        handshakes.opened(name, opened_s)
    handshakes.done("b")
    handshakes.done("b")  # completed, then ended: once is enough
    assert handshakes.next_expiry_s() == 10.0
    assert handshakes.expired(9.9) == []
    assert handshakes.expired(12.0) == ["a", "c"]
    assert handshakes.oldest(0) == []
    assert handshakes.oldest(-1) == []
    assert handshakes.next_expiry_s() == 13.0
    handshakes.opened("e", 4.0)
    assert handshakes.oldest(1) == ["d"]
    assert len(handshakes) == 1
    assert handshakes.oldest(5) == ["e"]
    assert handshakes.next_expiry_s() is None


# The bound (39, part 3): before the caps, 3,000 half-open handshakes took the server
# from 32 MB to 218 MB and 40 silent handshakes after them to 220 MB.
FLOOD_RSS_BOUND_BYTES = 150 * 10**6
HALF_OPEN = 3000
SILENT = 40


def _peak_rss_bytes(pid: int) -> int:
    """The process's peak resident set (VmHWM) so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def _fetch(port: int, credentials: Credentials, trial_id: str) -> dict[str, object]:
    """Our client's page fetch as `trial_id`; its record."""
    result = run_agent(
        "fetch",
        f"https://127.0.0.1:{port}/",
        "--protocol",
        "h3",
        "--ca-file",
        str(credentials.ca),
        "--json",
        "--trial-id",
        trial_id,
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


@pytest.mark.slow
def test_a_half_open_flood_leaves_the_server_under_its_bound_and_serving(
    site: Path, credentials: Credentials, tmp_path: Path
) -> None:
    with h3_server(site, tmp_path, credentials) as server:
        max_handshakes = server.listening["max_handshakes"]
        assert max_handshakes < HALF_OPEN  # else the flood tests nothing
        # Each batch waits for the server's answers: when it returns, all were handled.
        assert half_open(server.port, HALF_OPEN) == HALF_OPEN
        with silent_handshakes(server.port, SILENT) as completed:
            assert completed == SILENT
            record = _fetch(server.port, credentials, "after-the-flood")
            peak_bytes = _peak_rss_bytes(server.process.pid)
        assert record["ok"], record["error"]
        served = server.wait_for_trials("after-the-flood")["after-the-flood"]
    assert peak_bytes < FLOOD_RSS_BOUND_BYTES, f"peak RSS {peak_bytes / 1e6:.0f} MB"
    listener = served["transport"]["listener"]  # type: ignore[index]
    # Over the cap the oldest half-open connections made room; the completed ones kept theirs.
    shed = listener["shed_connections"] + listener["expired_handshakes"]
    assert shed >= HALF_OPEN - max_handshakes
    assert listener["refused_connections"] == 0


def test_handshakes_not_done_in_time_are_dropped(
    site: Path, credentials: Credentials, tmp_path: Path
) -> None:
    timeout_s = 0.5
    with h3_server(site, tmp_path, credentials, "--handshake-timeout", str(timeout_s)) as server:
        assert server.listening["handshake_timeout_s"] == timeout_s
        garbage_initials(server.port, 10)
        assert half_open(server.port, 20) == 20  # answered: the garbage before was handled too
        # Past every deadline: a new connection's Initial finds them all overdue, whether the
        # server's timer has fired yet or not (it drops the overdue before admitting).
        time.sleep(timeout_s)
        record = _fetch(server.port, credentials, "after-the-deadline")
        assert record["ok"], record["error"]
        served = server.wait_for_trials("after-the-deadline")["after-the-deadline"]
    listener = served["transport"]["listener"]  # type: ignore[index]
    assert listener["expired_handshakes"] == 30
    assert listener["shed_connections"] == listener["refused_connections"] == 0
