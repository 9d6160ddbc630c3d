"""The power model's network term: interface counters, traffic per interval, power."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.meter.net_load import Counters, InterfaceCounters, Traffic, parse_net_dev
from controller.meter.power_model import PI_3B, POWERPI_NJ_PER_BYTE

# /proc/net/dev's layout: rx bytes, packets, errs, drop, fifo, frame, compressed, multicast,
# then tx bytes, packets, errs, drop, fifo, colls, carrier, compressed.
# A Pi 3 B's FastEthernet at line rate both ways, as the interface's counters add them up.
FASTETHERNET_BYTES_PER_S = 2 * 100e6 / 8

NET_DEV = """\
Inter-|   Receive |  Transmit
    lo: 1000000 200 0 0 0 0 0 0 1000000 200 0 0 0 0 0 0
 data0: 5000 10 0 0 0 0 0 0 3000 6 0 0 0 0 0 0
"""


def test_a_real_interface_counts_both_directions_and_loopback_each_frame_once() -> None:
    assert parse_net_dev(NET_DEV, "data0") == Counters(8000, 16)
    # A frame on loopback is sent and received by the same interface: counted once.
    assert parse_net_dev(NET_DEV, "lo") == Counters(1_000_000, 200)
    assert parse_net_dev(NET_DEV, "eth7") is None


def test_traffic_is_per_interval_and_survives_a_vanished_namespace() -> None:
    readings = iter([Counters(0, 0), Counters(10_000, 10), None, Counters(20_000, 30)])
    traffic = Traffic(lambda: next(readings), now_s=0.0)
    assert traffic.update(0.5) == (20_000.0, 20.0)
    assert traffic.update(0.5) == (20_000.0, 20.0)  # no time passed: the same rates
    assert traffic.update(1.0) == (0.0, 0.0)  # the node's process is gone
    assert traffic.update(2.0) == (10_000.0, 20.0)


def test_this_machines_loopback_is_read() -> None:
    counters = InterfaceCounters("lo").read()
    assert counters is not None and counters.bytes >= 0


def test_the_network_term_is_powerpis_slope_per_byte() -> None:
    assert pytest.approx(38.504) == POWERPI_NJ_PER_BYTE  # 4.813 nJ per bit
    # FastEthernet at 94 Mbit/s: 11.75 MB/s x 38.5 nJ = 0.45 W above idle.
    assert PI_3B.power_mw(0.0, bytes_per_s=94e6 / 8) - PI_3B.idle_mw == pytest.approx(452.4, 0.01)
    assert PI_3B.energy_above_idle_mj(cpu_s=0.1, bytes_=1e6) == pytest.approx(68.75 + 38.504)


def test_the_configs_default_network_term_is_the_models() -> None:
    from controller.config.model import MeterConfig  # noqa: PLC0415

    assert MeterConfig().network_nj_per_byte == POWERPI_NJ_PER_BYTE


@given(
    utilisation=st.floats(-10.0, 10.0, allow_nan=False),
    bytes_per_s=st.floats(0.0, FASTETHERNET_BYTES_PER_S),
)
def test_at_a_pi_3bs_rates_the_model_stays_within_its_stated_bounds(
    utilisation: float, bytes_per_s: float
) -> None:
    # power_model.py, "Bounds": the CPU term tops out at full_mw; at FastEthernet's line rate
    # the network adds at most 0.96 W.
    assert PI_3B.idle_mw <= PI_3B.power_mw(utilisation) <= PI_3B.full_mw
    network_top_mw = POWERPI_NJ_PER_BYTE * FASTETHERNET_BYTES_PER_S / 1e6
    assert network_top_mw == pytest.approx(962.6)
    assert (
        PI_3B.idle_mw
        <= PI_3B.power_mw(utilisation, bytes_per_s)
        <= (PI_3B.full_mw + network_top_mw)
    )


def test_on_unshaped_loopback_the_network_term_follows_the_hosts_rate() -> None:
    # The default local sweep's fastest 65535-byte fetch on a 2-core host: 7,029,100 bytes on
    # loopback between its marker edges in 53 ms (1.06 Gbit/s), ten times what a Pi 3 B's
    # interface carries. The model books them at that rate: above full_mw, on purpose.
    network_mw = PI_3B.power_mw(0.0, bytes_per_s=7_029_100 / 0.053) - PI_3B.idle_mw
    assert network_mw == pytest.approx(5106.6, rel=1e-4)
    assert PI_3B.idle_mw + network_mw > PI_3B.full_mw


@given(bytes_=st.integers(0, 10**9), window_s=st.floats(1e-3, 100.0))
def test_a_transfers_network_energy_does_not_depend_on_how_fast_it_went(
    bytes_: int, window_s: float
) -> None:
    # Why the term is not capped at a line rate: the energy of the bytes between a trial's
    # edges is what the ground-truth check (analysis.agreement) expects, at any host's speed.
    above_idle_mw = PI_3B.power_mw(0.0, bytes_per_s=bytes_ / window_s) - PI_3B.idle_mw
    assert above_idle_mw * window_s == pytest.approx(
        PI_3B.energy_above_idle_mj(0.0, bytes_=bytes_), rel=1e-9, abs=1e-6
    )
