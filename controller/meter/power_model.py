"""Power of a Raspberry Pi 3 Model B as a linear function of its CPU utilisation.

P = idle + (full - idle) x utilisation, utilisation in [0, 1] over the Pi's 4 cores.

Sources. Pidramble's power benchmarks (Jeff Geerling, https://www.pidramble.com/wiki/benchmarks/
power-consumption) measured a Pi 3 B at 230 mA (1.2 W) idle with HDMI and LEDs off, 260 mA
(1.4 W) idle, and 730 mA (3.7 W) at 400 % CPU (`stress --cpu 4`). The issue fixes the model at
about 1.2 W idle and about 4 W at full load (P ~ 1.2 W + 2.75 W x utilisation), which is what
the defaults below encode; the full-load figure sits 0.25 W above Pidramble's 3.7 W. Both ends
are parameters (`h2iot meter virtual --idle-mw/--full-mw`) for other boards or measurements.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PowerModel:
    idle_mw: float = 1200.0
    full_mw: float = 1200.0 + 2750.0
    cores: int = 4  # utilisation 1.0 = every core of the modelled board busy

    def power_mw(self, utilisation: float) -> float:
        return self.idle_mw + (self.full_mw - self.idle_mw) * min(1.0, max(0.0, utilisation))


PI_3B = PowerModel()
