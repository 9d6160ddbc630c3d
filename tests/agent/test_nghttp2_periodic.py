"""The nghttp2 engine's client of the periodic workload: a tool process per exchange.

The gtlsclient log parser on real output (tests/agent/nghttp2_output/gtlsclient_*.log, made by
gtlsclient 0.12.1 against gtlsserver: a full handshake, then a resumed one with a 0-RTT GET)
and on any bytes; then the real tools: gtlsclient `new` and `resume` against gtlsserver and our
HTTP/3 server (which counts its trials by the client's trial-control messages, gtlsclient
sending no trial header), nghttp `new` against our HTTP/2 server and nghttpd, and the engine's
refusals in one line at the agent's `trial` and at config load."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agent.client.record import PHASE_MARKS
from agent.engines.nghttp2.gtls_log import parse_gtls_log
from agent.engines.nghttp2.periodic_client import phases_of
from agent.workloads.periodic.record import Exchange
from tests.agent.h3_peers import Credentials, gtlsserver
from tests.agent.servers import nghttpd, run_agent
from tests.agent.test_periodic import periodic_server
from tests.conftest import require_tool

OUTPUT = Path(__file__).parent / "nghttp2_output"
_COUNT = 3


def test_parser_reads_a_full_handshake() -> None:
    seen = parse_gtls_log((OUTPUT / "gtlsclient_full.log").read_text())
    assert (seen.resumed, seen.early_data_sent, seen.early_data_rejected) == (False, False, False)
    assert (seen.status, seen.handshake_done_ms) == (200, 3)
    assert (seen.bytes_sent, seen.bytes_received) == (4964, 4342)
    # The request leaves after the handshake; its response ends on the frame with fin=1.
    assert (seen.request_sent_ms, seen.response_done_ms, seen.response_s) == (23, 27, 0.004)


def test_parser_reads_a_resumed_0rtt_handshake() -> None:
    seen = parse_gtls_log((OUTPUT / "gtlsclient_0rtt.log").read_text())
    assert (seen.resumed, seen.early_data_sent, seen.early_data_rejected) == (True, True, False)
    assert (seen.status, seen.handshake_done_ms) == (200, 1)
    # The request went in 0-RTT, before the handshake completed.
    assert (seen.request_sent_ms, seen.response_done_ms) == (0, 4)


def test_parser_has_no_response_time_without_the_response_end() -> None:
    lines = (OUTPUT / "gtlsclient_0rtt.log").read_text().splitlines()
    cut = [line for line in lines if " fin=1 " not in line or " frm rx " not in line]
    seen = parse_gtls_log("\n".join(cut))
    assert (seen.request_sent_ms, seen.response_done_ms, seen.response_s) == (0, None, None)


def test_parser_reads_a_refusal_of_early_data() -> None:
    text = (OUTPUT / "gtlsclient_0rtt.log").read_text()
    seen = parse_gtls_log(text + "Early data was rejected by server\n")
    assert (seen.early_data_sent, seen.early_data_rejected) == (True, True)


@given(st.text())
def test_parser_takes_any_text(text: str) -> None:
    parse_gtls_log(text)


@given(st.binary(max_size=200))
def test_parser_takes_any_server_hello(hello: bytes) -> None:
    rows = "\n".join(
        f"{at:08x}  " + " ".join(f"{b:02x}" for b in hello[at : at + 16]) + "  |x|"
        for at in range(0, len(hello), 16)
    )
    parse_gtls_log(f"Ordered CRYPTO data in Initial crypto level\n{rows}\n")


def _ran(index: int, start_ns: int, end_ns: int | None, connect_s: float | None) -> Exchange:
    return Exchange(
        index=index, scheduled_mono_ns=start_ns, start_mono_ns=start_ns, connected_mono_ns=None,
        request_mono_ns=None, response_end_mono_ns=end_ns, lateness_s=0.0, handshake="full",
        early_data_sent=False, early_data_accepted=None, connect_s=connect_s,
        connect_cpu_s=None, response_s=None, wire_bytes_sent=None, wire_bytes_received=None,
        ok=end_ns is not None, error=None if end_ns is not None else "x",
    )  # fmt: skip


@given(
    spans=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**9)), min_size=1),
    connect_s=st.none() | st.floats(0, 5),
)
def test_phases_come_from_the_processes_in_order(
    spans: list[tuple[int, int]], connect_s: float | None
) -> None:
    # Exchanges one after another: each process starts after the one before exited.
    exchanges, at = [], 10
    for index, (lead, run) in enumerate(spans):
        exchanges.append(_ran(index, at + lead, at + lead + run, connect_s))
        at += lead + run
    phases = phases_of(5, at + 7, at + 3, exchanges)
    assert phases is not None and tuple(phases) == tuple(m for m in PHASE_MARKS if "first" not in m)
    assert list(phases.values()) == sorted(phases.values())
    assert phases["exchange_done_mono_ns"] == at
    if connect_s is None:
        assert phases["connect_done_mono_ns"] == exchanges[0].start_mono_ns


def test_a_trial_with_a_failed_exchange_has_no_phases() -> None:
    exchanges = [_ran(0, 10, 20, 0.001), _ran(1, 30, None, None)]
    assert phases_of(5, 40, 35, exchanges) is None
    assert phases_of(5, 40, 35, []) is None


def _trial(
    url: str, protocol: str, *params: str, trial_id: str = "p", control: int | None = None
) -> dict[str, object]:
    argv = ["--engine", "nghttp2", "--protocol", protocol, "--workload", "periodic"]
    argv += ["--trial-id", trial_id, "--json", "--param", f"count={_COUNT}"]
    argv += ["--param", "interval_s=0.2", "--insecure"]
    if control is not None:
        argv += ["--trial-control", f"127.0.0.1:{control}"]
    result = run_agent("trial", url, *argv, *(a for p in params for a in ("--param", p)))
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 1, result.stdout + result.stderr
    record: dict[str, object] = lines[0]
    return record


def _handshakes(record: dict[str, object]) -> list[object]:
    assert record["ok"], record["error"]
    exchanges = record["exchanges"]
    assert isinstance(exchanges, list) and len(exchanges) == _COUNT
    assert all(e["lateness_s"] >= 0 and e["connect_s"] is not None for e in exchanges)
    assert all(e["response_s"] is not None and e["response_s"] >= 0 for e in exchanges)
    # Phases from the processes' starts and exits, in order, so the controller places the
    # exchanges and their idle tails on the meter's samples.
    phases = record["phases"]
    assert isinstance(phases, dict)
    assert list(phases.values()) == sorted(phases.values())
    assert phases["exchange_done_mono_ns"] == exchanges[-1]["response_end_mono_ns"]
    return [(e["handshake"], e["early_data_accepted"]) for e in exchanges]


_NEW = [("full", None)] * _COUNT
_RESUMED = [("full", None)] + [("0rtt", True)] * (_COUNT - 1)


@contextmanager
def _gtlsserver(tmp_path: Path, credentials: Credentials) -> Iterator[str]:
    site = tmp_path / "site"
    (site / "periodic").mkdir(parents=True)
    (site / "periodic" / "1024").write_bytes(bytes(1024))
    with gtlsserver(site, tmp_path, credentials, 65535) as port:
        yield f"https://127.0.0.1:{port}/"


def test_gtlsclient_new_and_resume_against_gtlsserver(
    credentials: Credentials, tmp_path: Path
) -> None:
    require_tool("gtlsclient", "gtlsserver")
    with _gtlsserver(tmp_path, credentials) as url:
        assert _handshakes(_trial(url, "h3", "connection=new")) == _NEW
        record = _trial(url, "h3", "connection=resume")
    assert _handshakes(record) == _RESUMED
    metrics = record["metrics"]
    assert isinstance(metrics, dict)
    assert (metrics["handshakes_0rtt"], metrics["early_data_accepted"]) == (2, 2)
    cpu = record["exchange_cpu_s"]
    assert isinstance(cpu, list) and len(cpu) == _COUNT and all(c > 0 for c in cpu)


def test_gtlsclient_new_and_resume_against_our_h3_server(
    credentials: Credentials, tmp_path: Path
) -> None:
    require_tool("gtlsclient")
    with periodic_server("h3", tmp_path, credentials, "--control-port", "0") as server:
        url = f"https://127.0.0.1:{server.port}/"
        control = int(server.listening["control_port"])
        new = _trial(url, "h3", "connection=new", trial_id="new", control=control)
        assert _handshakes(new) == _NEW
        resumed = _trial(url, "h3", "connection=resume", trial_id="resume", control=control)
        assert _handshakes(resumed) == _RESUMED
        # A POST in 0-RTT is refused (425) and gtlsclient does not send it again: measured.
        posted = _trial(
            url, "h3", "connection=resume", "method=POST", trial_id="post", control=control
        )
        served = server.wait_for_trials("new", "resume", "post")
    # The server's side, one record per bracketed trial across its connections.
    assert sorted(served) == ["new", "post", "resume"]
    assert [
        (t["requests"], t["handshakes_resumed"], t["early_data_accepted"], t["early_data_refused"])
        for t in (served["new"], served["resume"], served["post"])
    ] == [
        (_COUNT, 0, 0, 0),
        (_COUNT, _COUNT - 1, _COUNT - 1, 0),
        (_COUNT, _COUNT - 1, 0, _COUNT - 1),
    ]
    assert served["resume"]["ok"] and served["resume"]["responses_completed"] == _COUNT
    assert not posted["ok"]
    exchanges = posted["exchanges"]
    assert isinstance(exchanges, list)
    assert [(e["handshake"], e["early_data_accepted"]) for e in exchanges] == [("full", None)] + [
        ("0rtt", False)
    ] * (_COUNT - 1)
    assert all("answered 425" in e["error"] for e in exchanges[1:])


def test_nghttp_new_against_our_h2_servers(credentials: Credentials, tmp_path: Path) -> None:
    require_tool("nghttp")
    for protocol, scheme in (("h2c", "http"), ("h2", "https")):
        with periodic_server(protocol, tmp_path, credentials) as server:
            url = f"{scheme}://127.0.0.1:{server.port}/"
            record = _trial(url, protocol, "connection=new", trial_id=protocol)
            assert _handshakes(record) == _NEW
            served = server.wait_for_trials(protocol)[protocol]
        assert served["requests"] == _COUNT


def test_nghttp_new_against_nghttpd(tmp_path: Path) -> None:
    require_tool("nghttp", "nghttpd")
    site = tmp_path / "site"
    (site / "periodic").mkdir(parents=True)
    (site / "periodic" / "1024").write_bytes(bytes(1024))
    with nghttpd(site, tmp_path) as server:
        record = _trial(f"http://127.0.0.1:{server.port}/", "h2c", "connection=new")
    assert _handshakes(record) == _NEW


def test_what_the_tools_cannot_do_is_refused_in_one_line() -> None:
    cases = {
        ("h3", "keep"): "gtlsclient fetches its URLs at once and exits",
        ("h2c", "keep"): "nghttp fetches its URLs at once and exits",
        ("h2", "resume"): "keeping no TLS session for the next run",
    }
    for (protocol, connection), why in cases.items():
        scheme = "http" if protocol == "h2c" else "https"
        result = run_agent(
            "trial", f"{scheme}://127.0.0.1:9/", "--engine", "nghttp2", "--protocol", protocol,
            "--workload", "periodic", "--param", f"connection={connection}",
        )  # fmt: skip
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0], result.stderr
        assert f"connection = {json.dumps(connection)}" in lines[0]
