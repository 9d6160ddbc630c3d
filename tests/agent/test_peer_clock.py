"""The stream's latencies across two clocks: the pure correction (the server's publish stamp
mapped onto the client's clock through their offset), and `h2iot-agent trial
--peer-clock-offset-ns` against a real `h2iot-agent serve --workload stream`, whose latencies
move by the offset given and whose record says which correction it applied."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.workloads.stream.item import DoublePool
from agent.workloads.stream.tally import Reception, latency_ns
from tests.agent.servers import RunningServer, agent_server, run_agent

NS = st.integers(min_value=-(10**18), max_value=10**18)


@given(t_publish_true_ns=NS, true_latency_ns=st.integers(0, 10**12), offset_ns=NS)
def test_the_mapped_stamp_gives_the_true_latency(
    t_publish_true_ns: int, true_latency_ns: int, offset_ns: int
) -> None:
    # The server stamps its own clock, offset_ns ahead of the client's.
    stamp_ns = t_publish_true_ns + offset_ns
    received_ns = t_publish_true_ns + true_latency_ns
    assert latency_ns(stamp_ns, received_ns, offset_ns) == true_latency_ns


@given(stamp_ns=NS, received_ns=NS, offset_ns=NS)
def test_the_correction_shifts_the_latency_by_exactly_the_offset(
    stamp_ns: int, received_ns: int, offset_ns: int
) -> None:
    assert (
        latency_ns(stamp_ns, received_ns, offset_ns) - latency_ns(stamp_ns, received_ns, 0)
        == offset_ns
    )
    assert latency_ns(stamp_ns, received_ns, 0) == received_ns - stamp_ns  # one host: as read


@given(
    latencies_ns=st.lists(st.integers(0, 10**9), min_size=1, max_size=20),
    offset_ns=st.integers(-(10**12), 10**12),
)
def test_a_reception_over_a_shifted_clock_sees_the_true_latencies(
    latencies_ns: list[int], offset_ns: int
) -> None:
    pool = DoublePool()
    shifted = Reception(payload_doubles=0, peer_offset_ns=offset_ns)
    for seq, late_ns in enumerate(latencies_ns):
        t_true_ns = 10**18 + seq * 10**9
        shifted.item(pool.item(seq, t_true_ns + offset_ns, 0, 0), 10, t_true_ns + late_ns)
    assert shifted.latencies_s == [late / 1e9 for late in latencies_ns]


# h2iot-agent trial against h2iot-agent serve --------------------------------------------------

OFFSET_NS = 1_000 * 10**9  # far beyond any loopback latency, so the shift cannot be noise
DURATION_S = 0.3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(None, tmp_path_factory.mktemp("offset-stream"), "--workload", "stream") as s:
        yield s


def trial(url: str, *options: str) -> dict[str, Any]:
    done = run_agent(
        "trial", url, "--workload", "stream", "--json", "--timeout", "30",
        "--param", "rate_hz=20", "--param", f"duration_s={DURATION_S}",
        "--param", "payload_doubles=4", *options,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads(done.stdout)
    assert record["ok"], record["error"]
    return record


@pytest.mark.parametrize("offset_ns", [OFFSET_NS, -OFFSET_NS])
def test_the_trials_latencies_move_by_the_offset_given(
    server: RunningServer, offset_ns: int
) -> None:
    plain = trial(server.url)
    assert plain["latency_clock_correction"] == "none"
    assert plain["peer_clock_offset_ns"] is None and plain["peer_clock_uncertainty_ns"] is None
    shifted = trial(
        server.url,
        f"--peer-clock-offset-ns={offset_ns}",
        "--peer-clock-uncertainty-ns=250000",
    )
    assert shifted["latency_clock_correction"] == "peer_clock_offset"
    assert (shifted["peer_clock_offset_ns"], shifted["peer_clock_uncertainty_ns"]) == (
        offset_ns,
        250_000,
    )
    # One host, one clock: the uncorrected latencies are the true ones, under a second on
    # loopback; the corrected ones are those plus the offset.
    for record, shift_s in ((plain, 0.0), (shifted, offset_ns / 1e9)):
        metrics = record["metrics"]
        true = [metrics[f"latency_{k}_s"] - shift_s for k in ("p50", "p99", "max")]
        assert 0 < true[0] <= true[1] <= true[2] < 1.0, metrics


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--peer-clock-offset-ns=5", "--peer-clock-uncertainty-ns=-1"], "must be 0 or more"),
        (["--peer-clock-uncertainty-ns=3"], "needs --peer-clock-offset-ns"),
    ],
)
def test_a_bad_peer_clock_is_a_usage_error(
    server: RunningServer, options: list[str], message: str
) -> None:
    done = run_agent("trial", server.url, "--workload", "stream", *options)
    assert done.returncode == 2 and message in done.stderr.strip().splitlines()[-1], done.stderr
