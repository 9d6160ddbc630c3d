"""The tc and ip commands that shape one end of the data link, and those that undo them.

Pure: `plan_end(link, state)` turns the link profile and the interface as it is now into argv
lists; `controller.link.apply` runs them on the node. Each end shapes what it sends and what it
receives, so both directions behave alike, as on a FastEthernet cable:

- rate: `tbf` on the egress, under a size table that charges every frame the 24 bytes of
  preamble, FCS and inter-frame gap it takes on the wire, so TCP gets what real FastEthernet
  gives (94 Mbit/s at 100). GSO is off (`gso_max_segs 1`): otherwise tbf would see 64 KB
  super-packets and charge the overhead once per 45 frames.
- loss: a filter on the *ingress* drops each arriving packet with the asked probability. A drop
  on the sender's own egress would not be a loss: the sender's TCP just queues the packet again.
  The filter is four classic-BPF instructions (`ld rand`; below the threshold return
  TC_ACT_SHOT, else TC_ACT_OK) in direct-action mode: it needs neither netem nor the gact action,
  which kernels built without them (like this project's CI kernel) lack, and takes any
  probability, where gact's `random` only takes 1/N.
- delay: netem on the egress (one-way, so each direction gets it), with tbf as its child when a
  rate is asked too. Kernels without netem refuse it; `controller.link.apply` says so. With
  `delay_method = "relay"` the delay is not the ends' to make: a relay between two local nodes'
  namespaces delays the frames (`controller.device.wire`).

h2iot's qdiscs carry handle 6832: and its filter priority 6832, so leftovers of a run that died
before restoring the link are recognised, removed, and never mistaken for the user's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.config.model import LinkConfig
from controller.link.errors import LinkError
from controller.link.state import (
    OUR_CHILD_HANDLE,
    OUR_FILTER_PREF,
    OUR_ROOT_HANDLE,
    InterfaceState,
)

Argv = tuple[str, ...]

ETHERNET_HEADER_BYTES = 14
ETHERNET_OVERHEAD_BYTES = 24  # preamble and start delimiter 8, FCS 4, inter-frame gap 12
TCP_IP_HEADER_BYTES = 52  # IPv4 20 + TCP 20 + the timestamp option 12 Linux sends by default
BURST_S = 0.0025  # tokens for 2.5 ms at the rate: 31 KB at 100 Mbit/s
MIN_BURST_FRAMES = 2
QUEUE_S = 0.020  # tbf's queue holds 20 ms at the rate ...
MIN_QUEUE_FRAMES = 16  # ... and at least this many full frames on slow links
NETEM_MIN_LIMIT_PACKETS = 1000  # netem's default queue length

# Classic BPF (linux/filter.h): ld rand; jge THRESHOLD ? pass : drop.
_LD_RAND = (0x20, 0, 0, (1 << 32) - 0x1000 + 56)  # BPF_LD|W|ABS, k = SKF_AD_OFF + SKF_AD_RANDOM
_JGE_K = 0x35  # BPF_JMP|BPF_JGE|BPF_K
_RET_K = 0x06  # BPF_RET|BPF_K
_TC_ACT_OK, _TC_ACT_SHOT = 0, 2


def wire_frame_bytes(mtu_bytes: int) -> int:
    """A full-size frame as the wire carries it: IP packet, Ethernet header and overhead."""
    return mtu_bytes + ETHERNET_HEADER_BYTES + ETHERNET_OVERHEAD_BYTES


def tcp_goodput_mbit(rate_mbit: float, mtu_bytes: int) -> float:
    """What one bulk TCP flow can carry over a link of this rate: its payload share of a frame."""
    return rate_mbit * (mtu_bytes - TCP_IP_HEADER_BYTES) / wire_frame_bytes(mtu_bytes)


@dataclass(frozen=True)
class Tbf:
    """A token bucket: the rate, the burst it lets through at line speed, and its queue (as the
    longest time a packet may wait)."""

    rate_bit_s: int
    burst_bytes: int
    latency_us: int

    @classmethod
    def for_rate(cls, rate_mbit: float, mtu_bytes: int) -> Tbf:
        rate = max(1, round(rate_mbit * 1e6))
        frame = wire_frame_bytes(mtu_bytes)
        burst = max(math.ceil(rate / 8 * BURST_S), MIN_BURST_FRAMES * frame)
        latency_s = max(QUEUE_S, MIN_QUEUE_FRAMES * frame * 8 / rate)
        return cls(rate, burst, math.ceil(latency_s * 1e6))

    def args(self) -> Argv:
        return (
            "tbf", "rate", f"{self.rate_bit_s}bit", "burst", str(self.burst_bytes),
            "latency", _time(self.latency_us),
        )  # fmt: skip


@dataclass(frozen=True)
class Netem:
    delay_us: int
    limit_packets: int

    @classmethod
    def for_delay(cls, delay_ms: float, rate_mbit: float | None, mtu_bytes: int) -> Netem:
        delay_us = round(delay_ms * 1000)
        limit = NETEM_MIN_LIMIT_PACKETS
        if rate_mbit is not None:
            # Every packet sent during one delay waits in netem: twice that, for bursts.
            in_flight = rate_mbit * 1e6 / 8 * delay_us / 1e6 / wire_frame_bytes(mtu_bytes)
            limit = max(limit, math.ceil(2 * in_flight))
        return cls(delay_us, limit)

    def args(self) -> Argv:
        return ("netem", "delay", _time(self.delay_us), "limit", str(self.limit_packets))


@dataclass(frozen=True)
class Loss:
    """Drop an arriving packet when a uniform 32-bit random number is below `threshold`."""

    threshold: int

    @classmethod
    def for_pct(cls, loss_pct: float) -> Loss:
        return cls(min(max(1, round(loss_pct / 100 * 2**32)), 2**32 - 1))

    @property
    def probability_pct(self) -> float:
        return self.threshold / 2**32 * 100

    def bytecode(self) -> str:
        program = (
            _LD_RAND,
            (_JGE_K, 0, 1, self.threshold),
            (_RET_K, 0, 0, _TC_ACT_OK),
            (_RET_K, 0, 0, _TC_ACT_SHOT),
        )
        return ",".join([str(len(program)), *(" ".join(map(str, insn)) for insn in program)])


@dataclass(frozen=True)
class EndPlan:
    """What to run on one end, in order, and what undoes it. Removal is safe after a partial
    apply: it deletes only qdiscs the plan adds (a foreign one was refused) and restores a value."""

    interface: str
    apply: tuple[Argv, ...]
    remove: tuple[Argv, ...]
    gso_max_segs_restore: int | None  # the value removal sets back, when the rate turned GSO off
    tbf: Tbf | None
    netem: Netem | None
    loss: Loss | None


def _time(us: int) -> str:
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def _tc_root(interface: str, handle: str, *args: str, parent: str = "root") -> Argv:
    where = ("root",) if parent == "root" else ("parent", parent)
    return ("tc", "qdisc", "replace", "dev", interface, *where, "handle", handle, *args)


_STAB = ("stab", "linklayer", "ethernet", "overhead", str(ETHERNET_OVERHEAD_BYTES))


def _egress(interface: str, tbf: Tbf | None, netem: Netem | None) -> tuple[Argv, ...]:
    if netem is not None and tbf is not None:
        return (
            _tc_root(interface, OUR_ROOT_HANDLE, *_STAB, *netem.args()),
            _tc_root(interface, OUR_CHILD_HANDLE, *tbf.args(), parent=f"{OUR_ROOT_HANDLE}1"),
        )
    if netem is not None:
        return (_tc_root(interface, OUR_ROOT_HANDLE, *_STAB, *netem.args()),)
    if tbf is not None:
        return (_tc_root(interface, OUR_ROOT_HANDLE, *_STAB, *tbf.args()),)
    return ()


def _gso(interface: str, segments: int) -> Argv:
    return ("ip", "link", "set", "dev", interface, "gso_max_segs", str(segments))


def plan_end(link: LinkConfig, state: InterfaceState) -> EndPlan:
    """The commands for one end. Leftovers of an earlier h2iot run go first; a root qdisc or an
    ingress hook someone else set up is refused (LinkError) rather than replaced."""
    name = state.name
    tbf = Tbf.for_rate(link.rate_mbit, state.mtu_bytes) if link.rate_mbit is not None else None
    netem = (
        Netem.for_delay(link.delay_ms, link.rate_mbit, state.mtu_bytes)
        if link.delay_ms > 0 and not link.relayed
        else None
    )
    loss = Loss.for_pct(link.loss_pct) if link.loss_pct > 0 else None
    shapes_egress = tbf is not None or netem is not None
    foreign = state.foreign_root
    if shapes_egress and foreign is not None:
        raise LinkError(
            f"{name} already has a root qdisc h2iot did not add ({foreign.kind} {foreign.handle}); "
            f"remove it first (tc qdisc del dev {name} root)"
        )
    if loss is not None and state.ingress is not None and not state.our_ingress:
        raise LinkError(
            f"{name} already has an {state.ingress.kind} qdisc h2iot did not add; "
            f"remove it first (tc qdisc del dev {name} {state.ingress.kind})"
        )
    # A leftover root means GSO may still be off from that run: what it found is lost, so the
    # device's own limit (the kernel's default) is what to restore.
    gso_before = (
        state.default_gso_max_segs
        if state.our_root and state.gso_max_segs == 1
        else state.gso_max_segs
    )
    del_root: Argv = ("tc", "qdisc", "del", "dev", name, "root", "handle", OUR_ROOT_HANDLE)
    del_ingress: Argv = ("tc", "qdisc", "del", "dev", name, "ingress")
    apply: list[Argv] = []
    if state.our_ingress:
        apply.append(del_ingress)
    if state.our_root:  # replaced by a fresh one: tc cannot change a qdisc's kind in place
        apply.append(del_root)
    if gso_before != state.gso_max_segs and tbf is None:
        apply.append(_gso(name, gso_before))
    apply += _egress(name, tbf, netem)
    remove: list[Argv] = []
    if tbf is not None:
        apply.append(_gso(name, 1))
        remove.append(_gso(name, gso_before))
    if shapes_egress:
        remove.append(del_root)
    if loss is not None:
        filter_: Argv = (
            "tc", "filter", "add", "dev", name, "ingress", "pref", str(OUR_FILTER_PREF),
            "protocol", "all", "bpf", "bytecode", loss.bytecode(), "da",
        )  # fmt: skip
        apply += [("tc", "qdisc", "add", "dev", name, "ingress"), filter_]
        remove.insert(0, del_ingress)
    return EndPlan(
        interface=name,
        apply=tuple(apply),
        remove=tuple(remove),
        gso_max_segs_restore=gso_before if tbf is not None else None,
        tbf=tbf,
        netem=netem,
        loss=loss,
    )


def removal_problems(plan: EndPlan, state: InterfaceState) -> list[str]:
    """What is still not as it was after `plan.remove` ran, judged from the interface's state."""
    problems = []
    if state.our_root:
        problems.append(f"{plan.interface}: h2iot's root qdisc is still there")
    if state.our_ingress:
        problems.append(f"{plan.interface}: h2iot's ingress filter is still there")
    restore = plan.gso_max_segs_restore
    if restore is not None and state.gso_max_segs != restore:
        problems.append(f"{plan.interface}: gso_max_segs is {state.gso_max_segs}, it was {restore}")
    return problems
