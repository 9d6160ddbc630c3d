"""The pure parts of the agent's HTTP/3: the settings' mapping, the credit a sender sees
granted, the padding the anti-amplification fix credits, the UDP counters, the core tap."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.engines.nghttp2.gtls import GtlsOptions
from agent.engines.nghttp2.gtls_client import saved_bodies
from agent.engines.nghttp2.procfs import UDP_BOUND, listening_ports
from agent.errors import SettingsError, UsageError
from agent.h2.settings import SETTING_SPECS
from agent.h3.amplification import packet_end_with_padding
from agent.h3.credit import CreditLedger
from agent.h3.settings import H3_COUNTERPARTS, QH3_SETTINGS, QuicWindows
from agent.h3.stack import CAPACITY_EXHAUSTED, CoreTap, TransportCounts
from agent.site import build_site, load_manifest


def _windows(settings: dict[str, int]) -> QuicWindows:
    return QuicWindows.from_settings(
        settings, default_stream_window_bytes=65535, connection_window_bytes=1 << 20
    )


def test_every_http2_setting_has_a_stated_http3_fate() -> None:
    assert set(SETTING_SPECS) <= set(H3_COUNTERPARTS)


@pytest.mark.parametrize("name", ["enable_push", "max_frame_size"])
def test_a_setting_without_counterpart_is_refused_by_name(name: str) -> None:
    with pytest.raises(SettingsError, match=f"setting {name} has no counterpart in HTTP/3"):
        _windows({name: SETTING_SPECS[name].minimum})


def test_a_counterpart_qh3_cannot_announce_is_refused_naming_it() -> None:
    with pytest.raises(SettingsError, match=r"max_concurrent_streams .*initial_max_streams_bidi"):
        _windows({"max_concurrent_streams": 8})


def test_the_window_and_the_http3_settings_are_announced() -> None:
    windows = _windows({"initial_window_size": 4096, "header_table_size": 0})
    assert (windows.stream_window_bytes, windows.connection_window_bytes) == (4096, 1 << 20)
    assert windows.announced() == {"initial_window_size": 4096, "header_table_size": 0}
    assert set(windows.announced()) <= set(QH3_SETTINGS)


@pytest.mark.parametrize("size", [1199, 65528])
def test_a_datagram_size_outside_quic_is_refused(size: int) -> None:
    with pytest.raises(SettingsError, match=f"datagram size {size}"):
        QuicWindows(4096, 4096, size)


@given(
    window=st.integers(1, 1 << 20),
    reads=st.lists(st.integers(0, 1 << 16), max_size=60),
    in_flight=st.integers(0, 1 << 16),
)
def test_a_fixed_window_receiver_is_never_seen_granting_more_than_its_window(
    window: int, reads: list[int], in_flight: int
) -> None:
    """A receiver that grants consumed + W, seen by a sender that may have sent up to
    `in_flight` more than was received, never shows more than W ahead."""
    ledger = CreditLedger()
    consumed = 0
    for read in reads:
        consumed += read
        ledger.stream_grant(0, consumed + window, consumed + min(in_flight, window))
    summary = ledger.summary()
    assert summary.largest_stream_credit_ahead_bytes is None or (
        summary.largest_stream_credit_ahead_bytes <= window
    )
    assert summary.max_stream_data_frames == len({r for r in _prefix_sums(reads)})


def _prefix_sums(reads: list[int]) -> list[int]:
    total, sums = 0, []
    for read in reads:
        total += read
        sums.append(total)
    return sums


def test_an_auto_tuned_window_shows_and_a_reset_starts_a_trial_afresh() -> None:
    ledger = CreditLedger()
    ledger.stream_grant(4, 1 << 20, 4096)
    ledger.connection_grant(1 << 21, 4096)
    ledger.connection_grant(1 << 20, 4096)  # lower: not a raise, not counted
    assert ledger.summary().to_dict() == {
        "max_stream_data_frames": 1,
        "max_data_frames": 1,
        "largest_stream_credit_ahead_bytes": (1 << 20) - 4096,
        "largest_connection_credit_ahead_bytes": (1 << 21) - 4096,
    }
    ledger.reset()
    ledger.stream_grant(4, 1 << 20, 8192)  # the limit it already had: no grant
    assert ledger.summary().max_stream_data_frames == 0


@given(packet=st.binary(min_size=1, max_size=64), tail=st.binary(max_size=64))
def test_padding_counts_only_when_the_rest_is_all_zeros(packet: bytes, tail: bytes) -> None:
    datagram = packet + tail
    end = packet_end_with_padding(datagram, len(packet))
    assert end == (len(datagram) if tail and not any(tail) else len(packet))


class _ExhaustedCore:
    def __init__(self, message: str) -> None:
        self.message = message

    def poll_transmit(self, now: float) -> tuple[bytes, object] | None:
        raise RuntimeError(self.message)


def test_capacity_exhaustion_is_blocked_only_when_asked() -> None:
    counts = TransportCounts()
    core = _ExhaustedCore(f"packet builder {CAPACITY_EXHAUSTED}")
    assert CoreTap(core, CreditLedger(), counts, True).poll_transmit(0.0) is None  # type: ignore[arg-type]
    assert counts.capacity_blocked == 1
    with pytest.raises(RuntimeError, match=CAPACITY_EXHAUSTED):
        CoreTap(core, CreditLedger(), counts, False).poll_transmit(0.0)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="another failure"):
        CoreTap(_ExhaustedCore("another failure"), CreditLedger(), counts, True).poll_transmit(0.0)  # type: ignore[arg-type]


def test_ngtcp2s_tools_get_exact_fixed_windows_and_refuse_other_settings() -> None:
    options = GtlsOptions.create({"initial_window_size": 4096}, None, 1350)
    assert options.connection_window_bytes == 4096  # unset: the stream window, as the study
    argv = options.client_argv("gtlsclient", "127.0.0.1", 443, ["https://x/a"], "/tmp/d")
    assert argv[-3:] == ["127.0.0.1", "443", "https://x/a"]
    for flag in ("--max-stream-data-bidi-local=4096", "--max-data=4096", "--max-window=0"):
        assert flag in argv
    server = options.server_argv("gtlsserver", "/site", "0.0.0.0", 8443, ("c.pem", "k.pem"))
    assert server[-4:] == ["0.0.0.0", "8443", "k.pem", "c.pem"]  # key before certificate
    with pytest.raises(UsageError, match="setting header_table_size: ngtcp2's tools"):
        GtlsOptions.create({"header_table_size": 0}, None, 1350)


def test_a_bound_udp_socket_of_the_process_is_found_by_its_inode() -> None:
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "  1: 0100007F:20FB 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 4242\n"
        "  2: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 999\n"
    )
    assert listening_ports(table, {4242}, UDP_BOUND) == {4242: 0x20FB}
    assert listening_ports(table, {4242}) == {}  # not a TCP listener


def test_a_saved_body_that_differs_from_the_manifest_fails_by_sha256(tmp_path: Path) -> None:
    build_site(tmp_path / "site", seed=1, total_bytes=65536)
    manifest = load_manifest(tmp_path / "site")
    saved = tmp_path / "saved"
    saved.mkdir()
    for entry in manifest.files:
        saved.joinpath(Path(entry.path).name).write_bytes(
            (tmp_path / "site" / entry.path).read_bytes()
        )
    times, mismatch = saved_bodies(saved, manifest, 0.5)
    assert mismatch is None and len(times) == len(manifest.files)
    assert all(t.status == 200 and t.end_s == 0.5 for t in times)
    last = saved / Path(manifest.files[-1].path).name
    body = bytearray(last.read_bytes())
    body[0] ^= 0xFF
    last.write_bytes(bytes(body))
    _times, mismatch = saved_bodies(saved, manifest, 0.5)
    assert mismatch is not None and "sha256 differs" in str(mismatch)
