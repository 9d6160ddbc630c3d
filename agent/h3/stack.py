"""The agent's glue to qh3: configurations from our settings, an HTTP/3 layer that announces
the study's SETTINGS, and a tap on qh3's native QUIC core that counts what a trial records.

qh3's Python layer drops the native core's flow-control events (a MAX_STREAM_DATA or MAX_DATA
received that raised a limit) and keeps no datagram counts; `CoreTap` sits between the two and
sees both, without changing what passes. qh3 is pinned in the `h3` extra: the tap and
agent.h3.amplification read private attributes of this exact version.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qh3._hazmat import QuicConnectionCore
from qh3.h3.connection import H3_ALPN, H3Connection, Setting
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection

from agent.errors import UsageError
from agent.h3.credit import CreditLedger
from agent.h3.settings import QuicWindows

# qh3's H3 layer always announces SETTINGS_H3_DATAGRAM; a qh3 client then insists on the
# max_datagram_frame_size transport parameter, which a qh3 server omits unless configured.
_DATAGRAM_FRAME_BYTES = 65536
CAPACITY_EXHAUSTED = "capacity exhausted"


def configuration(
    windows: QuicWindows,
    *,
    is_client: bool,
    idle_timeout_s: float,
    cert: Path | None = None,
    key: Path | None = None,
    ca_file: str | None = None,
    insecure: bool = False,
    server_name: str | None = None,
) -> QuicConfiguration:
    """One endpoint's QUIC configuration: fixed windows (qh3 never grows them), a fixed
    datagram size (no path-MTU probing: the size is a swept setting), ALPN h3."""
    config = QuicConfiguration(
        is_client=is_client,
        alpn_protocols=list(H3_ALPN),
        max_stream_data=windows.stream_window_bytes,
        max_data=windows.connection_window_bytes,
        max_datagram_size=windows.datagram_bytes,
        probe_datagram_size=False,
        idle_timeout=idle_timeout_s,
        server_name=server_name,
    )
    if is_client:
        if insecure:
            config.verify_mode = ssl.CERT_NONE
        elif ca_file is not None:
            config.load_verify_locations(cafile=ca_file)
        return config
    config.max_datagram_frame_size = _DATAGRAM_FRAME_BYTES
    if cert is None or key is None:
        raise UsageError("HTTP/3 needs --cert and --key (QUIC is always encrypted)")
    try:
        config.load_cert_chain(cert, key)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load TLS certificate {cert} / key {key}: {exc}") from None
    return config


class AnnouncingH3(H3Connection):
    """qh3's HTTP/3 layer, announcing the QPACK table capacity and field-section size the
    trial asked for instead of qh3's own (what a peer's encoder and requests must respect),
    and with `connect_protocol` SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220: WebSocket over an
    extended CONNECT, which qh3's layer carries but does not announce)."""

    def __init__(
        self, quic: QuicConnection, windows: QuicWindows, connect_protocol: bool = False
    ) -> None:
        # Read by _get_local_settings, which __init__ may call.
        self._windows = windows
        self._connect_protocol = connect_protocol
        super().__init__(quic)

    def _get_local_settings(self) -> dict[int, int]:
        settings = super()._get_local_settings()
        if self._windows.qpack_max_table_capacity is not None:
            settings[Setting.QPACK_MAX_TABLE_CAPACITY] = self._windows.qpack_max_table_capacity
        if self._windows.max_field_section_size is not None:
            settings[Setting.MAX_FIELD_SECTION_SIZE] = self._windows.max_field_section_size
        if self._connect_protocol:
            settings[Setting.ENABLE_CONNECT_PROTOCOL] = 1
        return settings


@dataclass
class TransportCounts:
    """One connection's datagrams and UDP payload bytes each way, since the last reset, and
    how often the core could not fit a packet in the anti-amplification allowance."""

    datagrams_sent: int = 0
    datagrams_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    capacity_blocked: int = 0

    def reset(self) -> None:
        self.datagrams_sent = self.datagrams_received = 0
        self.bytes_sent = self.bytes_received = self.capacity_blocked = 0


class CoreTap:
    """Stands in for a connection's native core: every call passes through; the credit events
    go to `credit` as well, each datagram polled is counted, and with `capacity_as_blocked` the
    core's "packet builder capacity exhausted" (agent.h3.amplification) ends the poll instead
    of the connection."""

    def __init__(
        self,
        core: QuicConnectionCore,
        credit: CreditLedger,
        counts: TransportCounts,
        capacity_as_blocked: bool,
    ) -> None:
        self._core = core
        self._credit = credit
        self._counts = counts
        self._capacity_as_blocked = capacity_as_blocked
        self._written: dict[int, int] = {}  # bytes handed to the core per stream
        self._written_total = 0

    def sent_on_stream(self, stream_id: int) -> int:
        """The stream's bytes the core has put in packets (handed to it, less those it still
        buffers)."""
        return self._written.get(stream_id, 0) - self._core.get_send_buffer_size(stream_id)

    def forget_stream(self, stream_id: int) -> None:
        """The stream is done: its count goes (a connection's streams are not bounded)."""
        self._written.pop(stream_id, None)
        self._credit.forget_stream(stream_id)

    def next_event(self) -> tuple[Any, ...] | None:
        event = self._core.next_event()
        if event is not None:
            # A grant for a stream whose response is all sent and forgotten is late news.
            if event[0] == "stream_credit" and event[1] in self._written:
                self._credit.stream_grant(event[1], event[2], self.sent_on_stream(event[1]))
            elif event[0] == "connection_credit":
                unsent = self._core.get_send_buffer_size(None)
                self._credit.connection_grant(event[1], self._written_total - unsent)
        return event

    def poll_transmit(self, now: float) -> tuple[Any, ...] | None:
        try:
            transmit = self._core.poll_transmit(now)
        except RuntimeError as exc:
            if not (self._capacity_as_blocked and CAPACITY_EXHAUSTED in str(exc)):
                raise
            self._counts.capacity_blocked += 1
            return None
        if transmit is not None:
            self._counts.datagrams_sent += 1
            self._counts.bytes_sent += len(transmit[0])
        return transmit

    def send_stream(self, stream_id: int, data: Any, fin: bool = False) -> None:
        self._core.send_stream(stream_id, data, fin)
        self._written[stream_id] = self._written.get(stream_id, 0) + len(data)
        self._written_total += len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)


class TappedQuicConnection(QuicConnection):
    """A QuicConnection whose core is tapped as soon as qh3 creates it. Its `tap_*` attributes
    are set by `tap()` before the first datagram."""

    tap_credit: CreditLedger
    tap_counts: TransportCounts
    tap_capacity_as_blocked: bool

    def _create_core(self, *args: Any, **kwargs: Any) -> None:
        super()._create_core(*args, **kwargs)
        assert self._core is not None
        # The tap passes every call through (__getattr__): it is the core to qh3.
        self._core = CoreTap(  # type: ignore[assignment]
            self._core,
            self.tap_credit,
            self.tap_counts,
            self.tap_capacity_as_blocked,
        )

    @property
    def core(self) -> Any:
        """The tapped core (None before the first datagram or after the end)."""
        return self._core


def tap(
    connection: QuicConnection,
    credit: CreditLedger,
    counts: TransportCounts,
    capacity_as_blocked: bool,
) -> TappedQuicConnection:
    """`connection` tapped. qh3's server makes its connections itself (qh3.asyncio.server), of
    its own class, before their core exists: the class is swapped here, the one place, rather
    than copying qh3's server to construct ours."""
    connection.__class__ = TappedQuicConnection
    assert isinstance(connection, TappedQuicConnection)
    connection.tap_credit = credit
    connection.tap_counts = counts
    connection.tap_capacity_as_blocked = capacity_as_blocked
    return connection
