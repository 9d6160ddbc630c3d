"""The periodic workload's resumption against real peers: ngtcp2's gtlsclient resuming and
sending 0-RTT to our HTTP/3 server (a 0-RTT GET answered, a 0-RTT POST answered 425, the
replay of a used ticket refused), our client resuming with 0-RTT against gtlsserver, and
OpenSSL's s_client resuming a TLS 1.3 session against our HTTP/2 server (and refused by
another server process, whose ticket key differs), each verified from the other side."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from h2.config import H2Configuration
from h2.connection import H2Connection

from tests.agent.h3_peers import Credentials, gtlsserver
from tests.agent.servers import RunningServer
from tests.agent.test_periodic import _exchanges, periodic_server, periodic_trial
from tests.conftest import require_tool

_HANG_GUARD_S = 30


def _gtlsclient(
    port: int, session: Path, *args: str, path: str = "/periodic/100"
) -> tuple[int, int]:
    """One gtlsclient run resuming from (and saving to) `session` and its transport
    parameters beside it: the response's status and the 0-RTT packets it sent."""
    result = subprocess.run(
        [
            "gtlsclient",
            "--exit-on-all-streams-close",
            f"--session-file={session}",
            f"--tp-file={session}.tp",
            *args,
            "127.0.0.1",
            str(port),
            f"https://127.0.0.1:{port}{path}",
        ],
        capture_output=True,
        text=True,
        timeout=_HANG_GUARD_S,
        check=False,
    )
    out = result.stdout + result.stderr
    status = re.search(r"\[:status: (\d+)\]", out)
    assert status is not None, out[-2000:]
    return int(status[1]), out.count("type=0RTT")


def _resumption(server: RunningServer, credentials: Credentials) -> dict[str, int]:
    """The server's running resumption counts, read from the record of one trial of ours."""
    record = periodic_trial(server.port, "h3", credentials, "counts", "count=1")
    assert record["ok"], record["error"]
    transport = server.wait_for_trials("counts")["counts"]["transport"]
    assert isinstance(transport, dict)
    counts: dict[str, int] = transport["resumption"]
    return counts


def test_gtlsclient_resumes_and_sends_0rtt_to_our_h3_server(
    credentials: Credentials, tmp_path: Path
) -> None:
    require_tool("gtlsclient")
    body = tmp_path / "report"
    body.write_bytes(bytes(range(256)) * 4)
    session, replayed = tmp_path / "session", tmp_path / "replayed"
    post = ("-m", "POST", f"--data={body}")
    with periodic_server("h3", tmp_path, credentials) as server:
        assert _gtlsclient(server.port, session) == (200, 0)  # full handshake, ticket saved
        shutil.copy(session, replayed)
        shutil.copy(f"{session}.tp", f"{replayed}.tp")
        status, early = _gtlsclient(server.port, session, *post)
        assert (status, early > 0) == (425, True)  # a POST in 0-RTT: refused, not acted on
        status, early = _gtlsclient(server.port, session)
        assert (status, early > 0) == (200, True)  # a GET in 0-RTT: answered
        # The first ticket again: already used, so a full handshake, its 0-RTT refused; the
        # POST then goes after the handshake and is answered.
        status, early = _gtlsclient(server.port, replayed, *post)
        assert (status, early > 0) == (200, True)
        counts = _resumption(server, credentials)
    assert counts["resumed"] == 2
    assert counts["unknown"] == 1
    assert (counts["early_accepted"], counts["early_refused"]) == (1, 1)


def test_our_client_resumes_with_0rtt_against_gtlsserver(
    credentials: Credentials, tmp_path: Path
) -> None:
    require_tool("gtlsserver")
    site = tmp_path / "site"
    (site / "periodic").mkdir(parents=True)
    (site / "periodic" / "1024").write_bytes(b"r" * 1024)
    with gtlsserver(site, tmp_path, credentials, 65535) as port:
        record = periodic_trial(
            port,
            "h3",
            credentials,
            "to-gtls",
            "count=3",
            # gtlsserver's ticket can come a few ACK delays after a 0-RTT response: the client
            # waits for it within the interval.
            "interval_s=0.5",
            "connection=resume",
        )
    assert record["ok"], record["error"]
    exchanges = _exchanges(record)
    assert [e["handshake"] for e in exchanges] == ["full", "0rtt", "0rtt"]
    assert [e["early_data_accepted"] for e in exchanges] == [None, True, True]


def _h2_get(trial_id: str) -> bytes:
    """A client's HTTP/2 preface and one GET tagged with `trial_id`, as bytes to pipe."""
    connection = H2Connection(H2Configuration(client_side=True))
    connection.initiate_connection()
    headers = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "127.0.0.1"),
        (":path", "/periodic/100"),
        ("h2iot-trial-id", trial_id),
    ]
    connection.send_headers(1, headers, end_stream=True)
    return connection.data_to_send()


def _s_client(port: int, trial_id: str, *session: str) -> str:
    """openssl s_client sending one tagged GET over h2; how its session went ("New" or
    "Reused"). It waits for the server to close (its idle timeout), so the ticket the server
    sends after the handshake is in the session it saves."""
    result = subprocess.run(
        [
            "openssl",
            "s_client",
            "-connect",
            f"127.0.0.1:{port}",
            "-alpn",
            "h2",
            "-ign_eof",
            *session,
        ],
        input=_h2_get(trial_id),
        capture_output=True,
        timeout=_HANG_GUARD_S,
        check=False,
    )
    found = re.search(rb"^(New|Reused), TLSv1\.3", result.stdout, re.MULTILINE)
    assert found is not None, result.stdout[-2000:] + result.stderr[-2000:]
    return found[1].decode()


def test_openssl_resumes_a_tls13_session_against_our_h2_server(
    credentials: Credentials, tmp_path: Path
) -> None:
    require_tool("openssl")
    session = str(tmp_path / "session.pem")
    idle = ("--idle-timeout", "0.3")
    with periodic_server("h2", tmp_path, credentials, *idle) as server:
        assert _s_client(server.port, "ossl-new", "-sess_out", session) == "New"
        assert _s_client(server.port, "ossl-reused", "-sess_in", session) == "Reused"
        served = server.wait_for_trials("ossl-new", "ossl-reused")
    assert served["ossl-new"]["handshakes_resumed"] == 0
    assert served["ossl-reused"]["handshakes_resumed"] == 1
    assert served["ossl-reused"]["responses_completed"] == 1
    # Another server process has another ticket key: the ticket is refused, a full handshake.
    with periodic_server("h2", tmp_path, credentials, *idle) as other:
        assert _s_client(other.port, "ossl-refused", "-sess_in", session) == "New"
        refused = other.wait_for_trials("ossl-refused")["ossl-refused"]
    assert refused["handshakes_resumed"] == 0
    assert refused["ok"] is True
