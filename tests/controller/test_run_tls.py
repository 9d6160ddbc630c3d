"""A run's TLS credentials (controller.run.tls): made once per run, reused on resume, refused
when they name another address, and accepted by real peers: curl (OpenSSL) checks our server's
chain, nghttpd serves with them to our client, which checks it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent.site import build_site, load_manifest
from controller.run.tls import CredentialsError, RunCredentials, run_credentials
from tests.agent.servers import agent_server, free_port, run_agent, wait_for_port
from tests.conftest import require_tool

SITE_BYTES = 200_000
IMAGE = "/img/photo-1.jpg"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    build_site(root, seed=3, total_bytes=SITE_BYTES)
    return root


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> RunCredentials:
    return run_credentials(tmp_path_factory.mktemp("run"), ("127.0.0.1", "localhost"), "r1")


def test_the_key_is_private_and_made_once_per_run(made: RunCredentials) -> None:
    assert made.server_key.stat().st_mode & 0o777 == 0o600
    files = (made.ca_cert, made.server_cert, made.server_key)
    before = [path.read_bytes() for path in files]
    again = run_credentials(made.ca_cert.parents[1], ("127.0.0.1",), "r1")
    assert again.server_cert == made.server_cert
    assert [path.read_bytes() for path in files] == before  # a resumed run keeps its own


def test_credentials_for_another_address_are_refused_in_one_line(made: RunCredentials) -> None:
    with pytest.raises(CredentialsError) as caught:
        run_credentials(made.ca_cert.parents[1], ("10.0.0.2",), "r1")
    message = str(caught.value)
    assert "\n" not in message
    assert str(made.server_cert) in message and "10.0.0.2" in message


def test_curl_checks_our_servers_chain(site: Path, tmp_path: Path, made: RunCredentials) -> None:
    require_tool("curl")
    tls = ("--tls", "--cert", str(made.server_cert), "--key", str(made.server_key))
    with agent_server(site, tmp_path, *tls) as server:
        url = f"https://127.0.0.1:{server.port}{IMAGE}"

        def curl(*trust: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["curl", "-sS", "--http2", *trust, "-o", "/dev/null", "-w", "%{http_version}",
                 url],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip

        trusted = curl("--cacert", str(made.ca_cert))
        assert (trusted.returncode, trusted.stdout) == (0, "2"), trusted.stderr
        # Without the run's authority the same chain is refused: it is checked, not skipped.
        assert curl().returncode == 60


def test_our_client_checks_nghttpd_serving_the_runs_certificate(
    site: Path, tmp_path: Path, made: RunCredentials
) -> None:
    require_tool("nghttpd")
    port = free_port()
    argv = ["nghttpd", "-d", str(site), str(port), str(made.server_key), str(made.server_cert)]
    with (tmp_path / "nghttpd.err").open("w") as err:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        wait_for_port(port, process)
        url = f"https://127.0.0.1:{port}/"
        manifest = str(site / "manifest.json")
        fetched = run_agent(
            "fetch", url, "--ca-file", str(made.ca_cert), "--json", "--manifest", manifest
        )
        assert fetched.returncode == 0, fetched.stderr
        record = json.loads(fetched.stdout)
        assert record["ok"] and record["tls"]
        assert record["body_bytes"] == sum(f.size_bytes for f in load_manifest(site).files)
        # The handshake is in the record: its time and the client's CPU over it.
        assert record["connect_cpu_s"] > 0 and 0 < record["connect_s"] < record["response_s"]
        untrusted = run_agent("fetch", url, "--json", "--manifest", manifest)
        assert untrusted.returncode == 1
        assert "CERTIFICATE_VERIFY_FAILED" in json.loads(untrusted.stdout)["error"]
    finally:
        process.terminate()
        process.wait(timeout=10)
