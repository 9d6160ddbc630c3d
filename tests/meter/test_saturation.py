"""Samples at a meter's full scale are counted per window (`samples_saturated`), apart from the
lost ones, for each board channel kind: an ACS712 at the ADC's rail, an INA219's OVF bit or
shunt register at its PGA range, an INA226's shunt register at +-81.92 mV; and a PPK2 at the top
code of its top range. The modelled devices clip as the real ones do, so a load past the range
reads saturated through their registers or words."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from controller.meter.calibration import nominal
from controller.meter.decoder import DecoderStats
from controller.meter.ina219 import BUS_FAILED, Ina219Calibration, Ina219Model
from controller.meter.ina226 import Ina226Calibration, Ina226Model
from controller.meter.ppk2 import EXAMPLE_METADATA, Ppk2Decoder, Ppk2Device, adc_to_ua
from controller.meter.ppk2.decoder import ADC_MAX
from controller.meter.ppk2.store import Ppk2Store
from controller.meter.protocol import Info, Samples
from controller.meter.samples import SampleStore
from controller.meter.sensor import Acs712
from controller.meter_sources.board.tap import MeterTap
from controller.sweep.meter_tap import saturated_in

RATE_HZ = 1000
RNG_SEED = 7
PPK2_VDD_MV = 3300


def _info(channel_mask: int, i2c_mask: int = 0) -> Info:
    return Info(
        0, 2, 1, 2, 0, 1, 16_000_000, 10, 5000, RATE_HZ, channel_mask, 1, 500_000, 2, "mega2560",
        i2c_mask,
    )  # fmt: skip


def _tap(
    values: np.ndarray,
    info: Info,
    analog_input: int = 0,
    ina2xx: Ina219Calibration | Ina226Calibration | None = None,
) -> MeterTap:
    """A tap on a run whose samples are `values` (one row per sample), sample 5 lost."""
    store = SampleStore()
    rows = values.astype(np.uint16)
    store.add(Samples(0, 0, rows[:5]), 0)
    store.add(Samples(1, 6, rows[5:]), 0)  # the frame after skips sample index 5
    session: Any = SimpleNamespace(
        info=info,
        samples=store,
        decoder=SimpleNamespace(stats=DecoderStats()),
        markers=list,
        name="fake",
        reader_error=None,
    )
    return MeterTap(session, nominal(), analog_input, "virtual", {}, ina219=ina2xx)


def _unread(tap: MeterTap, samples: int) -> tuple[int, int]:
    """(lost, saturated) of a window over the samples that the energy depends on."""
    t_s, power_mw, unread = tap._power(0, samples)
    return unread.lost, saturated_in((t_s, power_mw, t_s[0], t_s[-1]), unread.clipped)


def test_an_acs712_at_either_rail_is_saturated() -> None:
    codes = np.array([[512], [0], [1023], [1022], [1], [700], [1023]])
    assert _unread(_tap(codes, _info(0x01)), 8) == (1, 3)


def test_an_ina226_shunt_register_at_full_scale_is_saturated_and_an_unanswered_one_lost() -> None:
    shunt = [0x1000, 0x7FFF, 0x8000, 0x7FFE, 0x0000, 0x7FFF]
    bus = [4000, 4000, 4000, 4000, BUS_FAILED, 4000]
    tap = _tap(np.column_stack((shunt, bus)), _info(0x00, 0x11), 0x40, Ina226Calibration(0x40))
    assert _unread(tap, 7) == (2, 3)  # sample 5 never came; the one with bus 0xFFFF lost


def test_an_ina219_saturates_by_its_ovf_bit_or_its_shunt_register_at_the_pga_range() -> None:
    calibration = Ina219Calibration(0x40, 0.1)
    shunt = np.array([1000, 32000, (-32000) & 0xFFFF, 31999, 1000, 0], dtype=np.int64)
    bus = np.array([0x2000 | 2, 0x2000 | 2, 0x2000 | 2, 0x2000 | 2, 0x2000 | 3, BUS_FAILED])
    flags = calibration.saturated(shunt.astype(np.uint16), bus.astype(np.uint16))
    assert flags.tolist() == [False, True, True, False, True, False]


@pytest.mark.parametrize("shunt_ohm", [0.02, 1.0])
def test_the_ina226_model_past_its_range_reads_full_scale(shunt_ohm: float) -> None:
    """1 ohm puts a 2 W node past 81.92 mV (82 mA); 0.02 ohm keeps it inside (4.1 A)."""
    model = Ina226Model(Ina226Calibration(0x40, shunt_ohm))
    shunt, bus = model.registers(np.full(50, 2000.0), np.random.default_rng(RNG_SEED))
    flags = model.calibration.saturated(shunt, bus)
    assert flags.all() if shunt_ohm == 1.0 else not flags.any()


def test_the_ina219_model_past_its_range_sets_ovf_and_reads_saturated() -> None:
    model = Ina219Model(Ina219Calibration(0x40, 1.0))  # 320 mA at PGA /8
    shunt, bus = model.registers(np.full(20, 2500.0), np.random.default_rng(RNG_SEED))
    assert model.calibration.saturated(shunt, bus).all()


def test_the_acs712_model_past_the_adc_reads_a_rail() -> None:
    """A 5 A ACS712 at 185 mV/A leaves the ADC's 5 V near 13.5 A either way."""
    codes = Acs712(supply_v=5.0).codes(np.array([-80_000.0, 80_000.0]), np.random.default_rng(1))
    assert codes.tolist() == [0, 1023]


def test_a_ppk2_sample_at_the_top_of_its_top_range_is_saturated_in_its_window() -> None:
    """The emulated PPK2 clips a current past range 4's full scale to code 16383 there, as the
    device does; the store counts those per bin, and a window counts the bins (its trace's
    samples) holding any."""
    top_ua = float(adc_to_ua(EXAMPLE_METADATA, PPK2_VDD_MV, 4, ADC_MAX))
    current = np.full(2000, 300_000.0)  # 300 mA: range 4, inside its scale
    current[500:530] = 2 * top_ua  # clipped
    current[1500] = 2 * top_ua
    device = Ppk2Device()
    device.receive(b"\x11\x02\x0d\x0c\xe4\x0c\x01\x06")  # source mode, 3300 mV, start
    device.samples(current.size, current, 0)
    decoder = Ppk2Decoder(EXAMPLE_METADATA, PPK2_VDD_MV, spike_filter=False)
    store = Ppk2Store(rate_hz=1000)  # bins of 100 samples
    store.add(decoder.feed(b"".join(device.data_to_send())), 0)
    store.add(decoder.flush(), 0)

    def saturated(first: int, end: int) -> int:
        window = store.window(first, end)
        trace = (window.t_s, window.current_ua, window.t_s[0], window.t_s[-1])
        return saturated_in(trace, window.saturated > 0)

    assert (saturated(0, 1000), saturated(1000, 2000), saturated(600, 1400)) == (1, 1, 0)
    assert int(store.window(0, 2000).saturated.sum()) == 31  # the samples clipped, per bin
    assert store.window(0, 2000).samples_lost == 0


def test_only_the_clipped_samples_the_energy_depends_on_are_counted() -> None:
    """Those inside the window and the one either side each edge: what `samples` counts."""
    t_s = np.arange(10) / RATE_HZ
    clipped = np.zeros(10, dtype=bool)
    clipped[[0, 2, 3, 7, 9]] = True
    trace = (t_s, np.ones(10), 3.5 / RATE_HZ, 6.5 / RATE_HZ)  # samples 3..7 used
    assert saturated_in(trace, clipped) == 2
    assert saturated_in((t_s, np.ones(10), 2 / RATE_HZ, 7 / RATE_HZ), clipped) == 3
