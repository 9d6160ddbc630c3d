"""`h2iot rig check`'s PPK2 judgments (pure): the metadata's identity and the stream's counters
each make one verdict, and an emulated PPK2 is never a pass for a bench."""

from __future__ import annotations

import dataclasses

import pytest

from controller.meter.ppk2 import EXAMPLE_METADATA, SAMPLE_RATE_HZ, Ppk2Totals
from controller.meter_sources.ppk2.rig import identity_check, stream_check


def test_identity_names_the_device_and_an_emulated_one_is_unavailable() -> None:
    real = identity_check(EXAMPLE_METADATA, emulated=False)
    assert real.status == "pass"
    assert real.detail == "PPK2 hardware 9102, calibrated, VDD 3000 mV, reports source mode"
    assert identity_check(EXAMPLE_METADATA, emulated=True).status == "unavailable"
    raw = identity_check(dataclasses.replace(EXAMPLE_METADATA, calibrated=False), emulated=False)
    assert raw.status == "warn" and "not calibrated" in raw.detail


def _totals(**counts: int) -> Ppk2Totals:
    samples = counts.pop("samples", 2 * SAMPLE_RATE_HZ)
    bytes_in = 4 * samples + counts.get("skipped_bytes", 0)
    return Ppk2Totals(bytes_in=bytes_in, samples=samples, **counts)


@pytest.mark.parametrize(
    ("totals", "achieved_hz", "status", "says"),
    [
        (_totals(), 100_010.0, "pass", "0 lost in 0 counter gaps, 0 framing resyncs"),
        (_totals(samples=0, skipped_bytes=4000), None, "fail", "4000 bytes, none a sample word"),
        (_totals(samples=0), None, "fail", "(nothing)"),
        (_totals(lost_samples=10, gaps=1), 100_000.0, "warn", "10 lost in 1 counter gaps"),
        (_totals(lost_samples=5000, gaps=80), 97_500.0, "fail", "5000 lost in 80 counter gaps"),
        (_totals(resyncs=1), 100_000.0, "fail", "1 framing resyncs"),
        (_totals(), 90_000.0, "warn", "90000 samples/s of 100000"),
    ],
)
def test_the_stream_is_judged_by_its_counter(
    totals: Ppk2Totals, achieved_hz: float | None, status: str, says: str
) -> None:
    check = stream_check(totals, seconds=2.0, achieved_hz=achieved_hz)
    assert check.status == status and says in check.detail, check
