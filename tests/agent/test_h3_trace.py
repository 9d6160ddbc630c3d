"""qh3's QUIC events of a server connection handed out a trial at a time (agent.h3.trace): each
`take` gives the events since the last one, and the logger keeps no connection's trace; a
trial's events written relative to the first, cut at the limit (agent.event_trace); the events
held give the cyclic garbage collector nothing to scan."""

from __future__ import annotations

import gc
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agent.event_trace import TraceWriter
from agent.h3.trace import TrialQuicLogger, TrialQuicTrace, connection_trace
from agent.qlog import CUT_EVENT
from tests.qlog_reader import read_json_seq


@given(st.lists(st.integers(min_value=0, max_value=5), max_size=6))
def test_each_take_gives_the_events_since_the_last(batches: list[int]) -> None:
    logger = TrialQuicLogger()
    trace = logger.start_trace(is_client=False, odcid=b"\x01\x02")
    logged = 0
    for size in batches:
        for _ in range(size):
            trace.log_event(category="transport", event="packet_sent", data={"n": logged})
            logged += 1
        taken = trace.take()
        assert [event["data"]["n"] for event in taken] == list(range(logged - size, logged))
        assert all(event["name"] == "transport:packet_sent" for event in taken)
    assert trace.take() == []
    logger.end_trace(trace)
    assert logger.to_dict()["traces"] == []  # nothing kept for the process's life


def test_events_held_give_the_garbage_collector_nothing_to_track() -> None:
    """qh3's trace held each event as nested dicts and lists, three tracked objects per
    datagram here, which set off full collections of the heap during a transfer (the
    traces' silent gaps, agent.h3.trace); held pickled, the events add none."""
    trace = TrialQuicLogger().start_trace(is_client=True, odcid=b"\x01\x02")
    gc.collect()
    gc.disable()  # no collection may free anything between the two counts
    try:
        before = len(gc.get_objects())
        for n in range(1000):
            raw = [{"length": n + 8, "payload_length": n}]
            trace.log_event(category="transport", event="datagrams_sent", data={"raw": raw})
        added = len(gc.get_objects()) - before
    finally:
        gc.enable()
    assert added < 10  # qh3's own: 3000
    taken = trace.take()
    assert [event["data"]["raw"][0]["payload_length"] for event in taken] == list(range(1000))
    assert {event["name"] for event in taken} == {"transport:datagrams_sent"}


def test_a_connection_traced_by_its_configuration_is_found() -> None:
    from qh3.quic.configuration import QuicConfiguration  # noqa: PLC0415
    from qh3.quic.connection import QuicConnection  # noqa: PLC0415

    traced = QuicConfiguration(is_client=True, quic_logger=TrialQuicLogger())
    assert isinstance(connection_trace(QuicConnection(configuration=traced)), TrialQuicTrace)
    untraced = QuicConfiguration(is_client=True)
    assert connection_trace(QuicConnection(configuration=untraced)) is None


def test_a_servers_qh3_events_are_written_relative_to_the_first_and_cut_at_the_limit(
    tmp_path: Path,
) -> None:
    events = [
        {"time": 1_700_000_000_000.0 + n, "name": "transport:packet_sent", "data": {"n": n}}
        for n in range(500)
    ]
    TraceWriter(tmp_path, max_bytes=4096).write_wall_clock("t1", events)
    data = (tmp_path / "t1.server.sqlog").read_bytes()
    assert len(data) <= 4096
    header, written = read_json_seq(data)
    assert header["trace"]["vantage_point"]["type"] == "server"
    assert header["trace"]["common_fields"]["reference_time"] == 1_700_000_000_000.0
    assert [event["time"] for event in written[:3]] == [0.0, 1.0, 2.0]
    assert written[-1]["name"] == CUT_EVENT
    assert written[-1]["data"]["events_kept"] == len(written) - 1
    assert written[-1]["data"]["events_dropped"] == 500 - len(written) + 1
