"""Link profiles: the client<->server data link shaped with tc for the length of a sweep.

- `plan_end(LinkConfig, InterfaceState)` (sans-IO): the exact tc/ip commands that shape one
  node's end of the link and those that undo them; `parse_interface` reads the interface's
  state from `ip -j` / `tc -j` output.
- `shaped_link(config, nodes)`: the context manager that applies both ends over the `Node` API
  and restores them on exit, yielding the facts a run's manifest records under "link".

Rate is a tbf with Ethernet framing overhead on each end's egress, loss a random-drop filter
on each end's ingress, delay netem on each egress where the kernel has netem.
"""

from __future__ import annotations

from controller.link.apply import shaped_link
from controller.link.commands import (
    EndPlan,
    Loss,
    Netem,
    Tbf,
    plan_end,
    removal_problems,
    tcp_goodput_mbit,
    wire_frame_bytes,
)
from controller.link.errors import LinkError
from controller.link.state import InterfaceState, Qdisc, parse_interface, parse_route_device

__all__ = [
    "EndPlan",
    "InterfaceState",
    "LinkError",
    "Loss",
    "Netem",
    "Qdisc",
    "Tbf",
    "parse_interface",
    "parse_route_device",
    "plan_end",
    "removal_problems",
    "shaped_link",
    "tcp_goodput_mbit",
    "wire_frame_bytes",
]
