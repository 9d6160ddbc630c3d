"""Joulescope recordings made without a Joulescope: pyjls's Writer in the UI's layout, from a
power function and a list of marker pulses. For the tests, the benchmark and trying the import.

The layout is the UI's (its signal recorder, `joulescope_ui/plugins/signal_record`): source 1
`<model>-<serial>` from vendor Jetperch; signals numbered from 1 in the order the user enabled
them, `current` (A, f32), `voltage` (V, f32), `power` (W, f32), `current_range` (u4),
`gpi[0]`..`gpi[3]` (u1, packed 8 a byte, little bit order), each at the instrument's output
rate and starting at the device's sample counter, not 0; a UTC entry at the start and at the
end (the UI writes one every 10 minutes and one when it stops); the dialog's notes as user
data. `write_annotations` writes the sibling `.anno.jls` as the UI's waveform does: source
`annotations`, one `current` signal at 1 MHz, markers as VMARKER annotations.

The samples are written in chunks, so a recording larger than memory can be made. `drops` are
samples the device dropped, written as its driver's recorder writes them: a skip in the sample
ids, which pyjls fills with NaN in the float signals and 0 in the bits when read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from controller.meter.jls.recording import pyjls

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Waveform = Callable[[I64], F64]

UI_SIGNALS = (
    "current",
    "voltage",
    "power",
    "current_range",
    "gpi[0]",
    "gpi[1]",
    "gpi[2]",
    "gpi[3]",
)
_UNITS = {"current": "A", "voltage": "V", "power": "W"}
_U1 = ("gpi[0]", "gpi[1]", "gpi[2]", "gpi[3]", "trigger_in")
_WRITE_CHUNK = 1 << 18  # a multiple of 8: whole bytes of packed bits per write


@dataclass(frozen=True)
class Layout:
    rate_hz: int = 1_000_000  # the JS220's output rate (the JS110's is 2 MS/s)
    signals: tuple[str, ...] = UI_SIGNALS
    model: str = "JS220"
    serial_number: str = "003141"
    first_sample_id: int = 86_400_000_000  # the device's counter when recording started
    utc_start_s: float = 1_796_000_000.0
    notes: str | None = None


def pulse_levels(pulses: Sequence[tuple[int, int]], indices: I64) -> npt.NDArray[np.uint8]:
    """GPI0's level at `indices` for pulses [start, end) (sorted, disjoint)."""
    starts = np.array([p[0] for p in pulses], dtype=np.int64)
    ends = np.array([p[1] for p in pulses], dtype=np.int64)
    which = np.searchsorted(starts, indices, side="right") - 1
    inside = (which >= 0) & (indices < ends[np.clip(which, 0, None)]) if len(starts) else None
    if inside is None:
        return np.zeros(len(indices), dtype=np.uint8)
    return inside.astype(np.uint8)


def write_recording(
    path: Path,
    length: int,
    current_a: Waveform,
    voltage_v: Waveform,
    pulses: Sequence[tuple[int, int]],
    *,
    layout: Layout = Layout(),
    chunk: int = _WRITE_CHUNK,
    drops: Sequence[tuple[int, int]] = (),
) -> Path:
    """A recording of `length` samples: current and voltage from the waveforms (called with
    sample indices from 0), power their product, GPI0 high over each pulse [start, end), none
    written over each drop [start, end) (sorted, disjoint, inside the recording)."""
    for start, end in drops:
        # pyjls takes bits in whole bytes: a drop between bytes keeps the signals aligned.
        if start % 8 or end % 8 or not 0 < start < end < length:
            raise ValueError(f"drop {start}..{end}: not whole bytes inside 0..{length}")
    jls = pyjls()
    data_type = jls.DataType
    types = {"current_range": data_type.U4, **{name: data_type.U1 for name in _U1}}
    chunk -= chunk % 8
    with jls.Writer(str(path)) as writer:
        writer.source_def(
            source_id=1,
            name=f"{layout.model}-{layout.serial_number}",
            vendor="Jetperch",
            model=layout.model,
            version='{"fw": "1.2.1", "fpga": "1.2.1", "hw": "H"}',
            serial_number=layout.serial_number,
        )
        ids = {name: n for n, name in enumerate(layout.signals, start=1)}
        for name, signal_id in ids.items():
            writer.signal_def(
                signal_id=signal_id,
                source_id=1,
                signal_type=jls.SignalType.FSR,
                data_type=types.get(name, data_type.F32),
                sample_rate=layout.rate_hz,
                name=name,
                units=_UNITS.get(name, ""),
            )
            writer.utc(signal_id, layout.first_sample_id, _time64(layout.utc_start_s))
        if layout.notes is not None:
            writer.user_data(1, layout.notes)
        for first, last in _written(length, chunk, drops):
            indices = np.arange(first, last, dtype=np.int64)
            sample_id = layout.first_sample_id + first
            i = np.asarray(current_a(indices), dtype=np.float32)
            v = np.asarray(voltage_v(indices), dtype=np.float32)
            for name, signal_id in ids.items():
                if name == "current":
                    writer.fsr_f32(signal_id, sample_id, i)
                elif name == "voltage":
                    writer.fsr_f32(signal_id, sample_id, v)
                elif name == "power":
                    writer.fsr_f32(signal_id, sample_id, (i * v).astype(np.float32))
                elif name == "current_range":
                    writer.fsr(signal_id, sample_id, np.zeros((len(indices) + 1) // 2, np.uint8))
                else:
                    level = pulse_levels(pulses, indices) if name == "gpi[0]" else None
                    bits = np.zeros(len(indices), np.uint8) if level is None else level
                    writer.fsr(signal_id, sample_id, np.packbits(bits, bitorder="little"))
        end_s = layout.utc_start_s + length / layout.rate_hz
        for signal_id in ids.values():
            writer.utc(signal_id, layout.first_sample_id + length - 1, _time64(end_s))
    return path


def _written(length: int, chunk: int, drops: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pieces [first, last) of [0, length) written: at most `chunk` each, none in a drop."""
    pieces: list[tuple[int, int]] = []
    at = 0
    for start, end in [*drops, (length, length)]:
        pieces.extend((f, min(start, f + chunk)) for f in range(at, start, chunk))
        at = end
    return pieces


def write_annotations(
    recording: Path, markers: Sequence[tuple[int, str]], layout: Layout = Layout()
) -> Path:
    """The sibling `.anno.jls` with VMARKER annotations at recording indices `markers`."""
    jls = pyjls()
    path = recording.with_name(recording.name.removesuffix(".jls") + ".anno.jls")
    # The UI's annotation file counts at 1 MHz from the recording's first common instant.
    scale = 1_000_000 / layout.rate_hz
    with jls.Writer(str(path)) as writer:
        writer.source_def(
            source_id=1, name="annotations", vendor="-", model="-", version="-", serial_number="-"
        )
        writer.signal_def(
            signal_id=1, source_id=1, sample_rate=1_000_000, name="current", units="A"
        )
        writer.utc(1, 0, _time64(layout.utc_start_s))
        for index, text in markers:
            writer.annotation(1, round(index * scale), None, jls.AnnotationType.VMARKER, 0, text)
    return path


def _time64(seconds: float) -> int:
    """pyjls's UTC timestamp (time64, 2018-01-01 epoch) for Unix `seconds`."""
    return int(pyjls().utc_to_jls(seconds))
