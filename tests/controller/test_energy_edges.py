"""Energy over a window at its edges: samples on the window's edges, the shortest traces, mean
power of short and empty windows, and the one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest

from controller.energy import energy_in_window

T = np.array([0.0, 1.0, 2.0, 3.0])
P = np.array([1000.0, 2000.0, 4000.0, 4000.0])


def test_samples_on_the_edges_count_once():
    window = energy_in_window(T, P, 1.0, 3.0)
    assert window.samples == 3  # what the energy depends on: t = 1, 2 and 3, each once
    assert window.energy_mj == pytest.approx(3000.0 + 4000.0)
    assert window.duration_s == 2.0
    assert window.mean_power_mw == pytest.approx(3500.0)


def test_a_short_window_averages_its_own_power_not_its_start():
    window = energy_in_window(T, P, 1.0, 1.5)  # power 2000 -> 3000 mW
    assert window.duration_s == 0.5
    assert window.mean_power_mw == pytest.approx(2500.0)
    assert window.energy_mj == pytest.approx(1250.0)
    assert window.samples == 2  # none inside: the two it is interpolated between


def test_an_empty_window_has_the_power_at_its_instant():
    window = energy_in_window(T, P, 1.5, 1.5)
    assert (window.energy_mj, window.duration_s, window.samples) == (0.0, 0.0, 2)
    assert window.mean_power_mw == pytest.approx(3000.0)


def test_idle_is_zero_unless_given():
    window = energy_in_window(T, P, 0.0, 3.0)
    assert window.energy_above_idle_mj == window.energy_mj
    assert energy_in_window(T, P, 0.0, 3.0, idle_mw=1000.0).energy_above_idle_mj == pytest.approx(
        window.energy_mj - 3000.0
    )


def test_two_samples_are_enough_and_one_is_not():
    two = energy_in_window(np.array([0.0, 2.0]), np.array([1000.0, 3000.0]), 0.0, 2.0)
    assert two.energy_mj == pytest.approx(4000.0)
    with pytest.raises(ValueError, match=r"^power trace covers 1\.0\.\.1\.0 s, not the window"):
        energy_in_window(np.array([1.0]), np.array([1000.0]), 1.0, 1.0)


@pytest.mark.parametrize(
    ("t_s", "p_mw", "start", "end", "message"),
    [
        (T, P, 0.5, 3.5, "power trace covers 0.0..3.0 s, not the window 0.5..3.5 s"),
        (T, P, -1.0, 2.0, "power trace covers 0.0..3.0 s, not the window -1.0..2.0 s"),
        (np.array([]), np.array([]), 0.0, 1.0,
         "power trace covers nothing.. s, not the window 0.0..1.0 s"),
        (T, P[:3], 0.0, 1.0, "times and powers differ in length"),
        (T, P, 2.0, 1.0, "window ends (1.0) before it starts (2.0)"),
    ],
)  # fmt: skip
def test_refusals_name_the_trace_and_the_window(t_s, p_mw, start, end, message):
    with pytest.raises(ValueError) as caught:
        energy_in_window(t_s, p_mw, start, end)
    assert str(caught.value) == message
