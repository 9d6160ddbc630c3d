"""SIGTERM drains gracefully; TLS with ALPN h2 works with real clients."""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import DataFrame, GoAwayFrame, SettingsFrame, WindowUpdateFrame

from agent.site import load_manifest
from tests.agent.rawpeer import RawPeer
from tests.agent.servers import agent_server, run_agent
from tests.conftest import require_tool

IMAGE = "img/photo-1.jpg"


def test_sigterm_sends_goaway_finishes_streams_in_flight_then_exits(
    site: Path, tmp_path: Path
) -> None:
    expected = load_manifest(site).by_path()[IMAGE]
    with agent_server(site, tmp_path) as server:
        peer = RawPeer(server.port)
        peer.handshake({SettingsFrame.INITIAL_WINDOW_SIZE: 1000})
        peer.get(1, "/" + IMAGE)
        body = bytearray()
        # Take the first window, then stall the stream so it is in flight at SIGTERM.
        while len(body) < 1000:
            frame = peer.read_frame()
            if isinstance(frame, DataFrame):
                body += frame.data
        server.process.send_signal(signal.SIGTERM)
        goaway = peer.read_until_goaway()
        assert goaway is not None
        assert goaway.error_code == ErrorCodes.NO_ERROR
        assert goaway.last_stream_id == 1
        # No new connections once draining.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
        peer.send(WindowUpdateFrame(1, window_increment=2**30))
        peer.send(WindowUpdateFrame(0, window_increment=2**30))
        ended = False
        while (frame := peer.read_frame()) is not None:
            if isinstance(frame, DataFrame):
                body += frame.data
                ended = ended or "END_STREAM" in frame.flags
            elif isinstance(frame, GoAwayFrame):
                assert frame.error_code == ErrorCodes.NO_ERROR
        peer.close()
        assert ended
        assert hashlib.sha256(body).hexdigest() == expected.sha256
        assert server.process.wait(timeout=30) == 0


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    require_tool("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_with_alpn_h2(site: Path, tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    require_tool("nghttp", "curl")
    cert, key = certificate
    with agent_server(site, tmp_path, "--tls", "--cert", str(cert), "--key", str(key)) as server:
        url = f"https://127.0.0.1:{server.port}/"
        ours = run_agent("fetch", url, "--ca-file", str(cert), "--json", "--trial-id", "tls")
        assert ours.returncode == 0, ours.stderr
        record = json.loads(ours.stdout)
        assert record["ok"] is True
        assert record["tls"] is True
        assert len(record["resources"]) == 8
        theirs = subprocess.run(
            ["nghttp", "-nas", url], capture_output=True, text=True, timeout=60, check=False
        )
        assert theirs.returncode == 0, theirs.stderr
        assert "/img/photo-4.jpg" in theirs.stdout
        curl = subprocess.run(
            [
                "curl",
                "-sS",
                "--http2",
                "--cacert",
                str(cert),
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{size_download}",
                url + IMAGE,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert curl.stdout == f"2 {load_manifest(site).by_path()[IMAGE].size_bytes}"
        assert list(server.wait_for_trials("tls")) == ["tls"]


def test_tls_client_refuses_an_untrusted_certificate(
    site: Path, tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    with agent_server(site, tmp_path, "--tls", "--cert", str(cert), "--key", str(key)) as server:
        result = run_agent(
            "fetch",
            f"https://127.0.0.1:{server.port}/",
            "--json",
            "--manifest",
            str(site / "manifest.json"),
        )
        assert result.returncode == 1
        assert "CERTIFICATE_VERIFY_FAILED" in json.loads(result.stdout)["error"]
