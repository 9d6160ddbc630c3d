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
    assert result.samples == 3000


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
