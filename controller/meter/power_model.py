"""Power of a Raspberry Pi 3 Model B from its CPU utilisation and its network traffic.

P = idle + (full - idle) x utilisation + e_byte x bytes/s + e_packet x packets/s,
utilisation in [0, 1] over the Pi's 4 cores, bytes and packets those of the node's network
interface (both directions) over the same interval.

CPU term. Pidramble's power benchmarks (Jeff Geerling, https://www.pidramble.com/wiki/benchmarks/
power-consumption) measured a Pi 3 B at 230 mA (1.2 W) idle with HDMI and LEDs off, 260 mA
(1.4 W) idle, and 730 mA (3.7 W) at 400 % CPU (`stress --cpu 4`). The issue fixes the model at
about 1.2 W idle and about 4 W at full load (P ~ 1.2 W + 2.75 W x utilisation), which is what
the defaults below encode; the full-load figure sits 0.25 W above Pidramble's 3.7 W. Both ends
are parameters (`h2iot meter virtual --idle-mw/--full-mw`) for other boards or measurements.

Network term. A Pi 3 B's Ethernet port is a USB device: the LAN9514 chip is a USB 2.0 hub and a
USB-to-Ethernet controller, so every frame crosses the USB and the chip, and the board's power
rises with traffic, not only with the CPU work of the network stack (which the CPU term already
counts). PowerPi (F. Kaup, P. Gottschling, D. Hausheer, "PowerPi: Measuring and modeling the
power consumption of the Raspberry Pi", IEEE LCN 2014, pp. 236-243, doi:10.1109/LCN.2014.6925777)
measured a Raspberry Pi's power against its network data rate and found it linear: 4.813 mW
per Mbit/s of traffic, up or down, through a USB network interface (their WiFi adapter on the
Pi's USB hub, about 0.06 W + 4.813e-3 W x rate in Mbit/s per direction), i.e. 4.813 nJ per
bit, 38.5 nJ per byte. We use that slope per byte for the Pi 3 B's Ethernet, whose path (USB
hub chip, USB network controller) is the same kind; the fixed ~0.06 W "interface active"
offsets are left out (not proportional to traffic; an idle link's cost is in the idle figure).
A FastEthernet transfer at 94 Mbit/s then adds 0.45 W. No published figure per packet was
found: `network_nj_per_packet` is 0 unless given. Both are parameters (`h2iot meter virtual
--network-nj-per-byte`, `meter.network_nj_per_byte` in a sweep's config); 0 turns the network
term off.

Bounds. `full_mw` (3950 mW) is the CPU term's top, not the model's: utilisation is clamped to
[0, 1] here and `cpu_load.Utilisation` carries CPU time beyond the modelled cores into the next
interval, so without traffic the model stays within idle..full. The network term is energy per
byte with no cap of its own: it follows the rate at which the node's interface carried the
bytes. On a Pi 3 B's FastEthernet, or a device profile's link shaped to it (100 Mbit/s each
way), that adds at most 2 x 100 x 4.813 mW = 0.96 W (about 4.9 W in all). On the unshaped
loopback between two local nodes nothing of the Pi's bounds it: the default local sweep's 7 MB
fetch at a 65535-byte window (as short as 53 ms on a 2-core test host's loopback: 1.06 Gbit/s)
models 5.1 W of network on average and about 12 W over its busiest 10 ms. That is this host's
rate times the Pi's energy per byte, not a power a Pi 3 B could draw, since a Pi cannot move the
bytes that fast: a trial's energy (38.5 nJ a byte) is still the model's, but its mean power and
its trace's peaks are not a Pi's. For a Pi's rates run the nodes under the rpi3b device profile
(configs/local-rpi3b.toml); `network_nj_per_byte = 0` leaves the CPU term alone. The term is not
capped at the Pi's line rate on purpose: a cap would either drop the bytes beyond it (the energy
of a byte would then depend on how fast this host is) or book them after the trial that sent
them, as `Utilisation` does with CPU time, moving most of a fast trial's network energy out of
its window; either way the ground-truth check (`analysis.agreement`, the per-byte energy applied
to the bytes between a trial's marker edges) would no longer hold.
"""

from __future__ import annotations

from dataclasses import dataclass

NJ_PER_MJ = 1e6
POWERPI_NJ_PER_BYTE = 4.813 * 8  # 4.813 mW per Mbit/s = 4.813 nJ per bit (PowerPi, above)


@dataclass(frozen=True, slots=True)
class PowerModel:
    idle_mw: float = 1200.0
    full_mw: float = 1200.0 + 2750.0
    cores: int = 4  # utilisation 1.0 = every core of the modelled board busy
    network_nj_per_byte: float = POWERPI_NJ_PER_BYTE
    network_nj_per_packet: float = 0.0

    @property
    def mj_per_cpu_s(self) -> float:
        """Energy above idle of one CPU-second, in mJ (the mW of one busy core)."""
        return (self.full_mw - self.idle_mw) / self.cores

    def power_mw(
        self, utilisation: float, bytes_per_s: float = 0.0, packets_per_s: float = 0.0
    ) -> float:
        cpu = (self.full_mw - self.idle_mw) * min(1.0, max(0.0, utilisation))
        # nJ/s = 1e-6 mW
        network = (self.network_nj_per_byte * bytes_per_s) + (
            self.network_nj_per_packet * packets_per_s
        )
        return self.idle_mw + cpu + network / NJ_PER_MJ

    def energy_above_idle_mj(
        self, cpu_s: float, bytes_: float = 0.0, packets: float = 0.0
    ) -> float:
        """The model applied to a span's activity: its CPU seconds (in modelled cores) and its
        bytes and packets on the node's interface."""
        network_nj = self.network_nj_per_byte * bytes_ + self.network_nj_per_packet * packets
        return self.mj_per_cpu_s * cpu_s + network_nj / NJ_PER_MJ


PI_3B = PowerModel()
