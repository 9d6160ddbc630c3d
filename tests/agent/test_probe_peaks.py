"""Peak RSS windows (agent.probe): a trial's window keeps its peak across the inner resets a
workload makes to measure one message's parse (the kernel has one high-water mark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import probe

MIB = 1 << 20


def _raw_hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _touch_and_free(size_bytes: int) -> None:
    block = bytearray(size_bytes)
    block[::4096] = b"\x01" * len(range(0, size_bytes, 4096))  # every page resident
    del block  # a large block is unmapped: resident memory falls, the mark stays


def test_an_inner_reset_keeps_the_windows_peak_and_a_new_window_forgets_it() -> None:
    if not probe.reset_peak_rss():
        pytest.skip("this kernel has no resettable peak RSS (/proc/self/clear_refs)")
    _touch_and_free(96 * MIB)
    window_peak = probe.peak_rss_bytes()
    assert window_peak >= _raw_hwm_bytes() > 90 * MIB

    assert probe.reset_inner_peak_rss()
    assert _raw_hwm_bytes() < window_peak - 64 * MIB  # the kernel's mark starts again
    assert probe.peak_rss_bytes() == window_peak  # the trial's window keeps its peak

    probe.reset_peak_rss()  # the next trial's window
    assert probe.peak_rss_bytes() < window_peak - 64 * MIB
