"""Where a trial connects (`Target`, from its URL) and how: cleartext h2c with prior knowledge,
or TLS with ALPN h2."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.client.connection import ClientConnection
from agent.client.options import TrialOptions
from agent.errors import FetchError, UsageError
from agent.h2.trace import FrameTrace
from agent.protocols import protocol_of_scheme, protocol_spec


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str
    port: int
    path: str

    @property
    def authority(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"URL {url!r} must be http://HOST:PORT/PATH or https://...")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(url, parts.scheme, parts.hostname, port, parts.path or "/")


# HTTP/2 over TLS: what the https URL's protocol negotiates (this module connects over TCP).
_ALPN = protocol_spec(protocol_of_scheme("https")).alpn or ""


class ResumingContext(ssl.SSLContext):
    """A client TLS context whose connections offer `offer`, a TLS 1.3 session an earlier
    connection of this same context received (OpenSSL resumes a session only with the context
    that made it). asyncio's create_connection takes no session; its SSL protocol makes each
    connection's TLS object with `wrap_bio`, which passes it here."""

    offer: ssl.SSLSession | None = None

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return super().wrap_bio(
            incoming, outgoing, server_side, server_hostname, session or self.offer
        )


def client_tls_context(options: TrialOptions) -> ResumingContext:
    """As ssl.create_default_context makes a client's: the options' CA file, else the system's
    authorities, checked unless `insecure`."""
    context = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    if options.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif options.ca_file is not None:
        context.load_verify_locations(cafile=options.ca_file)
    else:
        context.load_default_certs()
    context.set_alpn_protocols([_ALPN])
    return context


async def open_connection(
    target: Target,
    options: TrialOptions,
    context: ResumingContext | None = None,
    offer: ssl.SSLSession | None = None,
) -> ClientConnection:
    """A connection to `target`; over https with `context` (else one of its own) offering the
    session `offer` to resume (None: a full handshake)."""
    loop = asyncio.get_running_loop()
    if target.scheme == "https" and context is None:
        context = client_tls_context(options)
    trace = None if options.events_dir is None else FrameTrace(client_side=True)
    if context is not None:
        context.offer = offer
    try:
        transport, connection = await loop.create_connection(
            lambda: ClientConnection(options.settings, options.flow, trace=trace),
            target.host,
            target.port,
            ssl=context,
        )
    except OSError as exc:
        raise FetchError(f"cannot connect to {target.authority}: {exc.strerror or exc}") from None
    finally:
        if context is not None:
            context.offer = None
    if (
        context is not None
        and transport.get_extra_info("ssl_object").selected_alpn_protocol() != _ALPN
    ):
        transport.close()
        raise FetchError(f"{target.authority} did not negotiate {_ALPN} with ALPN")
    return connection
