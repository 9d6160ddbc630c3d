"""What the configured meter can see, in `h2iot rig check`: its declaration's `facts` from the
config alone, a line each (step, noise, full scale and timing), and whether the client node's
expected peak current fits under the meter's full scale.

The expected peak is the client's device profile's `peak_current_ma` where it names one, else
its idle power (as the meter just read it) times `BUSY_FACTOR`.
"""

from __future__ import annotations

from controller.config.model import Config
from controller.errors import ControllerError
from controller.meter.resolution import Resolution
from controller.rig import checks
from controller.rig.checks import Check

__all__ = [
    "BUSY_FACTOR",
    "HEADROOM_SHARE",
    "config_checks",
    "facts_checks",
    "headroom_check",
    "idle_checks",
    "meter_facts",
]

BUSY_FACTOR = 1.6
"""A node's expected peak over its idle power when its profile names no peak current. A
trial's client runs single-threaded (one agent, or nghttp): one of a Pi 3B's four cores busy,
which the power model (controller.meter.power_model) puts at 1.2 W + 2.75 W / 4 = 1.89 W, 1.57
times its 1.2 W idle; network traffic adds a little."""

HEADROOM_SHARE = 0.8  # an expected peak at or above this share of the full scale is warned of


def meter_facts(config: Config) -> Resolution | None:
    """The configured source's facts from its declaration (None: it states none)."""
    spec = config.meter.spec
    return None if spec.facts is None else spec.load(spec.facts)(config.meter)


def _current(ua: float) -> str:
    for scale, unit in ((1e6, "A"), (1e3, "mA")):
        if ua >= scale:
            return f"{ua / scale:.4g} {unit}"
    return f"{ua:.4g} uA"


def config_checks(config: Config) -> list[Check]:
    """The configured meter's facts (`facts_checks`), or why its declaration could not say."""
    try:
        facts = meter_facts(config)
    except ControllerError as exc:  # a calibration file that does not load, say
        return [Check("meter facts", "fail", str(exc), "see meter.calibration")]
    return [] if facts is None else facts_checks(facts)


def facts_checks(facts: Resolution) -> list[Check]:
    """The meter's facts, one line each: its step, its noise, its range and timing."""
    step = Check(
        "meter step",
        "pass",
        f"{_current(facts.current_ua)} ({facts.power_mw:.4g} mW at {facts.supply_v:g} V, voltage "
        f"{facts.voltage}): {facts.basis}",
    )
    if facts.noise_ua is None:
        noise = Check("meter noise", "unavailable", facts.noise_basis)
    else:
        noise = Check(
            "meter noise",
            "pass",
            f"{_current(facts.noise_ua)} rms a sample ({facts.noise_mw:.4g} mW): "
            f"{facts.noise_basis}",
        )
    timing = [f"{facts.sample_rate_hz:g} samples/s"]
    if facts.conversion_us is not None:
        timing.append(f"conversion {facts.conversion_us:.4g} us")
    if facts.bandwidth_hz is not None:
        timing.append(f"bandwidth {facts.bandwidth_hz / 1e3:g} kHz")
    scale = "unknown" if facts.full_scale_ua is None else _current(facts.full_scale_ua)
    return [step, noise, Check("meter range", "pass", f"full scale {scale}; {', '.join(timing)}")]


def headroom_check(config: Config, facts: Resolution, idle_mw: float) -> Check:
    """The client's expected peak current against the meter's full scale: a warning at
    `HEADROOM_SHARE` of it or above, where a busy trial's samples would clip."""
    name = "meter headroom client"
    profile = config.node("client").device
    if profile is not None and profile.peak_current_ma is not None:
        peak_ua = profile.peak_current_ma * 1e3
        basis = f"the {profile.profile} profile's peak"
    else:
        peak_ua = idle_mw * BUSY_FACTOR / facts.supply_v * 1e3
        basis = f"{idle_mw:.0f} mW idle x {BUSY_FACTOR:g} at {facts.supply_v:g} V"
    if facts.full_scale_ua is None:
        return Check(name, "unavailable", f"{facts.basis}: no full scale stated")
    share = peak_ua / facts.full_scale_ua
    detail = (
        f"expected peak {_current(peak_ua)} ({basis}) is {share:.0%} of the full scale "
        f"{_current(facts.full_scale_ua)}"
    )
    if share >= HEADROOM_SHARE:
        return Check(
            name, "warn", detail, "a larger range: a smaller meter.shunt_ohm, a sensor rated higher"
        )
    return Check(name, "pass", detail)


def idle_checks(
    config: Config, role: str, channel: str, *, mean_mw: float, sd_mw: float
) -> list[Check]:
    """A node's idle power and, for the client (the channel the meter's facts are of), whether
    its expected peak fits the meter's range."""
    found = [checks.idle_check(role, channel, mean_mw=mean_mw, sd_mw=sd_mw)]
    facts = meter_facts(config) if role == "client" else None
    if facts is not None:
        found.append(headroom_check(config, facts, mean_mw))
    return found
