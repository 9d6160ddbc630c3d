"""The firmware's golden frames (firmware/vectors/frames.json) decode and re-encode exactly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from controller.meter.commands import CommandEncoder, parse_command
from controller.meter.decoder import CommandFrameDecoder, FrameDecoder
from controller.meter.protocol import Samples, encode_device_frame

VECTORS = Path(__file__).resolve().parents[2] / "firmware" / "vectors" / "frames.json"


def load_vectors() -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads(VECTORS.read_text())
    return vectors


def test_vectors_cover_every_frame_type():
    types = {v["type"] for v in load_vectors()}
    assert types >= {0x01, 0x02, 0x03, 0x04, 0x05, *range(0x81, 0x89)}


@pytest.mark.parametrize("vector", load_vectors(), ids=lambda v: v["name"])
def test_golden_frame(vector: dict[str, Any]):
    wire = bytes.fromhex(vector["frame_hex"])
    if vector["type"] < 0x80:
        decoder = FrameDecoder()
        (frame,) = decoder.feed(wire)
        assert decoder.stats.bytes_discarded == 0
        assert (frame.TYPE, frame.seq) == (vector["type"], vector["seq"])
        assert frame.payload().hex() == vector["payload_hex"]
        assert encode_device_frame(frame) == wire
        if isinstance(frame, Samples):
            fields = {
                "first_sample_index": frame.first_sample_index,
                "columns": frame.columns,
                "samples": frame.values.tolist(),
            }
        else:
            fields = {k: v for k, v in dataclasses.asdict(frame).items() if k != "seq"}
        assert fields == vector["fields"]
    else:
        (raw,) = CommandFrameDecoder().feed(wire)
        assert (raw.frame_type, raw.seq, raw.payload.hex()) == (
            vector["type"],
            vector["seq"],
            vector["payload_hex"],
        )
        command = parse_command(raw.frame_type, raw.payload)
        assert dataclasses.asdict(command) == vector["fields"]
        assert CommandEncoder(first_seq=vector["seq"]).encode(command) == (vector["seq"], wire)
