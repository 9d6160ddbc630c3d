"""The power model's network term: interface counters, traffic per interval, power."""

from __future__ import annotations

import pytest

from controller.meter.net_load import Counters, InterfaceCounters, Traffic, parse_net_dev
from controller.meter.power_model import PI_3B, POWERPI_NJ_PER_BYTE

# /proc/net/dev's layout: rx bytes, packets, errs, drop, fifo, frame, compressed, multicast,
# then tx bytes, packets, errs, drop, fifo, colls, carrier, compressed.
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
