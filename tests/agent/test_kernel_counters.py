"""The kernel's counters over a trial: the parsers over generated /proc texts (hypothesis), the
difference across wraps, and the reader against this machine's /proc, with exact counts in a
network namespace of the test's own where only its traffic exists."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import kernel_counters as kc
from agent.conditions import TrialWatch
from agent.proc_files import ProcFiles
from analysis.trial_columns import KERNEL_FIELDS
from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[2]
SOFTIRQ_ROWS = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "RCU")
U32 = st.integers(0, 2**32 - 1)

Softirqs = dict[str, dict[int, int]]


def softirqs_text(counts: Softirqs, extra: int = 0) -> str:
    """As the kernel prints it: `CPU%-8d` per possible CPU, `%12s:` then ` %10u` per CPU; with
    `extra` values past the header's columns on every row."""
    cpus = sorted(next(iter(counts.values())))
    lines = [" " * 20 + "".join(f"CPU{cpu:<8}" for cpu in cpus)]
    for row, per_cpu in counts.items():
        values = [per_cpu[cpu] for cpu in cpus] + [7] * extra
        lines.append(f"{row:>12}:" + "".join(f" {value:10}" for value in values))
    return "\n".join(lines) + "\n"


@st.composite
def softirq_counts(draw: st.DrawFn, cpus: list[int] | None = None) -> Softirqs:
    """Every row over some possible CPUs (a sparse map: CPU numbers with gaps)."""
    if cpus is None:
        cpus = sorted(draw(st.sets(st.integers(0, 127), min_size=1, max_size=8)))
    return {row: {cpu: draw(U32) for cpu in cpus} for row in SOFTIRQ_ROWS}


@given(counts=softirq_counts(), extra=st.integers(0, 2))
def test_softirqs_are_read_per_cpu_by_the_headers_names(counts: Softirqs, extra: int) -> None:
    assert kc.parse_softirqs(softirqs_text(counts, extra)) == counts
    net = {"NET_RX", "NET_TX"}  # what a snapshot parses: the same rows, the others left out
    assert kc.parse_softirqs(softirqs_text(counts, extra), net) == {
        row: values for row, values in counts.items() if row in net
    }


@st.composite
def softirq_trials(draw: st.DrawFn) -> tuple[Softirqs, Softirqs, Softirqs, list[int]]:
    """Start and end counts, each CPU's increment (its 32-bit counter may wrap), and the CPUs
    the node's agent may run on (a subset, maybe CPUs the file lacks)."""
    start = draw(softirq_counts())
    cpus = sorted(next(iter(start.values())))
    increments = draw(softirq_counts(cpus))
    end = {row: {c: (start[row][c] + increments[row][c]) % 2**32 for c in cpus} for row in start}
    own = draw(st.lists(st.sampled_from(cpus), min_size=1, unique=True))
    return start, end, increments, own + draw(st.lists(st.integers(128, 130), unique=True))


@given(trial=softirq_trials())
def test_softirqs_over_a_trial_sum_the_nodes_cpus_each_across_its_wrap(
    trial: tuple[Softirqs, Softirqs, Softirqs, list[int]],
) -> None:
    start, end, increments, cpus = trial
    work = kc.difference(
        kc.snapshot(softirqs_text(start), None, None, cpus),
        kc.snapshot(softirqs_text(end), None, None, cpus),
    )
    for name, row in kc.SOFTIRQ_FIELDS.items():
        assert work.counts[name] == sum(n for c, n in increments[row].items() if c in cpus)
    assert set(work.unavailable) == {*kc.SWITCH_FIELDS, *kc.SNMP_FIELDS}


def test_softirqs_of_none_of_the_nodes_cpus_are_unavailable() -> None:
    text = softirqs_text({row: {0: 1, 1: 2} for row in SOFTIRQ_ROWS})
    snap = kc.snapshot(text, None, None, cpus=(5,))
    assert "net_rx_softirqs" not in snap.lanes
    assert (
        snap.unavailable["net_rx_softirqs"] == "/proc/softirqs: no NET_RX count for the node's CPUs"
    )


COUNTER_NAMES = st.from_regex(r"[A-Z][A-Za-z]{1,14}", fullmatch=True)
WANTED = {"Udp": ("InDatagrams", "OutDatagrams", "RcvbufErrors"),
          "Tcp": ("InSegs", "OutSegs", "RetransSegs")}  # fmt: skip


@st.composite
def snmp_tables(draw: st.DrawFn) -> dict[str, dict[str, int]]:
    """Protocols in any order, each with counters of any names (the wanted ones among them,
    anywhere, where the protocol is Udp or Tcp) and values (MaxConn is -1)."""
    tables = {}
    protocols = draw(st.permutations(["Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite"]))
    for protocol in protocols[: draw(st.integers(0, len(protocols)))]:
        names = draw(st.lists(COUNTER_NAMES, unique=True, max_size=8))
        names = [n for n in names if n not in WANTED.get(protocol, ())]
        names = draw(st.permutations([*names, *WANTED.get(protocol, ())]))
        tables[protocol] = {name: draw(st.integers(-1, 2**64 - 1)) for name in names}
    return tables


def snmp_text(tables: dict[str, dict[str, int]]) -> str:
    lines = []
    for protocol, counters in tables.items():
        lines.append(f"{protocol}: " + " ".join(counters))
        lines.append(f"{protocol}: " + " ".join(str(v) for v in counters.values()))
    return "\n".join(lines) + "\n"


@given(tables=snmp_tables())
def test_snmp_is_read_by_name_whatever_the_order_and_extra_counters(
    tables: dict[str, dict[str, int]],
) -> None:
    assert kc.parse_snmp(snmp_text(tables)) == tables
    wanted = {"Udp", "Tcp"}  # what a snapshot parses: the same tables, the others left out
    assert kc.parse_snmp(snmp_text(tables), wanted) == {
        protocol: counters for protocol, counters in tables.items() if protocol in wanted
    }
    snap = kc.snapshot(None, snmp_text(tables), None)
    for name, (protocol, counter) in kc.SNMP_FIELDS.items():
        if protocol in tables:
            assert snap.lanes[name] == {"": tables[protocol][counter]}
        else:
            assert snap.unavailable[name] == f"/proc/net/snmp: no {protocol} {counter}"


def test_a_real_kernels_udp_row() -> None:
    text = (
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n"
        "Udp: 10 0 3 9 3 0\n"
    )
    assert kc.parse_snmp(text)["Udp"]["RcvbufErrors"] == 3
    assert kc.parse_snmp("Ip: 1\n") == {}


@given(text=st.text())
def test_no_text_makes_a_parser_raise(text: str) -> None:
    kc.parse_softirqs(text)
    kc.parse_snmp(text)
    kc.parse_status_switches(text)
    kc.snapshot(text, text, None)


@given(voluntary=st.integers(0, 2**63), involuntary=st.integers(0, 2**63))
def test_status_switches(voluntary: int, involuntary: int) -> None:
    text = (
        "Name:\tpython3\nVmHWM:\t  1024 kB\n"
        f"voluntary_ctxt_switches:\t{voluntary}\nnonvoluntary_ctxt_switches:\t{involuntary}\n"
    )
    assert kc.parse_status_switches(text) == (voluntary, involuntary)
    assert kc.parse_status_switches("voluntary_ctxt_switches:\t3\n") is None


def _single(name: str, value: int) -> kc.KernelSnapshot:
    return kc.KernelSnapshot({name: {"": value}})


@given(start=U32, increment=U32)
def test_a_32_bit_counter_counts_across_its_wrap(start: int, increment: int) -> None:
    end = (start + increment) % 2**32
    work = kc.difference(_single("tcp_segments_in", start), _single("tcp_segments_in", end))
    assert work.counts["tcp_segments_in"] == increment


@given(start=st.integers(2**32, 2**64 - 1), drop=st.integers(1, 2**32))
def test_a_64_bit_counter_that_went_down_was_reset(start: int, drop: int) -> None:
    name = "udp_datagrams_in"
    work = kc.difference(_single(name, start), _single(name, start - drop))
    assert work.counts["udp_datagrams_in"] is None
    assert "reset" in work.unavailable["udp_datagrams_in"]


def test_every_field_is_in_the_record_in_order() -> None:
    work = kc.difference(kc.snapshot(None, None, (1, 2)), kc.snapshot(None, None, (4, 2)))
    assert list(work.to_dict()) == list(kc.FIELDS)
    assert [work.counts[name] for name in kc.SWITCH_FIELDS] == [3, 0]


# Real I/O: this machine's /proc.


@pytest.mark.skipif(sys.platform != "linux", reason="reads Linux /proc")
def test_this_machine_has_every_counter() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    start = kc.read_snapshot(cpus)
    sum(range(100_000))
    work = kc.difference(start, kc.read_snapshot(cpus))
    assert work.unavailable == {}
    assert all(isinstance(count, int) and count >= 0 for count in work.counts.values())
    conditions = TrialWatch().end()
    assert all(count is not None for count in conditions.kernel.counts.values())
    files = ProcFiles()  # the same counters through files kept open
    kept = kc.difference(kc.read_snapshot(cpus, files=files), kc.read_snapshot(cpus, files=files))
    assert kept.unavailable == {} and None not in kept.counts.values()


def test_a_waited_for_childs_switches_are_the_processes_own() -> None:
    """The nghttp2 engine's tools run as children, reaped inside the trial: getrusage's
    RUSAGE_CHILDREN has their switches, and `own_switches` adds them."""
    before = kc.own_switches()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw
    subprocess.run(["sleep", "0.05"], check=True)
    grown = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw - children
    assert grown >= 1  # sleep(1) waits at least once
    assert kc.own_switches()[0] - before[0] >= grown


def test_another_process_is_read_from_its_status_until_it_is_gone() -> None:
    child = subprocess.Popen(["sleep", "5"])
    try:
        switches = kc.process_switches(child.pid)
        assert switches is not None and min(switches) >= 0
    finally:
        child.kill()
        child.wait()
    assert kc.process_switches(child.pid) is None


# Exact counts: in a network namespace of its own (a user namespace makes it without root), the
# test's traffic is all the UDP and TCP counters see. Softirqs are not per namespace.
_IN_NAMESPACE = r"""
import json, socket, sys, time
from agent import kernel_counters as kc

SENT, ECHOES, FLOOD = 40, 5, 200
start = kc.read_snapshot()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
for _ in range(SENT):
    udp.sendto(b"x" * 100, udp.getsockname())
for _ in range(SENT):
    udp.recv(200)
# A receive buffer far too small for the flood: the kernel drops what does not fit.
tiny = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tiny.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
tiny.bind(("127.0.0.1", 0))
tiny.setblocking(False)
for _ in range(FLOOD):
    udp.sendto(b"y" * 1000, tiny.getsockname())
received = 0
while True:
    try:
        tiny.recv(2000)
    except BlockingIOError:
        break
    received += 1
listener = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(listener.getsockname())
server, _ = listener.accept()
for _ in range(ECHOES):
    client.sendall(b"ping")
    server.recv(16)
    server.sendall(b"pong")
    client.recv(16)
    time.sleep(0.01)  # voluntary switches, and the delayed ACKs out of the way
client.close(); server.close(); listener.close()
deadline = time.monotonic() + 2
while True:  # the last ACK still in flight on loopback
    work = kc.difference(start, kc.read_snapshot())
    counts = work.counts
    if counts["tcp_segments_in"] == counts["tcp_segments_out"] or time.monotonic() > deadline:
        break
    time.sleep(0.01)
print(json.dumps({"work": work.to_dict(), "flood_received": received}))
"""


def test_a_namespaces_own_traffic_is_counted_exactly() -> None:
    require_tool("unshare", "ip")
    namespace = ["unshare", "--user", "--map-root-user", "--net"]
    argv = [*namespace, "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable, "-c",
            _IN_NAMESPACE]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    if done.returncode != 0 and not os.environ.get("CI") and "unshare" in done.stderr:
        pytest.skip(f"no user and network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    work, received = result["work"], result["flood_received"]
    assert 0 < received < 200  # the flood overflowed the tiny buffer, yet some got in
    assert work["udp_datagrams_out"] == 40 + 200
    assert work["udp_datagrams_in"] == 40 + received
    assert work["udp_rcvbuf_errors"] == 200 - received
    # Three for the handshake, a ping and a pong each round, four to close at the least.
    assert work["tcp_segments_out"] == work["tcp_segments_in"] >= 3 + 2 * 5 + 3
    assert work["tcp_retransmitted_segments"] == 0
    assert work["voluntary_ctx_switches"] >= 5
    assert work["net_rx_softirqs"] > 0  # loopback's packets are received in NET_RX


def test_the_columns_are_the_records_fields() -> None:
    """trials.csv's `<role>_<field>` columns (analysis.trial_columns) name exactly these."""
    assert tuple(column.name for column in KERNEL_FIELDS) == kc.FIELDS
