"""A run's TLS credentials: a certificate authority of its own and the server's certificate.

Made on the controller once per run (under `<run>/tls/`, reused on resume), so an `h2` trial
checks the server it reaches exactly as a deployed client checks a real one, and no key is
shared between runs or with anything else. The server's certificate names the addresses the
client connects to (IP addresses as iPAddress entries, names as dNSName). Keys are ECDSA P-256:
what a current public server presents, and the cheapest signature a Pi's handshake can verify
(a 2048-bit RSA key costs the server several times more CPU per handshake).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.errors import ControllerError

TLS_DIR = "tls"
VALID_DAYS = 365
KEY_KIND = "ECDSA P-256"


class CredentialsError(ControllerError):
    """The run's TLS files exist but cannot be used (unreadable, or for other names)."""


@dataclass(frozen=True)
class RunCredentials:
    """Paths of the run's PEM files on the controller."""

    ca_cert: Path  # what the client trusts
    server_cert: Path  # the server's certificate, its chain's one link
    server_key: Path  # its private key (mode 0600)
    names: tuple[str, ...]  # the addresses and names the certificate is valid for


# What the run's authority may do: sign certificates (and revocation lists), nothing else.
_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=False,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _subject_alternative_names(names: Sequence[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _certified_names(cert: Path) -> tuple[str, ...]:
    try:
        loaded = x509.load_pem_x509_certificate(cert.read_bytes())
        alternatives = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (OSError, ValueError, x509.ExtensionNotFound) as exc:
        raise CredentialsError(f"{cert}: not a certificate this run made: {exc}") from None
    ips = [str(ip) for ip in alternatives.value.get_values_for_type(x509.IPAddress)]
    return (*ips, *alternatives.value.get_values_for_type(x509.DNSName))


def run_credentials(run_dir: Path, names: Sequence[str], run_id: str) -> RunCredentials:
    """The run's credentials for a server reached as `names`: made now, or the ones a resumed
    run made before (refused in one line if they name other addresses)."""
    directory = run_dir / TLS_DIR
    credentials = RunCredentials(
        directory / "ca.pem", directory / "server.pem", directory / "server.key", tuple(names)
    )
    if credentials.server_cert.exists():
        certified = _certified_names(credentials.server_cert)
        missing = [name for name in names if name not in certified]
        if missing:
            raise CredentialsError(
                f"{credentials.server_cert}: made for {', '.join(certified)}, not "
                f"{', '.join(missing)} (the server's address changed since the run began)"
            )
        return credentials
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid_from, valid_to = now - datetime.timedelta(hours=1), now + datetime.timedelta(VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"h2iot run {run_id} CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid_from)
        .not_valid_after(valid_to)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid_from)
        .not_valid_after(valid_to)
        .add_extension(_subject_alternative_names(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    # The key first and the certificate last: a certificate on disk always has its key.
    _write(credentials.server_key, _pem_key(server_key), 0o600)
    _write(credentials.ca_cert, ca.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(credentials.server_cert, server.public_bytes(serialization.Encoding.PEM), 0o644)
    return credentials
