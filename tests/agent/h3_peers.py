"""HTTP/3 peers for the tests: a per-session CA and server certificate (QUIC is always
encrypted), our `serve --protocol h3` and ngtcp2's `gtlsserver`, each on a free UDP port."""

from __future__ import annotations

import datetime
import ipaddress
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.agent.servers import START_TIMEOUT_S, RunningServer, agent_server


@dataclass(frozen=True)
class Credentials:
    ca: Path
    cert: Path
    key: Path


def make_credentials(directory: Path) -> Credentials:
    """A CA and a server certificate for 127.0.0.1 and localhost, signed by it (ECDSA P-256)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "h2iot test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    credentials = Credentials(
        directory / "ca.pem", directory / "server.pem", directory / "server.key"
    )
    credentials.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    credentials.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    credentials.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return credentials


@contextmanager
def h3_server(
    site: Path, tmp: Path, credentials: Credentials, *extra: str, verbose: bool = False
) -> Iterator[RunningServer]:
    with agent_server(
        site,
        tmp,
        "--protocol",
        "h3",
        "--cert",
        str(credentials.cert),
        "--key",
        str(credentials.key),
        *extra,
        verbose=verbose,
    ) as server:
        yield server


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fixed_window_options(window: int, connection_window: int) -> list[str]:
    """ngtcp2's examples' options for exact windows (without the two zeros they auto-tune)."""
    return [
        f"--max-stream-data-bidi-local={window}",
        f"--max-stream-data-bidi-remote={window}",
        f"--max-data={connection_window}",
        "--max-window=0",
        "--max-stream-window=0",
    ]


def _wait_udp_bound(port: int, process: subprocess.Popen[bytes]) -> None:
    """Until something has bound UDP `port` on this host (/proc/net/udp), a hang guard."""
    deadline = time.monotonic() + START_TIMEOUT_S
    wanted = f":{port:04X} "
    while not any(wanted in line.split("->")[0] for line in _udp_table()):
        assert process.poll() is None, f"gtlsserver exited {process.returncode}"
        assert time.monotonic() < deadline, f"nothing bound UDP port {port}"
        time.sleep(0.02)


def _udp_table() -> list[str]:
    return [f"{line.split()[1]} " for line in Path("/proc/net/udp").read_text().splitlines()[1:]]


@contextmanager
def gtlsserver(site: Path, tmp: Path, credentials: Credentials, window: int) -> Iterator[int]:
    """ngtcp2's example server serving `site` at a fixed window; yields its UDP port."""
    port = free_udp_port()
    stderr = (tmp / f"gtlsserver-{port}.err").open("w")
    process = subprocess.Popen(
        [
            "gtlsserver",
            "-q",
            "-d",
            str(site),
            *fixed_window_options(window, 16 * window),
            "127.0.0.1",
            str(port),
            str(credentials.key),
            str(credentials.cert),
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    try:
        _wait_udp_bound(port, process)
        yield port
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stderr.close()
