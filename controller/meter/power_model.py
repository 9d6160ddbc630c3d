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
