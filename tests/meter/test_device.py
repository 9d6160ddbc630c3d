"""The virtual meter's device model behaves like firmware/PROTOCOL.md says the board does."""

from __future__ import annotations

import numpy as np
import pytest

from controller.meter.commands import (
    CommandEncoder,
    GetStatus,
    Identify,
    SetChannels,
    SetOversampling,
    SetRate,
    Start,
    Stop,
)
from controller.meter.decoder import FrameDecoder
from controller.meter.device import BoardIdentity, DeviceCore, check_config
from controller.meter.protocol import (
    Ack,
    AckResult,
    FrameType,
    Info,
    Marker,
    Samples,
    Status,
    encode_frame,
)


def ramp(first: int, count: int, inputs: tuple[int, ...], oversampling: int) -> np.ndarray:
    """Value = (sample index + 100 x input) mod 1024: every sample is recognisable."""
    index = np.arange(first, first + count)[:, None] + 100 * np.array(inputs)[None, :]
    return (index % 1024).astype(np.uint16)


class Host:
    def __init__(self, identity: BoardIdentity | None = None) -> None:
        self.device = DeviceCore(ramp, identity)
        self.encoder = CommandEncoder()
        self.decoder = FrameDecoder()

    def send(self, command, now: float = 0.0) -> list:
        _seq, wire = self.encoder.encode(command)
        self.device.receive(wire, now)
        return self.frames()

    def frames(self) -> list:
        return self.decoder.feed(self.device.output())

    def run(self, until: float, step: float = 0.01) -> list:
        out = []
        t = step
        while t <= until + 1e-9:
            self.device.advance(t)
            out += self.frames()
            t += step
        return out


def acks(frames: list) -> list[int]:
    return [f.result for f in frames if isinstance(f, Ack)]


def test_identify_answers_ack_then_info_with_the_defaults():
    frames = Host().send(Identify())
    assert isinstance(frames[0], Ack)
    assert (frames[0].command_type, frames[0].result) == (FrameType.IDENTIFY, AckResult.OK)
    info = frames[1]
    assert isinstance(info, Info)
    assert (info.sample_rate_hz, info.channel_mask, info.oversampling) == (1000, 0x03, 1)
    assert (info.board, info.mcu_id, info.baud, info.adc_bits) == ("mega2560", 1, 500_000, 10)


@pytest.mark.parametrize(
    ("rate", "mask", "reads", "result"),
    [
        (1000, 0x03, 1, AckResult.OK),
        (10_000, 0x03, 1, AckResult.OK),
        (100, 0x01, 16, AckResult.OK),
        (99, 0x01, 1, AckResult.BAD_VALUE),
        (10_001, 0x01, 1, AckResult.BAD_VALUE),
        (3000, 0x01, 1, AckResult.BAD_VALUE),  # does not divide 16 MHz
        (1000, 0x00, 1, AckResult.BAD_VALUE),
        (1000, 0x1F, 1, AckResult.BAD_VALUE),  # five channels
        (1000, 0x01, 0, AckResult.BAD_VALUE),
        (1000, 0x01, 17, AckResult.BAD_VALUE),
        (10_000, 0x07, 1, AckResult.BAD_VALUE),  # 30000 conversions/s > 28846
        (8000, 0x07, 1, AckResult.OK),
    ],
)
def test_config_checks_match_the_firmware(rate, mask, reads, result):
    assert check_config(16_000_000, rate, mask, reads) == result


def test_command_check_order_unknown_then_length_then_busy_then_value():
    host = Host()
    host.device.receive(encode_frame(0x90, 7, b""), 0.0)
    host.device.receive(encode_frame(FrameType.SET_RATE, 8, b"\x01"), 0.0)
    assert acks(host.frames()) == [AckResult.UNKNOWN_COMMAND, AckResult.BAD_LENGTH]
    host.send(Start())
    assert acks(host.send(SetRate(3000))) == [AckResult.BUSY]
    assert acks(host.send(Start())) == [AckResult.BUSY]
    assert acks(host.send(SetChannels(1))) == [AckResult.BUSY]
    assert acks(host.send(SetOversampling(2))) == [AckResult.BUSY]
    host.send(Stop())
    assert acks(host.send(SetRate(3000))) == [AckResult.BAD_VALUE]
    status = host.send(GetStatus())[1]
    assert isinstance(status, Status)
    assert status.commands_rejected == 7


def test_a_rejected_command_changes_nothing():
    host = Host()
    host.send(SetRate(3000))
    info = host.send(Identify())[1]
    assert info.sample_rate_hz == 1000


def test_stream_is_contiguous_framed_by_10_ms_with_a_status_per_second():
    host = Host()
    host.send(SetRate(2000))
    host.send(Start(), now=0.0)
    frames = host.run(2.5)
    frames += host.send(Stop(), now=2.5)
    samples = [f for f in frames if isinstance(f, Samples)]
    assert {f.count for f in samples[:-1]} == {20}  # 2000 Hz / 100
    indices = np.concatenate(
        [np.arange(f.first_sample_index, f.first_sample_index + f.count) for f in samples]
    )
    assert (indices == np.arange(len(indices))).all()
    values = np.concatenate([f.values for f in samples])
    assert (values == ramp(0, len(indices), (0, 1), 1)).all()
    statuses = [f for f in frames if isinstance(f, Status)]
    assert [s.samples_taken for s in statuses] == [2000, 4000, 5001]
    final = statuses[-1]
    assert not final.running
    assert final.samples_taken == len(indices) + final.samples_dropped
    assert frames[-1] is final
    assert host.decoder.stats.sequence_gaps == 0


def test_a_link_too_slow_for_the_rate_drops_whole_frames_and_counts_them():
    host = Host(BoardIdentity(baud=115_200))
    host.send(SetRate(10_000))
    host.send(SetChannels(0x03))
    host.send(Start(), now=0.0)
    frames = host.run(1.0, step=0.005)
    frames += host.send(Stop(), now=1.0)
    samples = [f for f in frames if isinstance(f, Samples)]
    final = [f for f in frames if isinstance(f, Status)][-1]
    delivered = sum(f.count for f in samples)
    assert final.samples_dropped > 0
    assert delivered + final.samples_dropped == final.samples_taken
    assert host.decoder.stats.sequence_gaps == 0  # drops are not link losses


def test_marker_carries_the_first_sample_index_at_or_after_the_edge():
    host = Host()
    host.send(Start(), now=0.0)
    host.run(0.1)
    host.device.marker(1, 0.1234)
    host.device.marker(0, 0.2)
    frames = host.frames()
    markers = [f for f in frames if isinstance(f, Marker)]
    assert [(m.sample_index, m.edge, m.pin) for m in markers] == [(124, 1, 2), (200, 0, 2)]
    # complete frames of samples taken before the edge were sent before it, none after it
    before = frames[: frames.index(markers[0])]
    assert max(f.first_sample_index + f.count for f in before if isinstance(f, Samples)) == 120


def test_markers_while_stopped_are_not_reported():
    host = Host()
    host.device.marker(1, 0.5)
    assert host.frames() == []


def test_oversampling_reaches_the_sampler():
    seen = []

    def sampler(first, count, inputs, reads):
        seen.append(reads)
        return np.zeros((count, len(inputs)), dtype=np.uint16)

    device = DeviceCore(sampler)
    encoder = CommandEncoder()
    for command in (SetOversampling(4), Start()):
        device.receive(encoder.encode(command)[1], 0.0)
    device.advance(0.05)
    assert seen == [4]
