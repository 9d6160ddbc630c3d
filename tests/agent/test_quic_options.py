"""The QUIC-only options, defaulted and checked in one place each (issue 23): the datagram size
by agent.h3.settings for both engines' HTTP/3, --udp-buffer beside its definition."""

from __future__ import annotations

import pytest

from agent.commands.common import check_udp_buffer
from agent.engines.nghttp2.gtls import GtlsOptions
from agent.errors import SettingsError, UsageError
from agent.h3.settings import DEFAULT_DATAGRAM_BYTES, QuicWindows, datagram_bytes_of
from tests.agent.servers import run_agent


def test_both_engines_take_the_same_default_datagram_size() -> None:
    ours = QuicWindows.from_settings(
        {}, default_stream_window_bytes=65535, connection_window_bytes=65535
    )
    ngtcp2 = GtlsOptions.create({}, None, None)
    assert ours.datagram_bytes == ngtcp2.datagram_bytes == DEFAULT_DATAGRAM_BYTES
    assert "--max-udp-payload-size=1350" in ngtcp2.window_args()
    assert GtlsOptions.create({}, None, 1400).datagram_bytes == 1400


@pytest.mark.parametrize("size", [0, 1199, 65528])
def test_a_datagram_size_outside_quic_is_refused_for_either_engine(size: int) -> None:
    """0 included: a size given is never swapped for the default."""
    with pytest.raises(SettingsError, match=f"datagram size {size} is outside QUIC's"):
        datagram_bytes_of(size)
    with pytest.raises(SettingsError, match=f"datagram size {size}"):
        GtlsOptions.create({}, None, size)


@pytest.mark.parametrize("udp_buffer", [0, -1])
def test_a_udp_buffer_below_one_byte_is_refused(udp_buffer: int) -> None:
    with pytest.raises(UsageError, match=f"--udp-buffer {udp_buffer} must be at least 1 byte"):
        check_udp_buffer(udp_buffer)
    check_udp_buffer(None)
    check_udp_buffer(1)


def test_fetch_refuses_a_zero_udp_buffer_in_one_line() -> None:
    result = run_agent(
        "fetch", "https://127.0.0.1:1/", "--protocol", "h3", "--udp-buffer", "0", timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "h2iot-agent: error: --udp-buffer 0 must be at least 1 byte"
    ]
