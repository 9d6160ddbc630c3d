"""A node's network traffic for the power model's network term: its interface's counters.

The counters are the kernel's per-interface totals (`/proc/<pid>/net/dev`, read through a
process of the node so that an interface in the node's own network namespace is found), bytes
and packets received and sent. They move when a frame crosses the interface, so the traffic is
booked when it happens.

Which interface: an emulated node in its own namespace has its end of the data link (all of
its traffic, and only its); a local node in the controller's namespace talks to the other over
loopback, shared by both nodes and anything else on this machine. A frame on loopback is sent
and received by the same interface, so there it is counted once (its receive side): the
client's bytes to the server plus the server's to the client, each once, as the client's own
Ethernet port would count them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controller.errors import ConfigError

LOOPBACK = "lo"


@dataclass(frozen=True, slots=True)
class Counters:
    """Cumulative bytes and packets of one interface, both directions together."""

    bytes: int
    packets: int


def parse_net_dev(text: str, interface: str) -> Counters | None:
    """The counters of `interface` in a /proc/net/dev text; None when it is not there.

    Each line is `name: rx_bytes rx_packets errs drop fifo frame compressed multicast
    tx_bytes tx_packets ...`."""
    for line in text.splitlines():
        name, colon, rest = line.partition(":")
        if not colon or name.strip() != interface:
            continue
        fields = rest.split()
        rx_bytes, rx_packets, tx_bytes, tx_packets = (
            int(fields[0]),
            int(fields[1]),
            int(fields[8]),
            int(fields[9]),
        )
        if interface == LOOPBACK:  # each frame is both sent and received here: count it once
            return Counters(rx_bytes, rx_packets)
        return Counters(rx_bytes + tx_bytes, rx_packets + tx_packets)
    return None


class InterfaceCounters:
    """Reads one interface's counters as seen from process `pid`'s network namespace (this
    process's when None)."""

    def __init__(self, interface: str, pid: int | None = None) -> None:
        self.interface = interface
        self._path = Path(f"/proc/{pid}/net/dev" if pid is not None else "/proc/net/dev")
        if self.read() is None:
            raise ConfigError(f"network interface {interface!r}: not in {self._path}")

    def read(self) -> Counters | None:
        try:
            text = self._path.read_text()
        except OSError:
            return None  # the node's process is gone: no traffic to count any more
        return parse_net_dev(text, self.interface)


class Traffic:
    """Turns cumulative counters into bytes/s and packets/s per interval (the previous rates
    again when no time passed; zero when the counters cannot be read)."""

    def __init__(self, counters: Callable[[], Counters | None], now_s: float) -> None:
        self._counters = counters
        self._last = counters() or Counters(0, 0)
        self._last_s = now_s
        self._rates = (0.0, 0.0)

    @property
    def last(self) -> Counters:
        """The counters as of the latest update."""
        return self._last

    def update(self, now_s: float) -> tuple[float, float]:
        elapsed = now_s - self._last_s
        if elapsed <= 0:
            return self._rates
        self._last_s = now_s
        current = self._counters()
        if current is None:
            self._rates = (0.0, 0.0)
            return self._rates
        # A counter that went backwards (an interface re-created) restarts from its new value.
        sent = max(0, current.bytes - self._last.bytes)
        packets = max(0, current.packets - self._last.packets)
        self._last = current
        self._rates = (sent / elapsed, packets / elapsed)
        return self._rates
