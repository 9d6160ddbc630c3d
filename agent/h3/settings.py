"""The study's settings over HTTP/3: which HTTP/2 SETTINGS have a QUIC or HTTP/3 counterpart,
which of those the agent's qh3 engine can announce, and the QUIC-only knobs. Pure.

`initial_window_size` keeps its meaning in every protocol: the receiver's per-stream window.
Over QUIC it is initial_max_stream_data (qh3 announces one value for bidi local, bidi remote and
uni streams); the connection window is initial_max_data. The others map as RFC 9114 and RFC 9204
define them; a setting with no counterpart is refused in one line, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agent.errors import SettingsError
from agent.h3.ack_policy import QH3_OWN, AckPolicy

# HTTP/2 setting -> what carries its meaning over HTTP/3 (None: nothing does).
H3_COUNTERPARTS: Mapping[str, str | None] = MappingProxyType(
    {
        "initial_window_size": "initial_max_stream_data_bidi_local (QUIC transport parameter)",
        "header_table_size": "SETTINGS_QPACK_MAX_TABLE_CAPACITY (RFC 9204)",
        "max_concurrent_streams": "initial_max_streams_bidi (QUIC transport parameter)",
        "max_header_list_size": "SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114)",
        "enable_connect_protocol": "SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220)",
        "enable_push": None,  # RFC 9114 has no setting: a client allows push by MAX_PUSH_ID
        "max_frame_size": None,  # QUIC packetises; datagram size is max_udp_payload_size
    }
)

# The study's setting -> what carries it in the client's and the server's announcements
# (agent.protocols.in_force). The stream window is the receiver's per-stream window on the
# request streams: the client's limit for streams it opened (bidi local), the server's for
# streams its peer opened (bidi remote).
IN_FORCE_KEYS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "initial_window_size": (
            "initial_max_stream_data_bidi_local",
            "initial_max_stream_data_bidi_remote",
        ),
        "header_table_size": ("SETTINGS_QPACK_MAX_TABLE_CAPACITY",) * 2,
        "max_concurrent_streams": ("initial_max_streams_bidi",) * 2,
        "max_header_list_size": ("SETTINGS_MAX_FIELD_SECTION_SIZE",) * 2,
        "enable_connect_protocol": ("SETTINGS_ENABLE_CONNECT_PROTOCOL",) * 2,
    }
)

# What the qh3 engine can announce (qh3 fixes initial_max_streams_bidi at 100 and has no
# extended CONNECT): the window, and the two HTTP/3 SETTINGS its H3 layer takes.
QH3_SETTINGS: tuple[str, ...] = ("initial_window_size", "header_table_size", "max_header_list_size")

# RFC 9000 section 18.2: max_udp_payload_size is at least 1200; qh3 takes up to 65527.
MIN_DATAGRAM_BYTES = 1200
MAX_DATAGRAM_BYTES = 65527
DEFAULT_DATAGRAM_BYTES = 1350  # a loopback- and Ethernet-safe QUIC datagram (qh3's is 1280)


def datagram_bytes_of(requested: int | None) -> int:
    """The largest UDP payload an endpoint sends and takes, whichever engine runs it:
    `requested` (--datagram-size), else the default; outside QUIC's range refused in one line
    (0 too: an explicit size is never swapped for the default)."""
    size = DEFAULT_DATAGRAM_BYTES if requested is None else requested
    if not MIN_DATAGRAM_BYTES <= size <= MAX_DATAGRAM_BYTES:
        raise SettingsError(
            f"datagram size {size} is outside QUIC's {MIN_DATAGRAM_BYTES}..{MAX_DATAGRAM_BYTES} "
            "bytes"
        )
    return size


def refuse_without_counterpart(
    names: Mapping[str, int] | tuple[str, ...],
    engine: str,
    announceable: tuple[str, ...] = QH3_SETTINGS,
) -> None:
    """Raise SettingsError naming the first setting `engine` (which can announce
    `announceable`) cannot carry over HTTP/3."""
    for name in names:
        counterpart = H3_COUNTERPARTS.get(name)
        if counterpart is None:
            raise SettingsError(f"setting {name} has no counterpart in HTTP/3")
        if name not in announceable:
            raise SettingsError(
                f"setting {name} ({counterpart}) is not one the {engine} HTTP/3 engine can "
                f"announce (it can: {', '.join(announceable)})"
            )


@dataclass(frozen=True)
class QuicWindows:
    """What one endpoint announces: its receive windows (bytes), its HTTP/3 SETTINGS (RFC
    9114 identifiers' canonical names), the largest UDP payload it sends and takes, and when
    it acknowledges (its max_ack_delay is announced; agent.h3.ack_policy)."""

    stream_window_bytes: int
    connection_window_bytes: int
    datagram_bytes: int = DEFAULT_DATAGRAM_BYTES
    qpack_max_table_capacity: int | None = None
    max_field_section_size: int | None = None
    ack_policy: AckPolicy = QH3_OWN

    def __post_init__(self) -> None:
        datagram_bytes_of(self.datagram_bytes)  # for its range check
        for name in ("stream_window_bytes", "connection_window_bytes"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name} {getattr(self, name)} must be 0 or more")

    @classmethod
    def from_settings(
        cls,
        settings: Mapping[str, int],
        *,
        default_stream_window_bytes: int,
        connection_window_bytes: int,
        datagram_bytes: int | None = None,
        ack_policy: AckPolicy = QH3_OWN,
    ) -> QuicWindows:
        """The HTTP/2-named `settings` (range-checked already) as QUIC's, refusing one without
        a counterpart the qh3 engine can announce; `datagram_bytes` as `datagram_bytes_of`."""
        refuse_without_counterpart(tuple(settings), "qh3")
        return cls(
            stream_window_bytes=settings.get("initial_window_size", default_stream_window_bytes),
            connection_window_bytes=connection_window_bytes,
            datagram_bytes=datagram_bytes_of(datagram_bytes),
            qpack_max_table_capacity=settings.get("header_table_size"),
            max_field_section_size=settings.get("max_header_list_size"),
            ack_policy=ack_policy,
        )

    def announced(self) -> dict[str, int]:
        """What the endpoint announced, under the HTTP/2 names the records use."""
        announced = {"initial_window_size": self.stream_window_bytes}
        if self.qpack_max_table_capacity is not None:
            announced["header_table_size"] = self.qpack_max_table_capacity
        if self.max_field_section_size is not None:
            announced["max_header_list_size"] = self.max_field_section_size
        return announced
