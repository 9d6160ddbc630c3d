"""What a Joulescope can see (`controller.meter.resolution`'s record): the documented finest step,
its full scale, rate and bandwidth (joulescope.com, the JS220 and JS110 user's guides)."""

from __future__ import annotations

from controller.meter.resolution import Resolution

__all__ = ["JOULESCOPE_BANDWIDTH_HZ", "JOULESCOPE_FINEST_STEP_NA", "joulescope"]

# Joulescope's published current resolution at its finest range (product pages and user's
# guides, joulescope.com: JS220 0.5 nA, JS110 1.5 nA). Recordings carry no range steps, and the
# ranges a Pi-class load uses (180 mA, 10 A) resolve coarser: this is the instrument's best.
JOULESCOPE_FINEST_STEP_NA = {"JS220": 0.5, "JS110": 1.5}
# Both sample current and voltage at 2 MS/s, up to 10 A (the top range's full scale); their
# analog bandwidth: JS220 300 kHz, JS110 250 kHz.
JOULESCOPE_SAMPLE_RATE_HZ = 2e6
JOULESCOPE_FULL_SCALE_UA = 10e6
JOULESCOPE_BANDWIDTH_HZ = {"JS220": 300e3, "JS110": 250e3}


def joulescope(model: str, supply_v: float) -> Resolution:
    """A Joulescope's documented figures (module constants); an unknown model gets the JS110's,
    the coarser of the two. It measures voltage; the step's power is at the config's supply_v.
    Its noise is published per range and a recording names none, so none is stated."""
    known = model.upper() if model.upper() in JOULESCOPE_FINEST_STEP_NA else None
    taken = known or "JS110"
    step_na = JOULESCOPE_FINEST_STEP_NA[taken]
    named = known or f"{model or 'unknown model'} (taken as a JS110)"
    return Resolution(
        current_ua=step_na / 1000.0,
        supply_v=supply_v,
        basis=f"{named}: {step_na:g} nA, the documented resolution at its finest range "
        "(joulescope.com); the ranges a Pi-class load uses resolve coarser, and the recording "
        "names no range step; power at the config's supply_v",
        sample_rate_hz=JOULESCOPE_SAMPLE_RATE_HZ,
        noise_ua=None,
        noise_basis="joulescope.com states noise per range; the recording names no range",
        full_scale_ua=JOULESCOPE_FULL_SCALE_UA,
        voltage="measured",
        conversion_us=1e6 / JOULESCOPE_SAMPLE_RATE_HZ,
        bandwidth_hz=JOULESCOPE_BANDWIDTH_HZ[taken],
    )
