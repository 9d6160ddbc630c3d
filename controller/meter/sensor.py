"""An ACS712 in a node's supply line read by a 10-bit ADC: power in, ADC codes out.

Output = Vcc/2 + offset + current x sensitivity + Gaussian noise; the ADC code of each read is
`floor(mV * 2**bits / ref_mv + ADC noise)`, clipped; with oversampling a value is the rounded
mean of n reads, as the firmware computes it. The sensor noise defaults to the datasheet's
typical peak-to-peak figure / 6 (its standard deviation); the ADC adds 0.5 LSB of its own (an
assumption within the ATmega's +-2 LSB absolute accuracy). Together they dither the
quantisation, which is why averages come out unbiased for every variant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.meter.calibration import ACS712_NOISE_PP_MV, ACS712_PP_PER_SIGMA, sensitivity_of
from controller.meter.protocol import SampleArray


@dataclass(frozen=True, slots=True)
class Acs712:
    variant: str = "5A"
    supply_v: float = 5.0  # the metered node's supply: current = power / this
    vcc_mv: float = 5000.0  # the sensor's own supply; its zero sits at half of it
    zero_offset_mv: float = 0.0  # the part's offset error, what calibration measures
    noise_mv: float | None = None  # sensor noise, standard deviation; None = datasheet typical
    adc_bits: int = 10
    adc_ref_mv: float = 5000.0
    adc_noise_lsb: float = 0.5

    @property
    def noise_sigma_mv(self) -> float:
        """Sensor and ADC noise together, referred to the ADC input."""
        sensor = ACS712_NOISE_PP_MV[self.variant] / ACS712_PP_PER_SIGMA
        if self.noise_mv is not None:
            sensor = self.noise_mv
        adc = self.adc_noise_lsb * self.adc_ref_mv / (1 << self.adc_bits)
        return float(np.hypot(sensor, adc))

    def output_mv(self, power_mw: npt.ArrayLike) -> npt.NDArray[np.float64]:
        current_a = np.asarray(power_mw, dtype=np.float64) / self.supply_v / 1000.0
        return self.vcc_mv / 2 + self.zero_offset_mv + current_a * sensitivity_of(self.variant)

    def codes(
        self, power_mw: npt.ArrayLike, rng: np.random.Generator, oversampling: int = 1
    ) -> SampleArray:
        """ADC values for an array of true powers (any shape), each the mean of n reads."""
        mv = self.output_mv(power_mw)
        reads = mv[..., np.newaxis] + rng.normal(
            0.0, self.noise_sigma_mv, (*mv.shape, oversampling)
        )
        top = (1 << self.adc_bits) - 1
        raw = np.clip(np.floor(reads * ((1 << self.adc_bits) / self.adc_ref_mv)), 0, top)
        total = raw.sum(axis=-1)
        mean = total if oversampling == 1 else (total + oversampling // 2) // oversampling
        codes: SampleArray = mean.astype(np.uint16)
        return codes
