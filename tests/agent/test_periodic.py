"""The periodic workload between our client and server over h2c, h2 and h3: kept and new
connections, GET and POST, one record per exchange on the client's clock, the server's one
record of a trial that spanned several connections, keepalive PINGs, and a server idle timeout
shorter than the interval turning a kept connection into recorded reconnects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.protocols import protocol_spec
from tests.agent.h3_peers import Credentials
from tests.agent.servers import RunningServer, agent_server, run_agent

_PROTOCOLS = ("h2c", "h2", "h3")


@contextmanager
def periodic_server(
    protocol: str, tmp: Path, credentials: Credentials, *extra: str
) -> Iterator[RunningServer]:
    tls = (
        ()
        if protocol == "h2c"
        else ("--cert", str(credentials.cert), "--key", str(credentials.key))
    )
    with agent_server(
        None, tmp, "--workload", "periodic", "--protocol", protocol, *tls, *extra
    ) as server:
        yield server


def periodic_trial(
    port: int,
    protocol: str,
    credentials: Credentials,
    trial_id: str,
    *params: str,
) -> dict[str, object]:
    """The client's record of one trial of ours against the server on `port`."""
    options = {
        "--protocol": protocol,
        "--ca-file": str(credentials.ca),
        "--workload": "periodic",
        "--trial-id": trial_id,
    }
    argv = [arg for option in options.items() for arg in option]
    argv += [arg for param in params for arg in ("--param", param)]
    url = f"{protocol_spec(protocol).scheme}://127.0.0.1:{port}/"
    result = run_agent("trial", url, "--json", *argv)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 1, result.stdout + result.stderr
    record: dict[str, object] = lines[0]
    return record


def _exchanges(record: dict[str, object]) -> list[dict[str, object]]:
    exchanges = record["exchanges"]
    assert isinstance(exchanges, list)
    return exchanges


def run_periodic(
    protocol: str,
    tmp: Path,
    credentials: Credentials,
    trial_id: str,
    *params: str,
    serve: tuple[str, ...] = (),
) -> tuple[dict[str, object], dict[str, object]]:
    """One trial on a fresh server (given `serve`'s options): the client's record, checked
    ok, and the server's."""
    with periodic_server(protocol, tmp, credentials, *serve) as server:
        record = periodic_trial(server.port, protocol, credentials, trial_id, *params)
        served = server.wait_for_trials(trial_id)[trial_id]
    assert record["ok"], record["error"]
    return record, served


def _int(exchange: dict[str, object], key: str) -> int:
    value = exchange[key]
    assert isinstance(value, int)
    return value


def _metrics(record: dict[str, object]) -> dict[str, object]:
    metrics = record["metrics"]
    assert isinstance(metrics, dict)
    return metrics


@pytest.mark.parametrize("protocol", _PROTOCOLS)
@pytest.mark.parametrize(("connection", "method"), [("keep", "GET"), ("new", "POST")])
def test_exchanges_on_schedule_each_recorded(
    protocol: str, connection: str, method: str, credentials: Credentials, tmp_path: Path
) -> None:
    record, served = run_periodic(
        protocol,
        tmp_path,
        credentials,
        "p-1",
        "count=3",
        "interval_s=0.05",
        f"connection={connection}",
        f"method={method}",
        "request_bytes=3000",
        "response_bytes=700",
    )
    exchanges = _exchanges(record)
    assert [e["index"] for e in exchanges] == [0, 1, 2]
    assert all(e["ok"] for e in exchanges)
    due = [_int(e, "scheduled_mono_ns") for e in exchanges]
    # Due every interval from the first connect's start, never shifted by a late one.
    assert due[0] == exchanges[0]["start_mono_ns"]
    assert [d - due[0] for d in due] == [0, 50_000_000, 100_000_000]
    for exchange in exchanges:
        late_ns = _int(exchange, "start_mono_ns") - _int(exchange, "scheduled_mono_ns")
        assert late_ns >= 0
        assert exchange["lateness_s"] == pytest.approx(late_ns / 1e9)
    handshakes = [e["handshake"] for e in exchanges]
    if connection == "keep":
        assert handshakes == ["full", "kept", "kept"]
        assert [e["connected_mono_ns"] is None for e in exchanges] == [False, True, True]
    else:
        assert handshakes == ["full"] * 3
        assert all(e["connect_s"] for e in exchanges)
    # Bytes on the wire: the body each way at least, and a new connection's handshake too.
    sent_at_least = 3000 if method == "POST" else 1
    assert all(_int(e, "wire_bytes_sent") > sent_at_least for e in exchanges)
    assert all(_int(e, "wire_bytes_received") > 700 for e in exchanges)
    metrics = _metrics(record)
    assert metrics["exchanges_ok"] == 3
    assert metrics["handshakes_full"] == (1 if connection == "keep" else 3)
    assert metrics["reconnects"] == 0
    phases = record["phases"]
    assert isinstance(phases, dict)
    assert phases["connect_done_mono_ns"] == exchanges[0]["connected_mono_ns"]
    assert phases["exchange_done_mono_ns"] == exchanges[-1]["response_end_mono_ns"]
    # The record's `sent`: every connection's of the trial, three 3000-byte bodies for POST.
    sent = record["sent"]
    assert isinstance(sent, dict)
    assert sent["bytes"] > (3 * 3000 if method == "POST" else 0)
    # The server's one record of the trial, whatever the connections it came over.
    assert (served["requests"], served["responses_completed"]) == (3, 3)
    # Over QUIC both records' transport counts cover every connection of the trial.
    opened = 1 if connection == "keep" else 3
    for side in (record, served):
        transport = side.get("transport")
        assert (transport or {}).get("connections") == (opened if protocol == "h3" else None)


@pytest.mark.parametrize("protocol", ["h2", "h3"])
def test_keepalive_pings_the_kept_connection_while_idle(
    protocol: str, credentials: Credentials, tmp_path: Path
) -> None:
    record, _served = run_periodic(
        protocol, tmp_path, credentials, "ka", "count=2", "interval_s=1", "keepalive=ping",
        "keepalive_s=0.1",
    )  # fmt: skip
    metrics = _metrics(record)
    # A PING per full keepalive period of the idle interval, however late each sleep wakes
    # and however long the first exchange took (less than 0.9 s).
    assert 1 <= _int(metrics, "keepalive_pings") <= 9
    assert _int(metrics, "keepalive_bytes") > 0
    assert [e["handshake"] for e in _exchanges(record)] == ["full", "kept"]


@pytest.mark.parametrize("protocol", _PROTOCOLS)
def test_a_server_idle_timeout_turns_keep_into_recorded_reconnects(
    protocol: str, credentials: Credentials, tmp_path: Path
) -> None:
    # QUIC's idle timeout is at least three PTOs: a slow handshake's RTT lengthens it.
    record, served = run_periodic(
        protocol, tmp_path, credentials, "idle", "count=2", "interval_s=1.5",
        serve=("--idle-timeout", "0.1"),
    )  # fmt: skip
    assert [e["handshake"] for e in _exchanges(record)] == ["full", "full"]
    assert _metrics(record)["reconnects"] == 1
    assert served["requests"] == 2


@pytest.mark.parametrize(
    ("protocol", "method", "handshake", "early"),
    [
        ("h2", "GET", "resumed", None),  # Python's ssl sends no early data
        ("h2", "POST", "resumed", None),
        ("h3", "GET", "0rtt", True),  # a GET in 0-RTT is answered there
        ("h3", "POST", "0rtt", False),  # a POST in 0-RTT is answered 425, sent again after
    ],
)
def test_resume_takes_the_last_ticket_verified_by_the_server(
    protocol: str,
    method: str,
    handshake: str,
    early: bool | None,
    credentials: Credentials,
    tmp_path: Path,
) -> None:
    # A QUIC server's ticket can follow the response to a 0-RTT request: the client waits for
    # it within the interval.
    record, served = run_periodic(
        protocol, tmp_path, credentials, "resume", "count=3", "interval_s=0.5",
        "connection=resume", f"method={method}",
    )  # fmt: skip
    exchanges = _exchanges(record)
    assert [e["handshake"] for e in exchanges] == ["full", handshake, handshake]
    assert [e["early_data_accepted"] for e in exchanges] == [None, early, early]
    metrics = _metrics(record)
    assert (metrics["handshakes_full"], metrics["handshakes_resumed"]) == (1, 2)
    assert metrics["handshakes_0rtt"] == (2 if protocol == "h3" else 0)
    # The other side: two handshakes took a ticket; 0-RTT GETs answered, POSTs refused.
    assert served["handshakes_resumed"] == 2
    assert served["early_data_accepted"] == (2 if early else 0)
    assert served["early_data_refused"] == (2 if early is False else 0)
    assert served["requests"] == (5 if early is False else 3)  # two 425s, sent again


def test_an_expired_ticket_falls_back_to_a_full_handshake_counted(
    credentials: Credentials, tmp_path: Path
) -> None:
    record, served = run_periodic(
        "h3", tmp_path, credentials, "stale", "count=2", "interval_s=0.3", "connection=resume",
        serve=("--ticket-lifetime", "0.05"),
    )  # fmt: skip
    second = _exchanges(record)[1]
    # The client sent its request as 0-RTT; the server refused the ticket, so the early data
    # too, and qh3 sent the request again after the full handshake.
    assert (second["handshake"], second["early_data_sent"]) == ("full", True)
    assert second["early_data_accepted"] is False
    metrics = _metrics(record)
    assert (metrics["handshakes_full"], metrics["handshakes_resumed"]) == (2, 0)
    assert metrics["early_data_refused"] == 1
    assert served["handshakes_resumed"] == 0
    transport = served["transport"]
    assert isinstance(transport, dict)
    assert transport["resumption"]["expired"] == 1


def test_a_trial_its_client_gave_up_is_recorded_when_the_server_stops(
    credentials: Credentials, tmp_path: Path
) -> None:
    with periodic_server("h2c", tmp_path, credentials) as server:
        url = f"http://127.0.0.1:{server.port}/"
        result = run_agent(
            "trial", url, "--workload", "periodic", "--trial-id", "gave-up", "--json",
            "--timeout", "5", "--param", "count=2", "--param", "interval_s=60",
            "--param", "connection=new",
        )  # fmt: skip
        record = json.loads(result.stdout)
        assert record["error"].startswith("timeout: the periodic trial took longer than 5 s")
        # Its first request said the trial goes on: the server keeps it open...
        assert server.trials() == []
    # ...until it stops, when it writes what it has.
    (served,) = server.trials()
    assert (served["trial_id"], served["requests"]) == ("gave-up", 1)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ("trial", "http://127.0.0.1:1/", "--param", "connection=resume"),
            '--param connection = "resume" does not run over h2c: no TLS, no session to resume '
            "(--protocol h2c)",
        ),
        (
            ("serve", "--port", "0", "--ticket-lifetime", "5"),
            "--ticket-lifetime 5: an HTTP/3 server's of the agent's own engine, more than 0 s",
        ),
    ],
)
def test_what_cannot_run_is_refused_in_one_line(argv: tuple[str, ...], said: str) -> None:
    result = run_agent(argv[0], "--workload", "periodic", *argv[1:])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"h2iot-agent: error: {said}"]
