"""The kernel's work for a node over a trial: NET_RX and NET_TX softirqs on the node's CPUs, the
trial process's context switches, and the node's UDP and TCP counters.

Sans-IO core, thin reader. The parsers take a file's text and never raise on it: what a text
lacks is simply absent from their result, and the snapshot says why the field is missing. A
snapshot is read twice per trial by `agent.conditions` (before the marker rises and after it
falls, with its other cheap counters), and `difference` gives the counts over the trial.

- Softirqs: /proc/softirqs, one column per *possible* CPU (a gap in its `CPUn` header is a CPU
  the kernel cannot have, and columns are matched by that header, never by position), summed
  over the CPUs the agent may run on (its affinity: all of the node's unless taskset or a cpuset
  restricts it; the record's `cpus` lists them). Softirqs are the node's, any process's packets.
- Context switches: the trial process's, voluntary (it waited: I/O, a lock) and involuntary
  (preempted). By default getrusage of this process (every thread) and of the children it has
  waited for, so a C tool run and reaped inside the trial (nghttp, gtlsclient) counts; a
  process the agent does not wait for (nghttpd) is read from /proc/PID/status instead
  (`parse_status_switches`; the main thread's, which is nghttpd's only one).
- UDP and TCP: /proc/self/net/snmp, the counters of this process's network namespace, which is
  the node's where the node has one (a test bench in `ip netns`) and the machine's otherwise.
  Every socket in the namespace counts, other processes' traffic too.

Wrapping: per-CPU softirq counts are 32-bit in every kernel, the snmp counters are `unsigned
long` (32-bit on a 32-bit Raspberry Pi OS kernel, 64-bit on a 64-bit one). A counter that reads
lower at the end than at the start, both below 2^32, wrapped once (a trial is far shorter than
the time to wrap twice) and counts modulo 2^32; one that went down from above 2^32 was reset, and
the field is None with the reason.
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent.proc_files import ProcFiles

_WRAP = 2**32
SOFTIRQ_FIELDS: Mapping[str, str] = {"net_rx_softirqs": "NET_RX", "net_tx_softirqs": "NET_TX"}
"""Field -> the row of /proc/softirqs it sums over the node's CPUs."""
SWITCH_FIELDS = ("voluntary_ctx_switches", "involuntary_ctx_switches")
SNMP_FIELDS: Mapping[str, tuple[str, str]] = {
    "udp_datagrams_in": ("Udp", "InDatagrams"),
    "udp_datagrams_out": ("Udp", "OutDatagrams"),
    "udp_rcvbuf_errors": ("Udp", "RcvbufErrors"),
    "tcp_segments_in": ("Tcp", "InSegs"),
    "tcp_segments_out": ("Tcp", "OutSegs"),
    "tcp_retransmitted_segments": ("Tcp", "RetransSegs"),
}
"""Field -> (protocol, counter) in /proc/net/snmp."""
FIELDS = (*SOFTIRQ_FIELDS, *SWITCH_FIELDS, *SNMP_FIELDS)
"""Every count a trial's record has, in its columns' order."""
# What a snapshot parses of its files: the rest (Ip, Icmp, the other softirqs) is most of their
# text and none of a record.
_SOFTIRQ_ROWS = frozenset(SOFTIRQ_FIELDS.values())
_SNMP_PROTOCOLS = frozenset(protocol for protocol, _ in SNMP_FIELDS.values())


def parse_softirqs(text: str, rows: Collection[str] | None = None) -> dict[str, dict[int, int]]:
    """/proc/softirqs -> {row: {cpu: count}}, CPUs by the header's `CPUn` names; a row's
    values past the header's columns, or not numbers, are left out; so are rows not in `rows`
    (None: every row)."""
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = [_cpu_number(name) for name in lines[0].split()]
    found: dict[str, dict[int, int]] = {}
    for line in lines[1:]:
        name, colon, rest = line.partition(":")
        name = name.strip()
        if not colon or (rows is not None and name not in rows):
            continue
        found[name] = {
            cpu: int(value)
            for cpu, value in zip(cpus, rest.split(), strict=False)
            if cpu is not None and value.isdigit()
        }
    return found


def _cpu_number(name: str) -> int | None:
    digits = name.removeprefix("CPU")
    return int(digits) if name.startswith("CPU") and digits.isdigit() else None


def parse_snmp(text: str, protocols: Collection[str] | None = None) -> dict[str, dict[str, int]]:
    """/proc/net/snmp -> {protocol: {counter: value}}: each protocol's header line of names is
    followed by its line of values; names without a value (or not numbers) are left out; so are
    protocols not in `protocols` (None: every one)."""
    names: dict[str, list[str]] = {}
    tables: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        protocol, colon, rest = line.partition(":")
        if not colon or (protocols is not None and protocol not in protocols):
            continue
        words = rest.split()
        if protocol not in names:
            names[protocol] = words
            continue
        tables[protocol] = {
            name: int(value)
            for name, value in zip(names.pop(protocol), words, strict=False)
            if value.lstrip("-").isdigit()
        }
    return tables


def parse_status_switches(text: str) -> tuple[int, int] | None:
    """/proc/PID/status -> (voluntary, involuntary) context switches; None without them."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        value = value.strip()
        if name in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches") and value.isdigit():
            found[name] = int(value)
    if len(found) != 2:
        return None
    return found["voluntary_ctxt_switches"], found["nonvoluntary_ctxt_switches"]


@dataclass(frozen=True)
class KernelSnapshot:
    """Counters at one instant: per field, its values by lane (a softirq's CPU; "" for a
    single counter), so that each lane wraps on its own. A field it could not read is absent,
    with the reason in `unavailable`."""

    lanes: Mapping[str, Mapping[str, int]]
    unavailable: Mapping[str, str] = field(default_factory=dict)


def snapshot(
    softirqs: str | None,
    snmp: str | None,
    switches: tuple[int, int] | None,
    cpus: Collection[int] | None = None,
) -> KernelSnapshot:
    """A snapshot from the files' texts (None: unreadable) and the process's switches, the
    softirqs summed over `cpus` (None: every CPU listed)."""
    lanes: dict[str, dict[str, int]] = {}
    missing: dict[str, str] = {}
    rows = parse_softirqs(softirqs or "", _SOFTIRQ_ROWS)
    for name, row in SOFTIRQ_FIELDS.items():
        counts = {f"cpu{c}": n for c, n in rows.get(row, {}).items() if cpus is None or c in cpus}
        if counts:
            lanes[name] = counts
        else:
            missing[name] = f"/proc/softirqs: no {row} count for the node's CPUs"
    tables = parse_snmp(snmp or "", _SNMP_PROTOCOLS)
    for name, (protocol, counter) in SNMP_FIELDS.items():
        value = tables.get(protocol, {}).get(counter)
        if value is None:
            missing[name] = f"/proc/net/snmp: no {protocol} {counter}"
        else:
            lanes[name] = {"": value}
    if switches is None:
        missing.update(dict.fromkeys(SWITCH_FIELDS, "the process's context switches: unread"))
    else:
        lanes.update({name: {"": n} for name, n in zip(SWITCH_FIELDS, switches, strict=True)})
    return KernelSnapshot(lanes, missing)


@dataclass(frozen=True)
class KernelWork:
    """What the kernel did over a trial: each of FIELDS as a count, None where unknown (the
    reason in `unavailable`)."""

    counts: Mapping[str, int | None]
    unavailable: Mapping[str, str]

    def to_dict(self) -> dict[str, int | None]:
        return {name: self.counts.get(name) for name in FIELDS}


def _delta(start: int, end: int) -> int | None:
    if end >= start:
        return end - start
    return end - start + _WRAP if start < _WRAP else None


def difference(start: KernelSnapshot, end: KernelSnapshot) -> KernelWork:
    """The counts from `start` to `end` (pure): each field's lanes that both have, summed."""
    missing = {**start.unavailable, **end.unavailable}
    counts: dict[str, int | None] = {}
    for name in FIELDS:
        before, after = start.lanes.get(name), end.lanes.get(name)
        if before is None or after is None:
            counts[name] = None
            continue
        deltas = [_delta(before[lane], after[lane]) for lane in before.keys() & after.keys()]
        if not deltas:
            counts[name] = None
            missing[name] = "no CPU counted at both readings"
        elif None in deltas:
            counts[name] = None
            missing[name] = "a counter went down (reset, not a 32-bit wrap)"
        else:
            counts[name] = sum(d for d in deltas if d is not None)
    return KernelWork(counts, missing)


def own_switches() -> tuple[int, int]:
    """This process's (voluntary, involuntary) context switches and its waited-for children's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_nvcsw + children.ru_nvcsw, own.ru_nivcsw + children.ru_nivcsw


def process_switches(pid: int, root: Path = Path("/")) -> tuple[int, int] | None:
    """Another process's (voluntary, involuntary) switches, None once it is gone."""
    try:
        return parse_status_switches((root / f"proc/{pid}/status").read_text())
    except OSError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def read_snapshot(
    cpus: Collection[int] | None = None,
    switches: Callable[[], tuple[int, int] | None] = own_switches,
    root: Path = Path("/"),
    files: ProcFiles | None = None,
) -> KernelSnapshot:
    """The counters now: two small files (through `files`, kept open, where given) and the
    process's switches."""
    read = _read if files is None else files.text_or_none
    return snapshot(
        read(root / "proc/softirqs"), read(root / "proc/self/net/snmp"), switches(), cpus
    )
