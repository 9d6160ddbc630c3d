"""The agent's glue to qh3: configurations from our settings, an HTTP/3 layer that announces
the study's SETTINGS, and a tap on qh3's native QUIC core that counts what a trial records,
with shorter receive and send paths past qh3's Python layer than its own (the hot path of a
transfer under a small window, where every round trip crosses it).

qh3's Python layer drops the native core's flow-control events (a MAX_STREAM_DATA or MAX_DATA
received that raised a limit) and keeps no datagram counts; `CoreTap` sits between the two and
sees both, without changing what passes. qh3 is pinned in the `h3` extra: the tap and
agent.h3.amplification read private attributes of this exact version.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import qh3
from qh3._hazmat import Buffer, QuicConnectionCore
from qh3.h3.connection import H3_ALPN, FrameType, H3Connection, Setting
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import NetworkAddress, QuicConnection, QuicConnectionError
from qh3.quic.events import StreamDataReceived
from qh3.quic.packet import (
    QuicErrorCode,
    QuicTransportParameters,
    pull_quic_transport_parameters,
    push_quic_transport_parameters,
)
from qh3.quic.tls_bridge import QuicTlsBridge
from qh3.tls import ExtensionType

from agent.errors import UsageError
from agent.h3.ack_policy import AckGate
from agent.h3.credit import CreditLedger
from agent.h3.empty_cid import EmptyPeerCidConnection
from agent.h3.settings import QuicWindows
from agent.protocols.in_force import SettingsExchange

# qh3's H3 layer always announces SETTINGS_H3_DATAGRAM; a qh3 client then insists on the
# max_datagram_frame_size transport parameter, which a qh3 server omits unless configured.
_DATAGRAM_FRAME_BYTES = 65536
CAPACITY_EXHAUSTED = "capacity exhausted"
# The core's timers (get_timer's kinds) that only send what an ACK policy's hold keeps back.
_HELD_TIMERS = ("ack_", "pacing")


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
    go to `credit` as well, each datagram polled is counted, the packets received go to
    `ack_gate` where there is one (agent.h3.ack_policy), and with `capacity_as_blocked` the
    core's "packet builder capacity exhausted" (agent.h3.amplification) ends the poll instead
    of the connection."""

    def __init__(
        self,
        core: QuicConnectionCore,
        credit: CreditLedger,
        counts: TransportCounts,
        capacity_as_blocked: bool,
        ack_gate: AckGate | None = None,
    ) -> None:
        self.native = core
        self._credit = credit
        self._counts = counts
        self._capacity_as_blocked = capacity_as_blocked
        self.ack_gate = ack_gate
        if ack_gate is not None:
            # Only then do receives cost a call more: the core's own are kept otherwise.
            for name, now_at in _RECEIVES.items():
                setattr(self, name, _counting(getattr(core, name), now_at, ack_gate))
        self._written: dict[int, int] = {}  # bytes handed to the core per stream
        self._written_total = 0
        self._held: tuple[Any, ...] | None = None

    def sent_on_stream(self, stream_id: int) -> int:
        """The stream's bytes the core has put in packets (handed to it, less those it still
        buffers)."""
        return self._written.get(stream_id, 0) - self.native.get_send_buffer_size(stream_id)

    def forget_stream(self, stream_id: int) -> None:
        """The stream is done: its count goes (a connection's streams are not bounded)."""
        self._written.pop(stream_id, None)
        self._credit.forget_stream(stream_id)

    def hold(self, event: tuple[Any, ...]) -> None:
        """An event taken from the native core that qh3 is to see after all: next_event
        returns it first."""
        self._held = event

    def next_event(self) -> tuple[Any, ...] | None:
        event = self._held
        if event is None:
            event = self.native.next_event()
        else:
            self._held = None
        if event is not None:
            # A grant for a stream whose response is all sent and forgotten is late news.
            if event[0] == "stream_credit" and event[1] in self._written:
                self._credit.stream_grant(event[1], event[2], self.sent_on_stream(event[1]))
            elif event[0] == "connection_credit":
                unsent = self.native.get_send_buffer_size(None)
                self._credit.connection_grant(event[1], self._written_total - unsent)
        return event

    def poll_transmit(self, now: float) -> tuple[Any, ...] | None:
        try:
            transmit = self.native.poll_transmit(now)
        except RuntimeError as exc:
            self._blocked(exc)
            return None
        if transmit is not None:
            self._counts.datagrams_sent += 1
            self._counts.bytes_sent += len(transmit[0])
        return transmit

    def transmits(self, now: float) -> list[tuple[Any, list[bytes]]]:
        """Every datagram the core has to send now (poll_transmit until nothing is left),
        counted once, in runs to one address: [(address, datagrams)]."""
        poll = self.native.poll_transmit
        batches: list[tuple[Any, list[bytes]]] = []
        sent = sent_bytes = 0
        try:
            transmit = poll(now)
            while transmit is not None:
                data, addr = transmit[0], transmit[1]
                if batches and batches[-1][0] == addr:
                    batches[-1][1].append(data)
                else:
                    batches.append((addr, [data]))
                sent += 1
                sent_bytes += len(data)
                transmit = poll(now)
        except RuntimeError as exc:
            self._blocked(exc)
        self._counts.datagrams_sent += sent
        self._counts.bytes_sent += sent_bytes
        return batches

    def _blocked(self, exc: RuntimeError) -> None:
        """A poll's failure: with `capacity_as_blocked` an exhausted anti-amplification
        allowance is counted and ends the poll; anything else is the connection's end."""
        if not (self._capacity_as_blocked and CAPACITY_EXHAUSTED in str(exc)):
            raise exc
        self._counts.capacity_blocked += 1

    def send_stream(self, stream_id: int, data: Any, fin: bool = False) -> None:
        self.native.send_stream(stream_id, data, fin)
        self._written[stream_id] = self._written.get(stream_id, 0) + len(data)
        self._written_total += len(data)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.native, name)
        if callable(value):
            # A method of the one core: kept on the tap, so later calls skip this fallback
            # (Python reaches __getattr__ only after a failed lookup, a cost per call).
            setattr(self, name, value)
        return value


# The core's receive calls, with where `now` is among their arguments; each returns a report
# whose third number is the packets it processed.
_RECEIVES = {"receive_datagram": 2, "receive_many_datagrams": 2, "receive_gro_buffer": 3}


def _counting(receive: Callable[..., Any], now_at: int, gate: AckGate) -> Callable[..., Any]:
    """`receive`, telling `gate` the packets each call processed and their bytes (the
    report's second number)."""

    def counted(*args: Any) -> Any:
        report = receive(*args)
        gate.received(report[2], report[1], args[now_at])
        return report

    return counted


# Takes a stream's data as it leaves the core (stream ID, data, end of stream), or declines it
# (False) for qh3's layer to have.
StreamDataTaker = Callable[[int, bytes, bool], bool]


class TappedQuicConnection(EmptyPeerCidConnection):
    """A QuicConnection whose core is tapped as soon as qh3 creates it. Its `tap_*` attributes
    are set by `tap()` before the first datagram; `take_stream_data`, where set, sees stream
    data before qh3 makes an event of it. As a server it also answers a client whose
    connection ID is empty, as Chromium's is (agent.h3.empty_cid)."""

    tap_credit: CreditLedger
    tap_counts: TransportCounts
    tap_capacity_as_blocked: bool
    tap_ack_gate: AckGate | None = None
    take_stream_data: StreamDataTaker | None = None

    def _create_core(self, *args: Any, **kwargs: Any) -> None:
        super()._create_core(*args, **kwargs)
        assert self._core is not None
        # The tap passes every call through (__getattr__): it is the core to qh3.
        self._core = CoreTap(  # type: ignore[assignment]
            self._core,
            self.tap_credit,
            self.tap_counts,
            self.tap_capacity_as_blocked,
            self.tap_ack_gate,
        )

    def _create_tls(self, remote_source_cid: bytes | None) -> QuicTlsBridge:
        bridge = super()._create_tls(remote_source_cid)
        if self.tap_ack_gate is not None:
            announce_max_ack_delay(bridge, self.tap_ack_gate.policy.max_ack_delay_ms)
        return bridge

    @property
    def core(self) -> Any:
        """The tapped core (None before the first datagram or after the end)."""
        return self._core

    # qh3's receive and send paths check each datagram's address and walk each datagram's
    # packets for its QUIC logger even when there is none, and make an event object of every
    # chunk of stream data: per datagram, as much Python as the rest of the path. Without a
    # logger, once the handshake is done (as qh3's own batch path requires), the two below do
    # only what reaches the core.

    def receive_many_datagrams(
        self, datagrams: list[bytes], addr: NetworkAddress, now: float
    ) -> None:
        tapped: CoreTap | None = self._core  # type: ignore[assignment]
        if tapped is None or not self._handshake_complete or self._quic_logger is not None:
            super().receive_many_datagrams(datagrams, addr, now)
            return
        core = tapped.native
        try:
            tapped.receive_many_datagrams(datagrams, addr, now)  # the core's own, or counted
        except RuntimeError as exc:
            raise _core_failure(exc) from exc
        take = self.take_stream_data
        if take is not None and not self._events:
            # The core's events in order: stream data to `take` until it declines some or
            # another kind comes; that one and all after go through qh3, as events.
            while (event := core.next_event()) is not None:
                if event[0] != "stream_data":
                    tapped.hold(event)
                    break
                if not take(event[1], event[2], event[3]):
                    self._events.append(StreamDataReceived(event[2], event[3], event[1]))
                    break
            else:
                return
        self._drain_core()

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, NetworkAddress]]:
        return [(data, addr) for addr, batch in self.batches_to_send(now) for data in batch]

    def batches_to_send(self, now: float) -> list[tuple[NetworkAddress, list[bytes]]]:
        """What qh3's datagrams_to_send returns, in runs to one address (as a transport's
        sendto_many takes them): [(address, datagrams)]."""
        tapped: CoreTap | None = self._core  # type: ignore[assignment]
        if tapped is None:
            return []
        gate = tapped.ack_gate
        if gate is not None and self._ack_held(tapped, gate, now):
            return []
        if self._quic_logger is not None:
            batches = [(addr, [data]) for data, addr in super().datagrams_to_send(now)]
        else:
            try:
                batches = tapped.transmits(now)
            except RuntimeError as exc:
                raise _core_failure(exc) from exc
        if batches and gate is not None:
            gate.sent()
        return batches

    def _ack_held(self, tapped: CoreTap, gate: AckGate, now: float) -> bool:
        """Whether the ACK policy holds the transmit: never before the handshake is confirmed
        (a client's Finished must go), once the connection closes (its CONNECTION_CLOSE must),
        or while stream data (a request) waits to be sent (agent.h3.ack_policy)."""
        native = tapped.native
        return (
            self._handshake_confirmed
            and gate.holds(now)
            and native.state == "connected"
            and native.get_send_buffer_size(None) == 0
        )

    def deadline(self) -> float | None:
        """When the core's next timer is due (qh3's get_timer, one call less); while the ACK
        policy holds, its ACK and pacing timers give way to the hold's end."""
        tapped: CoreTap | None = self._core  # type: ignore[assignment]
        timer = None if tapped is None else tapped.native.get_timer()
        gate = None if tapped is None else tapped.ack_gate
        release = None if gate is None else gate.release_at
        if release is None or not self._handshake_confirmed:
            return None if timer is None else timer[1]
        if timer is None or timer[0].startswith(_HELD_TIMERS):
            return release
        return min(timer[1], release)


def inside_data_frame(h3: H3Connection, stream_id: int, size: int, end_stream: bool) -> bool:
    """Whether `size` bytes arriving on request stream `stream_id` lie wholly inside the DATA
    frame qh3's layer is receiving there; if so they are counted received as qh3's own
    shortcut for a DATA frame's middle counts them (the frame's remaining size less them), and
    are the caller's to take as body, as the DataReceived qh3 would have made of them. Not so
    for a frame's header or last bytes, the stream's end, bytes qh3 buffers or holds for QPACK,
    or a layer that has failed: those go through qh3's layer."""
    if end_stream or h3._is_done:
        return False
    stream = h3._stream.get(stream_id)
    if stream is None or stream.frame_type != FrameType.DATA or stream.buffer or stream.blocked:
        return False
    remaining = stream.frame_size
    if remaining is None or size >= remaining:
        return False
    stream.frame_size = remaining - size
    return True


def announce_max_ack_delay(bridge: QuicTlsBridge, max_ack_delay_ms: int) -> None:
    """Make `bridge`'s transport parameters say `max_ack_delay_ms` (qh3 writes a fixed 25 ms
    for a server, nothing for a client), now and whenever qh3 writes them again (a version
    negotiation does)."""
    write = bridge.serialize_transport_parameters

    def announcing() -> bytes:
        written = write()
        parameters = pull_quic_transport_parameters(Buffer(data=written))
        parameters.max_ack_delay = max_ack_delay_ms
        buffer = Buffer(capacity=len(written) + 16)  # one parameter more at most
        push_quic_transport_parameters(buffer, parameters)
        return bytes(buffer.data)

    bridge.serialize_transport_parameters = announcing  # type: ignore[method-assign]
    bridge.tls.handshake_extensions = [(ExtensionType.QUIC_TRANSPORT_PARAMETERS, announcing())]


def ack_gate(windows: QuicWindows) -> AckGate | None:
    """The gate making the receiver's ACK policy on this process's qh3, its credit due every
    half of its smaller window (agent.h3.ack_policy)."""
    credit_bytes = min(windows.stream_window_bytes, windows.connection_window_bytes) // 2
    return windows.ack_policy.gate(qh3.__version__, credit_bytes)


def _core_failure(exc: RuntimeError) -> QuicConnectionError:
    """What qh3 makes of its core's failure (QuicConnection._call_core): the connection's."""
    return QuicConnectionError(QuicErrorCode.INTERNAL_ERROR, None, str(exc))


def tap(
    connection: QuicConnection,
    credit: CreditLedger,
    counts: TransportCounts,
    capacity_as_blocked: bool,
    ack_gate: AckGate | None = None,
) -> TappedQuicConnection:
    """`connection` tapped, before its first datagram; with `ack_gate` it acknowledges by that
    gate's policy. qh3's server makes its connections itself (qh3.asyncio.server), of its own
    class, before their core exists: the class is swapped here, the one place, rather than
    copying qh3's server to construct ours."""
    connection.__class__ = TappedQuicConnection
    assert isinstance(connection, TappedQuicConnection)
    connection.tap_credit = credit
    connection.tap_counts = counts
    connection.tap_capacity_as_blocked = capacity_as_blocked
    connection.tap_ack_gate = ack_gate
    return connection


def _numbers(parameters: QuicTransportParameters | None) -> dict[str, int]:
    """The transport parameters that are numbers (windows, limits, sizes, timeouts), by RFC
    9000's names; the connection IDs, tokens and addresses are not settings."""
    if parameters is None:
        return {}
    values = ((f.name, getattr(parameters, f.name)) for f in fields(parameters))
    return {name: value for name, value in values if type(value) is int}


def _h3_named(settings: Mapping[int, int] | None) -> dict[str, int]:
    """HTTP/3 SETTINGS by RFC 9114's and RFC 9204's names; one qh3 does not know (a GREASE
    identifier) by its identifier in hex."""
    named = {}
    for identifier, value in (settings or {}).items():
        try:
            name = f"SETTINGS_{Setting(identifier).name}"
        except ValueError:
            name = f"0x{identifier:x}"
        named[name] = value
    return named


def settings_exchange(quic: QuicConnection, h3: H3Connection) -> SettingsExchange:
    """What the endpoint announced (its transport parameters as its TLS handshake carried them,
    its HTTP/3 SETTINGS frame) and received (the peer's transport parameters, once its
    handshake message arrived, and SETTINGS frame, once read); received is None until both
    have. Reads qh3's private `_tls` of the pinned version."""
    bridge = quic._tls
    announced: dict[str, int] = {}
    received: dict[str, int] | None = None
    if bridge is not None:
        for kind, data in bridge.tls.handshake_extensions:
            if kind == ExtensionType.QUIC_TRANSPORT_PARAMETERS:
                announced.update(_numbers(pull_quic_transport_parameters(Buffer(data=data))))
        remote = bridge.remote_transport_parameters
        if remote is not None and h3.received_settings is not None:
            received = {**_numbers(remote), **_h3_named(h3.received_settings)}
    announced.update(_h3_named(h3.sent_settings))
    if received is not None:
        received = dict(sorted(received.items()))
    return SettingsExchange(dict(sorted(announced.items())), received)
