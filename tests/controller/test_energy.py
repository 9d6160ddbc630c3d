from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.energy import energy_in_window


def test_constant_power_is_power_times_duration() -> None:
    t = np.arange(0, 10.001, 0.001)
    result = energy_in_window(t, np.full_like(t, 1200.0), 2.0005, 5.0005, idle_mw=1000.0)
    assert result.energy_mj == pytest.approx(3600.0)
    assert result.energy_above_idle_mj == pytest.approx(600.0)
    assert result.mean_power_mw == pytest.approx(1200.0)
    # 3000 inside, and the one either side each edge is interpolated from
    assert result.samples == 3002


def test_samples_count_what_the_energy_depends_on() -> None:
    t = np.arange(0, 1.001, 0.1)
    power = np.zeros_like(t)
    on_samples = energy_in_window(t, power, 0.2, 0.5)  # edges on samples 2 and 5
    assert on_samples.samples == 4
    power[[1, 6]] = 1000.0  # the neighbours of a window between samples change its energy
    between = energy_in_window(t, power, 0.15, 0.55)
    assert between.samples == 6  # samples 1..6
    assert between.energy_mj > 0


@given(st.floats(0, 5), st.floats(0, 5), st.floats(1, 5000), st.floats(-100, 100))
def test_linear_ramp_is_integrated_exactly(a: float, b: float, base: float, slope: float) -> None:
    start, end = sorted((a, b))
    t = np.linspace(0, 5, 501)
    power = base + slope * t
    result = energy_in_window(t, power, start, end)
    exact = base * (end - start) + slope * (end**2 - start**2) / 2
    assert result.energy_mj == pytest.approx(exact, rel=1e-9, abs=1e-6)


def test_window_outside_the_trace_is_refused() -> None:
    t = np.linspace(0, 1, 11)
    with pytest.raises(ValueError, match="covers"):
        energy_in_window(t, t, 0.5, 1.5)
    with pytest.raises(ValueError, match="before it starts"):
        energy_in_window(t, t, 0.6, 0.5)
