"""A Joulescope recording (JLS v2) as the import reads it: a thin layer over pyjls's Reader.

The Joulescope UI (and its driver's recorder) writes one source per instrument (`JS220-<serial>`,
vendor Jetperch) and one fixed-rate signal per quantity it was asked to record, named `current`
(A), `voltage` (V), `power` (W), `current_range`, `gpi[0]`..`gpi[3]` and `trigger_in`; the GPI
signals hold one bit per sample, 8 a byte, little bit order. Each signal starts at the device's
own sample counter (`sample_id_offset`), so two signals of one recording may start a few
samples apart: here every signal is read on one timebase, index 0 the first sample all of them
hold. Markers and notes the user placed are in the sibling `<name>.anno.jls`; the UI's notes
dialog also leaves text in the recording's user data. Both are read only to be recorded.

pyjls is imported here only, when a recording is opened: the controller runs without it, and a
missing pyjls is one line naming the extra that installs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from controller.errors import ConfigError
from controller.meter.jls.pulses import unpack_bits

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]

EXTRA = "joulescope"
INSTALL = f"pip install 'h2iot[{EXTRA}]'"
# Samples per read: 64 Ki, 65 ms at 1 MS/s and 512 KiB per signal in float64 (current,
# voltage, their product and a few temporaries at once). Memory is bounded by this, not by the
# recording; on the development VM larger reads were no faster (benchmarks/jls_import.py).
CHUNK_SAMPLES = 1 << 16
_FSR = 0  # pyjls SignalType.FSR
_USER_DATA_NOTES = 1  # joulescope_ui.jls_v2.ChunkMeta.NOTES: the recording dialog's notes


def pyjls() -> ModuleType:
    """The pyjls module, or the one line that says how to install it."""
    try:
        return importlib.import_module("pyjls")
    except ImportError:
        raise ConfigError(
            f"reading a Joulescope recording needs pyjls, in h2iot's '{EXTRA}' extra: {INSTALL}"
        ) from None


@dataclass(frozen=True, slots=True)
class Signal:
    signal_id: int
    name: str
    units: str
    rate_hz: int
    offset: int  # the recording's index 0 is this signal's sample `offset`
    length: int  # samples from there on
    sample_id_offset: int  # the device's counter at the signal's first sample


@dataclass(frozen=True, slots=True)
class Annotation:
    index: int  # on the recording's timebase
    kind: str  # pyjls AnnotationType name: TEXT, VMARKER, HMARKER, USER
    text: str


class Recording:
    """An open recording; `with Recording.open(path) as recording: ...`."""

    def __init__(self, path: Path, reader: Any, module: ModuleType) -> None:
        self.path = path
        self._reader = reader
        self._pyjls = module
        fsr = [s for s in reader.signals.values() if s.signal_type == _FSR]
        if not fsr:
            raise ConfigError(f"{path}: no fixed-rate signals: not a Joulescope recording")
        rates = {int(s.sample_rate) for s in fsr}
        if len(rates) != 1:
            raise ConfigError(
                f"{path}: signals at different rates ({', '.join(f'{r} Hz' for r in rates)}): "
                "record every signal at one rate"
            )
        (self.rate_hz,) = rates
        start = max(int(s.sample_id_offset) for s in fsr)
        end = min(int(s.sample_id_offset) + int(s.length) for s in fsr)
        self.length = max(0, end - start)
        self.signals: dict[str, Signal] = {}
        for s in fsr:
            self.signals[str(s.name)] = Signal(
                int(s.signal_id),
                str(s.name),
                str(s.units or ""),
                int(s.sample_rate),
                start - int(s.sample_id_offset),
                self.length,
                int(s.sample_id_offset),
            )
        source = reader.sources.get(fsr[0].source_id)
        self.source: dict[str, str] = {
            key: str(getattr(source, key) or "")
            for key in ("name", "vendor", "model", "version", "serial_number")
        }
        self.bytes = path.stat().st_size

    @classmethod
    def open(cls, path: Path) -> Recording:
        module = pyjls()
        if not path.is_file():
            raise ConfigError(f"{path}: no such recording")
        try:
            reader = module.Reader(str(path))
        except Exception as exc:  # pyjls raises RuntimeError and more for a file it cannot read
            raise ConfigError(f"{path}: not a readable JLS v2 recording ({exc})") from None
        try:
            return cls(path, reader, module)
        except BaseException:
            reader.close()
            raise

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()

    def signal(self, name: str) -> Signal:
        try:
            return self.signals[name]
        except KeyError:
            have = ", ".join(sorted(self.signals))
            raise ConfigError(
                f"{self.path}: no '{name}' signal (it has {have}): record it in the UI"
            ) from None

    def _fsr(self, signal: Signal, first: int, length: int) -> Any:
        try:
            return self._reader.fsr(signal.signal_id, signal.offset + first, length)
        except Exception as exc:
            raise ConfigError(
                f"{self.path}: {signal.name} samples {first}..{first + length}: {exc}"
            ) from None

    def bit_chunks(self, name: str, chunk: int = CHUNK_SAMPLES) -> Iterator[tuple[int, U8]]:
        """(first index, one 0/1 byte per sample) over the whole recording."""
        signal = self.signal(name)
        chunk = max(8, chunk - chunk % 8)  # whole bytes of packed bits per read
        # pyjls 0.17 reads the packed bits of a signal whose first sample id is not a multiple
        # of 8 shifted by that remainder (and a read across its data chunks can corrupt the
        # heap); a device counter starts anywhere. Its statistics at one sample per entry read
        # the same bits correctly, at about a tenth of the speed (tests/meter/test_jls_*).
        packed = signal.sample_id_offset % 8 == 0
        for first in range(0, self.length, chunk):
            length = min(chunk, self.length - first)
            if packed:
                yield first, unpack_bits(self._fsr(signal, first, length), length)
            else:
                yield first, self._bits_by_statistics(signal, first, length)

    def dropped(self, first: int, length: int) -> npt.NDArray[np.bool_]:
        """Which of the samples [first, first + length) the device dropped: NaN in a float
        signal, where pyjls fills a skip in the sample ids (its GPI bits read 0 there)."""
        name = next((n for n in ("current", "voltage", "power") if n in self.signals), None)
        if name is None:
            return np.zeros(length, dtype=bool)
        values: F64 = np.asarray(self._fsr(self.signals[name], first, length), dtype=np.float64)
        return np.isnan(values)

    def clipped(self, first: int, length: int) -> npt.NDArray[np.bool_]:
        """Which of the samples [first, first + length) the instrument itself left unmeasured:
        NaN current beside a voltage, where a drop (a skip in the sample ids) leaves every
        signal NaN. None can be told apart in a recording of power alone."""
        have = self.signals
        if "current" not in have or "voltage" not in have:
            return np.zeros(length, dtype=bool)
        current = np.asarray(self._fsr(have["current"], first, length), dtype=np.float64)
        voltage = np.asarray(self._fsr(have["voltage"], first, length), dtype=np.float64)
        marked: npt.NDArray[np.bool_] = np.isnan(current) & np.isfinite(voltage)
        return marked

    def _bits_by_statistics(self, signal: Signal, first: int, length: int) -> U8:
        try:
            stats = self._reader.fsr_statistics(signal.signal_id, signal.offset + first, 1, length)
        except Exception as exc:
            raise ConfigError(
                f"{self.path}: {signal.name} samples {first}..{first + length}: {exc}"
            ) from None
        return (np.asarray(stats)[:, 0] > 0.5).astype(np.uint8)

    def power_chunks(
        self, first: int, end: int, chunk: int = CHUNK_SAMPLES
    ) -> Iterator[tuple[int, F64]]:
        """(first index, power in mW) over [first, end): current x voltage where both were
        recorded, else the recorded power."""
        first, end = max(0, first), min(end, self.length)
        have = self.signals
        if "current" in have and "voltage" in have:
            current, voltage = have["current"], have["voltage"]
            for at in range(first, end, chunk):
                n = min(chunk, end - at)
                i = np.asarray(self._fsr(current, at, n), dtype=np.float64)
                v = np.asarray(self._fsr(voltage, at, n), dtype=np.float64)
                yield at, i * v * 1000.0
            return
        power = self.signal("power") if "power" in have else None
        if power is None:
            raise ConfigError(
                f"{self.path}: neither current and voltage nor power recorded "
                f"(it has {', '.join(sorted(have))})"
            )
        for at in range(first, end, chunk):
            n = min(chunk, end - at)
            yield at, np.asarray(self._fsr(power, at, n), dtype=np.float64) * 1000.0

    @property
    def power_from(self) -> str:
        have = self.signals
        return "current x voltage" if "current" in have and "voltage" in have else "power"

    def notes(self) -> list[str]:
        """The text the UI's recording dialog kept in the file's user data."""
        found: list[str] = []

        def take(chunk_meta: int, data: Any) -> bool:
            if chunk_meta == _USER_DATA_NOTES and isinstance(data, str) and data:
                found.append(data)
            return False

        try:
            self._reader.user_data(take)
        except Exception:  # user data is informational: a file without it is no less a recording
            return found
        return found

    def annotations(self) -> list[Annotation]:
        """The markers and text of the sibling `<name>.anno.jls`, on this recording's
        timebase (as the UI writes them: sample indices at its rate from the recording's
        first common instant); none when there is no such file."""
        anno = self.path.with_name(self.path.name.removesuffix(".jls") + ".anno.jls")
        if not anno.is_file():
            return []
        kinds = {int(v): k for k, v in vars(self._pyjls.AnnotationType).items() if k.isupper()}
        found: list[Annotation] = []
        try:
            reader = self._pyjls.Reader(str(anno))
        except Exception as exc:
            raise ConfigError(f"{anno}: not a readable JLS v2 annotation file ({exc})") from None
        try:
            for signal in reader.signals.values():
                # The global annotation signal (rate 0) counts on no timebase of its own.
                scale = self.rate_hz / signal.sample_rate if signal.sample_rate else 1.0

                def take(
                    index: int, _y: Any, kind: int, _group: int, data: Any, scale: float = scale
                ) -> bool:
                    text = data if isinstance(data, str) else str(data)
                    kind_name = kinds.get(int(kind), str(kind))
                    found.append(Annotation(round(index * scale), kind_name, text))
                    return False

                reader.annotations(signal.signal_id, 0, take)
        finally:
            reader.close()
        return sorted(found, key=lambda a: a.index)
