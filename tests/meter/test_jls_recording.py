"""The reader over pyjls on recordings in the Joulescope UI's layout, written by pyjls's Writer."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyjls
import pytest

from controller.errors import ConfigError
from controller.meter.jls import recording as recording_module
from controller.meter.jls.pulses import Pulse, ScanState, scan_bits
from controller.meter.jls.recording import Recording
from controller.meter.jls.synthetic import (
    UI_SIGNALS,
    Layout,
    write_annotations,
    write_recording,
)

N = 40_000
PULSES = [(5_000, 9_000), (20_001, 20_500), (31_000, 39_999)]


def _current(indices: np.ndarray) -> np.ndarray:
    return 0.2 + 1e-6 * indices + 0.05 * np.sin(indices / 50.0)


def _voltage(indices: np.ndarray) -> np.ndarray:
    return 5.1 - 1e-7 * indices


def _ui_recording(path: Path, layout: Layout | None = None) -> Path:
    layout = layout or Layout()
    return write_recording(path, N, _current, _voltage, PULSES, layout=layout, chunk=8192)


def test_the_synthetic_recording_has_the_ui_layout(tmp_path: Path) -> None:
    """Read with pyjls's own Reader: what the UI's signal recorder writes for a JS220."""
    path = _ui_recording(tmp_path / "ui.jls", Layout(notes="bench 2, client Pi 3B"))
    with pyjls.Reader(str(path)) as reader:
        source = reader.sources[1]
        assert (source.name, source.vendor, source.model) == ("JS220-003141", "Jetperch", "JS220")
        signals = {s.signal_id: s for s in reader.signals.values() if s.signal_id}
        assert [signals[n].name for n in sorted(signals)] == list(UI_SIGNALS)
        assert {s.name: s.units for s in signals.values()} == {
            "current": "A",
            "voltage": "V",
            "power": "W",
            "current_range": "",
            **{f"gpi[{n}]": "" for n in range(4)},
        }
        types = {s.name: s.data_type for s in signals.values()}
        assert types["current"] == types["voltage"] == types["power"] == pyjls.DataType.F32
        assert types["current_range"] == pyjls.DataType.U4
        assert types["gpi[0]"] == types["gpi[3]"] == pyjls.DataType.U1
        assert {s.sample_rate for s in signals.values()} == {1_000_000}
        assert {s.sample_id_offset for s in signals.values()} == {Layout().first_sample_id}
        assert {s.length for s in signals.values()} == {N}


# A device counter that is not a multiple of 8 at the first sample takes pyjls 0.17's packed-bit
# reads off by its remainder: the reader must find the same pulses there.
@pytest.mark.parametrize("first_sample_id", [86_400_000_000, 86_400_000_003])
def test_the_reader_gives_the_ui_signals_on_one_timebase(tmp_path: Path, first_sample_id) -> None:
    layout = Layout(notes="bench 2, client Pi 3B", first_sample_id=first_sample_id)
    path = _ui_recording(tmp_path / "ui.jls", layout)
    with Recording.open(path) as recording:
        assert recording.rate_hz == 1_000_000
        assert recording.length == N
        assert set(recording.signals) == set(UI_SIGNALS)
        assert recording.source["serial_number"] == "003141"
        assert recording.power_from == "current x voltage"
        assert recording.notes() == ["bench 2, client Pi 3B"]
        assert recording.bytes == path.stat().st_size
        state, pulses = ScanState(), []
        for first, bits in recording.bit_chunks("gpi[0]", chunk=4099):  # not a byte multiple
            state, found = scan_bits(state, bits, first)
            pulses.extend(found)
        assert pulses == [Pulse(*p) for p in PULSES]
        chunks = list(recording.power_chunks(1_000, 30_000, chunk=7_000))
        assert [first for first, _ in chunks] == [1_000, 8_000, 15_000, 22_000, 29_000]
        power = np.concatenate([p for _, p in chunks])
    indices = np.arange(1_000, 30_000)
    i32 = _current(indices).astype(np.float32).astype(np.float64)
    v32 = _voltage(indices).astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(power, i32 * v32 * 1000.0)


def test_signals_that_start_at_different_samples_are_aligned(tmp_path: Path) -> None:
    """The device's counter starts each signal where its first data arrived."""
    path = tmp_path / "skewed.jls"
    with pyjls.Writer(str(path)) as writer:
        writer.source_def(1, "JS220-1", "Jetperch", "JS220", "", "1")
        for signal_id, name, units, dtype in (
            (1, "current", "A", pyjls.DataType.F32),
            (2, "voltage", "V", pyjls.DataType.F32),
            (3, "gpi[0]", "", pyjls.DataType.U1),
        ):
            writer.signal_def(signal_id, 1, pyjls.SignalType.FSR, dtype, 1000, name=name,
                              units=units)  # fmt: skip
        writer.fsr_f32(1, 1000, np.arange(100, dtype=np.float32))  # current[k] = k - 1000
        writer.fsr_f32(2, 1003, np.full(100, 2.0, dtype=np.float32))
        bits = np.zeros(104, np.uint8)
        bits[10:20] = 1  # samples 1008..1017
        writer.fsr(3, 998, np.packbits(bits, bitorder="little"))
    with Recording.open(path) as recording:
        # Index 0 is sample 1003, the first all three hold; the last all hold is 1099.
        assert recording.length == 97
        ((first, power),) = list(recording.power_chunks(0, 5))
        assert first == 0
        assert power.tolist() == [6000.0, 8000.0, 10000.0, 12000.0, 14000.0]
        (_, bits_read), *_ = list(recording.bit_chunks("gpi[0]", chunk=96))
        assert np.flatnonzero(bits_read).tolist() == list(range(5, 15))


def test_power_is_read_when_current_or_voltage_was_not_recorded(tmp_path: Path) -> None:
    path = _ui_recording(tmp_path / "p.jls", Layout(signals=("power", "gpi[0]")))
    with Recording.open(path) as recording:
        assert recording.power_from == "power"
        ((_, power),) = list(recording.power_chunks(0, 10))
    expected = (
        _current(np.arange(10)).astype(np.float32) * _voltage(np.arange(10)).astype(np.float32)
    ).astype(np.float32)
    np.testing.assert_array_equal(power, expected.astype(np.float64) * 1000.0)


def test_a_recording_without_power_or_marker_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _ui_recording(tmp_path / "v.jls", Layout(signals=("voltage", "gpi[1]")))
    with Recording.open(path) as recording:
        with pytest.raises(ConfigError, match=r"v\.jls: neither current and voltage nor power"):
            list(recording.power_chunks(0, 10))
        with pytest.raises(
            ConfigError, match=r"v\.jls: no 'gpi\[0\]' signal \(it has gpi\[1\], voltage\): record"
        ):
            list(recording.bit_chunks("gpi[0]"))


def test_a_file_that_is_not_a_recording_is_named(tmp_path: Path) -> None:
    path = tmp_path / "notes.jls"
    path.write_text("not a recording\n")
    with pytest.raises(ConfigError, match=r"notes\.jls: not a readable JLS v2 recording"):
        Recording.open(path)
    with pytest.raises(ConfigError, match=r"absent\.jls: no such recording"):
        Recording.open(tmp_path / "absent.jls")


def test_the_ui_markers_are_read_from_the_sibling_annotation_file(tmp_path: Path) -> None:
    layout = Layout(rate_hz=100_000)
    path = write_recording(tmp_path / "sweep.jls", 2000, _current, _voltage, [], layout=layout)
    anno = write_annotations(path, [(100, "1a"), (1500, "1b")], layout)
    assert anno.name == "sweep.anno.jls"
    with Recording.open(path) as recording:
        marks = recording.annotations()
    assert [(a.index, a.kind, a.text) for a in marks] == [(100, "VMARKER", "1a"),
                                                          (1500, "VMARKER", "1b")]  # fmt: skip


def test_without_pyjls_the_import_says_which_extra_to_install(monkeypatch) -> None:
    real = importlib.import_module

    def without_pyjls(name: str, *args, **kwargs):
        if name == "pyjls":
            raise ImportError("No module named 'pyjls'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(recording_module.importlib, "import_module", without_pyjls)
    with pytest.raises(ConfigError) as caught:
        Recording.open(Path("any.jls"))
    assert str(caught.value) == (
        "reading a Joulescope recording needs pyjls, in h2iot's 'joulescope' extra: "
        "pip install 'h2iot[joulescope]'"
    )


def test_the_cli_imports_pyjls_only_for_an_import(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['pyjls'] = None  # as if it were not installed\n"
        "from controller.cli import main\n"
        "try:\n"
        "    main(['meter', 'info', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert sys.modules['pyjls'] is None\n"
        f"sys.exit(main(['meter', 'import', {str(tmp_path)!r}, 'r.jls']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1:] == [
        "h2iot: error: reading a Joulescope recording needs pyjls, in h2iot's 'joulescope' "
        "extra: pip install 'h2iot[joulescope]'"
    ]
