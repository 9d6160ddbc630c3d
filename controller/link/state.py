"""What a node's data interface looks like now, parsed from the JSON that `ip -j` and `tc -j`
print (iproute2 5.10 and later). Pure: text in, records out; ValueError on anything else."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OUR_ROOT_HANDLE = "6832:"
"""The handle of the root qdisc h2iot adds ("h2" in ASCII): how a later run recognises it."""
OUR_CHILD_HANDLE = "6833:"
OUR_FILTER_PREF = 6832
"""The priority of h2iot's ingress filter, its mark on the ingress hook."""
DEFAULT_HANDLE = "0:"
"""The kernel's own default root qdisc (noqueue, pfifo_fast, fq_codel, mq) has no handle."""
DEFAULT_GSO_MAX_SEGS = 65535  # GSO_MAX_SEGS, for kernels that do not print tso_max_segs
INGRESS_KINDS = ("ingress", "clsact")


@dataclass(frozen=True)
class Qdisc:
    kind: str
    handle: str
    parent: str  # "root" for the root qdisc


@dataclass(frozen=True)
class InterfaceState:
    """One interface: its size limits, queueing disciplines and ingress filters."""

    name: str
    mtu_bytes: int
    gso_max_segs: int
    tso_max_segs: int | None  # the device's own limit: what gso_max_segs defaults to
    addresses: tuple[str, ...]  # global-scope addresses, IPv4 first
    qdiscs: tuple[Qdisc, ...]
    ingress_filter_prefs: tuple[int, ...]

    @property
    def root(self) -> Qdisc | None:
        return next((q for q in self.qdiscs if q.parent == "root"), None)

    @property
    def ingress(self) -> Qdisc | None:
        return next((q for q in self.qdiscs if q.kind in INGRESS_KINDS), None)

    @property
    def our_root(self) -> bool:
        root = self.root
        return root is not None and root.handle == OUR_ROOT_HANDLE

    @property
    def foreign_root(self) -> Qdisc | None:
        """A root qdisc someone added by hand (neither the kernel's default nor ours)."""
        root = self.root
        if root is None or root.handle in (DEFAULT_HANDLE, OUR_ROOT_HANDLE):
            return None
        return root

    @property
    def our_ingress(self) -> bool:
        return self.ingress is not None and OUR_FILTER_PREF in self.ingress_filter_prefs

    @property
    def default_gso_max_segs(self) -> int:
        return self.tso_max_segs if self.tso_max_segs is not None else DEFAULT_GSO_MAX_SEGS


def _json_list(text: str, what: str) -> list[Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"{what} printed no JSON: {text.strip()[:80]!r}") from None
    if not isinstance(value, list):
        raise ValueError(f"{what} printed {type(value).__name__}, not a JSON list")
    return value


def parse_interface(addr_json: str, qdisc_json: str, filter_json: str, name: str) -> InterfaceState:
    """From `ip -j -d addr show dev NAME`, `tc -j -d qdisc show dev NAME` and
    `tc -j filter show dev NAME ingress`."""
    links = _json_list(addr_json, "ip addr show")
    link = next((item for item in links if item.get("ifname") == name), None)
    if link is None:
        raise ValueError(f"ip addr show lists no interface {name}")
    addresses = [
        (0 if info.get("family") == "inet" else 1, str(info["local"]))
        for info in link.get("addr_info", ())
        if info.get("scope") == "global" and "local" in info
    ]
    qdiscs = tuple(
        Qdisc(
            kind=str(item["kind"]),
            handle=str(item.get("handle", "")),
            parent="root" if item.get("root") else str(item.get("parent", "")),
        )
        for item in _json_list(qdisc_json, "tc qdisc show")
    )
    prefs = {
        int(item["pref"])
        for item in (_json_list(filter_json, "tc filter show") if filter_json.strip() else [])
        if "pref" in item
    }
    tso = link.get("tso_max_segs")
    return InterfaceState(
        name=name,
        mtu_bytes=int(link["mtu"]),
        gso_max_segs=int(link["gso_max_segs"]),
        tso_max_segs=int(tso) if tso is not None else None,
        addresses=tuple(address for _family, address in sorted(addresses)),
        qdiscs=qdiscs,
        ingress_filter_prefs=tuple(sorted(prefs)),
    )


def parse_route_device(route_json: str) -> str:
    """The interface of `ip -j route get ADDRESS` (`lo` for an address of this host)."""
    routes = _json_list(route_json, "ip route get")
    if not routes or "dev" not in routes[0]:
        raise ValueError("ip route get printed no route")
    return str(routes[0]["dev"])


def qdisc_facts(qdisc_json: str) -> list[dict[str, Any]]:
    """`tc -j -d qdisc show` as recorded in a run's manifest: kind, handle, parent, options and
    the size table, without counters."""
    keep = ("kind", "handle", "root", "parent", "options", "stab")
    return [
        {key: item[key] for key in keep if key in item}
        for item in _json_list(qdisc_json, "tc qdisc show")
    ]
