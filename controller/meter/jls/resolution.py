"""A Joulescope's step (`controller.meter.resolution`'s record): the documented finest one."""

from __future__ import annotations

from controller.meter.resolution import Resolution

__all__ = ["JOULESCOPE_FINEST_STEP_NA", "joulescope"]

# Joulescope's published current resolution at its finest range (product pages and user's
# guides, joulescope.com: JS220 0.5 nA, JS110 1.5 nA). Recordings carry no range steps, and the
# ranges a Pi-class load uses (180 mA, 10 A) resolve coarser: this is the instrument's best.
JOULESCOPE_FINEST_STEP_NA = {"JS220": 0.5, "JS110": 1.5}


def joulescope(model: str, supply_v: float) -> Resolution:
    """A Joulescope's documented finest step (module constant); an unknown model gets the
    JS110's, the coarser of the two."""
    known = model.upper() if model.upper() in JOULESCOPE_FINEST_STEP_NA else None
    step_na = JOULESCOPE_FINEST_STEP_NA[known or "JS110"]
    named = known or f"{model or 'unknown model'} (taken as a JS110)"
    return Resolution(
        step_na / 1000.0,
        supply_v,
        f"{named}: {step_na:g} nA, the documented resolution at its finest range (joulescope.com)"
        "; the ranges a Pi-class load uses resolve coarser, and the recording names no range "
        "step; power at the config's supply_v",
    )
