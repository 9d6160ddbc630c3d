"""`h2iot meter virtual --device ppk2`: the emulated PPK2 as its own command, on a pty a PPK2
client opens by path. ppk2-api 0.9.2 is the client: it reads the device's metadata, powers it
and streams; the currents it converts are the power model's, and the marker FIFO sets the
chosen logic input. Bad flags are one line and exit 2."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

try:
    from ppk2_api.ppk2_api import PPK2_API
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("ppk2-api is not installed (in CI it must be)", allow_module_level=True)

from controller.cli import main
from controller.meter.power_model import PI_3B
from controller.meter.ppk2 import EXAMPLE_METADATA
from tests.meter.test_cli import start_virtual, stop_virtual
from tests.meter.test_ppk2_oracle import read_with_ppk2_api


def test_ppk2_api_reads_the_emulated_ppk2s_metadata_and_stream(tmp_path: Path) -> None:
    fifo = tmp_path / "marker.fifo"
    os.mkfifo(fifo)
    process, port = start_virtual(
        "--device", "ppk2", "--marker-fifo", str(fifo), "--marker-input", "2",
        "--supply-v", "5", "--duration", "60",
    )  # fmt: skip
    try:
        # ppk2-api's reads wait `timeout` for the metadata: 1 s was too short once on a loaded
        # CI machine (get_modifiers gave None), the emulator a Python thread among many.
        api = PPK2_API(port, timeout=5, write_timeout=5, exclusive=True)
        try:
            assert api.get_modifiers() is True
            for number, calibration in enumerate(EXAMPLE_METADATA.ranges):
                assert api.modifiers["R"][str(number)] == calibration.resistor_ohm
                assert api.modifiers["GI"][str(number)] == calibration.gain_linear
            assert int(api.modifiers["HW"]) == EXAMPLE_METADATA.hardware_id
            api.use_source_meter()
            api.set_source_voltage(5000)
            api.toggle_DUT_power("ON")
            api.start_measuring()
            idle, _bits, _raw = read_with_ppk2_api(api, 5_000)
            with fifo.open("w") as line:
                line.write("1\n")
                line.flush()
                time.sleep(0.1)
                # Until the level shows: on a loaded machine the pty may still hold samples
                # from before the edge (a bound, not a timing: 2 s of stream at most).
                marked, bits = [], []
                while not any(b & 0b100 for b in bits) and len(bits) < 200_000:
                    more, more_bits, _raw = read_with_ppk2_api(api, 20_000)
                    marked, bits = marked + more, bits + more_bits
                line.write("0\n")
                line.flush()
            api.stop_measuring()
        finally:
            api.ser.close()
    finally:
        stop_virtual(process)
    # Nothing watched: the model at idle, at 5 V, in uA, through ppk2-api's own conversion.
    idle_ua = PI_3B.idle_mw / 5.0 * 1000
    assert sum(idle) / len(idle) == pytest.approx(idle_ua, rel=0.01)
    assert sum(marked) / len(marked) == pytest.approx(idle_ua, rel=0.01)
    # The FIFO's level is on D2 (bit 2 of the logic byte), and on no other input.
    assert any(b & 0b100 for b in bits) and not any(b & ~0b100 & 0xFF for b in bits)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--supply-v", "12"), "--supply-v 12: a PPK2 supplies 0.8-5 V"),
        (("--marker-input", "8"), "--marker-input 8: a PPK2 has inputs D0-D7"),
        (("--rate-hz", "300"), "--rate-hz 300: must divide 100000"),
        (("--watch-pid", "1", "--watch-pid", "2"), "a PPK2 measures one node"),
    ],
)
def test_bad_ppk2_flags_are_one_line(flags: tuple[str, ...], message: str, capsys) -> None:
    assert main(["meter", "virtual", "--device", "ppk2", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
