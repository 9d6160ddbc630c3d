"""A misbehaving board on a pseudo-terminal: it speaks the wire protocol, but its answers are
scripted (a corrupted INFO, a START with no samples after it, sample indices that jump), so a
test can show what the controller makes of each fault. Real pty, real frames, real CRCs."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from controller.meter.decoder import CommandFrameDecoder
from controller.meter.protocol import (
    Ack,
    Frame,
    FrameType,
    Info,
    Samples,
    Status,
    encode_device_frame,
)

GOOD_INFO = Info(0, 2, 1, 1, 0, 1, 16_000_000, 10, 5000, 1000, 0x01, 1, 500_000, 2, "mega2560")


def samples(first: int, count: int = 10, channels: int = 1) -> Samples:
    """A SAMPLES frame of `count` mid-scale values from sample index `first` (u32 on the wire)."""
    values = np.full((count, channels), 512, dtype=np.uint16)
    return Samples(0, first % (1 << 32), values)


@dataclass
class Script:
    info: Info = GOOD_INFO
    corrupt_infos: int = 0  # this many INFO frames go out with a flipped payload byte
    after_start: Sequence[Frame] = ()  # sent right after the ACK of START (sample frames)
    final_status: Status | None = None  # the answer to STOP after its ACK; None: silence


class ScriptedBoard:
    """Answers commands from a pty master on a thread, as `script` says."""

    def __init__(self, master: int, script: Script) -> None:
        self.master = master
        self.script = script
        self.identifies = 0
        self._seq = 0
        self._thread = threading.Thread(target=self._serve, name="scripted-board", daemon=True)
        self._thread.start()

    def _send(self, frame: Frame) -> bytes:
        wire = encode_device_frame(replace(frame, seq=self._seq))  # type: ignore[type-var]
        self._seq = (self._seq + 1) % (1 << 16)
        return wire

    def _serve(self) -> None:
        decoder = CommandFrameDecoder()
        while True:
            try:
                data = os.read(self.master, 64)
            except OSError:
                return
            for raw in decoder.feed(data):
                out = self._send(Ack(0, raw.frame_type, raw.seq, 0))
                if raw.frame_type == FrameType.IDENTIFY:
                    self.identifies += 1
                    info = self._send(self.script.info)
                    if self.script.corrupt_infos > 0:
                        self.script.corrupt_infos -= 1
                        info = info[:12] + bytes([info[12] ^ 0xFF]) + info[13:]
                    out += info
                elif raw.frame_type == FrameType.START:
                    out += b"".join(self._send(frame) for frame in self.script.after_start)
                elif raw.frame_type == FrameType.STOP and self.script.final_status is not None:
                    out += self._send(self.script.final_status)
                try:
                    os.write(self.master, out)
                except OSError:
                    return
