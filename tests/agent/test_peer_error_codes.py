"""Peer errors carry their protocol's error code (agent.errors.ProtocolCode), named in the
message: HTTP/2's, HTTP/3's and QUIC's, told apart as a QUIC close tells them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import PeerProtocolError, ProtocolCode
from agent.exchange_queues import error_code_name, http2_code
from agent.h3.wire import close_code, h3_code, h3_error_name


def test_an_http2_code_is_named_as_rfc_9113_names_it_or_left_unnamed() -> None:
    assert http2_code(11) == ProtocolCode("HTTP/2", 11, "ENHANCE_YOUR_CALM")
    assert str(http2_code(11)) == "HTTP/2 ENHANCE_YOUR_CALM 0xb"
    assert http2_code(0x4242) == ProtocolCode("HTTP/2", 0x4242, None)
    assert str(http2_code(0x4242)) == "HTTP/2 0x4242"
    assert (error_code_name(8), error_code_name(0x4242)) == ("CANCEL", "error code 16962")


def test_an_http3_code_is_named_as_rfc_9114_names_it() -> None:
    assert str(h3_code(0x10C)) == "HTTP/3 H3_REQUEST_CANCELLED 0x10c"
    assert h3_error_name(0x10C) == "H3_REQUEST_CANCELLED"
    assert h3_error_name(0x7777) == "error code 0x7777"


@pytest.mark.parametrize(
    ("value", "frame_type", "expected"),
    [
        (0x10C, None, ProtocolCode("HTTP/3", 0x10C, "H3_REQUEST_CANCELLED")),  # application close
        (0x0A, 0x08, ProtocolCode("QUIC", 0x0A, "PROTOCOL_VIOLATION")),  # transport close
        (0x03, 0, ProtocolCode("QUIC", 0x03, "FLOW_CONTROL_ERROR")),  # no frame at fault
        (0, None, ProtocolCode("QUIC", 0, "NO_ERROR")),  # qh3's idle timeout or a local close
        (0x100, 0x06, ProtocolCode("QUIC", 0x100, "CRYPTO_ERROR")),  # not H3_NO_ERROR
    ],
)
def test_a_quic_close_is_quics_code_with_a_frame_and_http3s_without(
    value: int, frame_type: int | None, expected: ProtocolCode
) -> None:
    assert close_code(value, frame_type) == expected


@given(st.integers(0, 2**62 - 1), st.sampled_from(["HTTP/2", "HTTP/3", "QUIC"]))
def test_the_message_ends_with_the_code_and_the_record_keeps_it(value: int, space: str) -> None:
    code = ProtocolCode(space, value, None)
    error = PeerProtocolError("server sent GOAWAY", code)
    assert str(error) == f"server sent GOAWAY ({space} 0x{value:x})"
    assert error.error_code is code
    assert code.to_dict() == {"protocol": space, "value": value, "name": None}


def test_a_peer_error_without_a_code_says_only_its_message() -> None:
    error = PeerProtocolError("connection is closed")
    assert str(error) == "connection is closed" and error.error_code is None
