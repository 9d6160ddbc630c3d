"""Link profiles: the tc/ip command builder exhaustively, then shaping for real on the data link
between two network namespaces (tests.netns): the rate TCP gets, the loss UDP sees, and the
interfaces exactly as they were afterwards."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config.model import Config, LinkConfig, NodeConfig
from controller.errors import ConfigError
from controller.link import (
    InterfaceState,
    LinkError,
    Loss,
    Qdisc,
    Tbf,
    parse_interface,
    parse_route_device,
    plan_end,
    removal_problems,
    shaped_link,
    tcp_goodput_mbit,
)
from controller.nodes.connect import connect
from controller.nodes.node import Node
from controller.nodes.records import ClockOffset, CommandResult
from controller.nodes.transport import LocalTransport, Transport
from tests.conftest import require_tool
from tests.netns import Testbed, require_root

pytest_plugins = ["tests.netns.fixtures"]

# What `ip -j -d addr show dev data0`, `tc -j -d qdisc show dev data0` and
# `tc -j filter show dev data0 ingress` print for a fresh veth end on this kernel.
FRESH_ADDR = json.dumps([{
    "ifname": "data0", "mtu": 1500, "qdisc": "noqueue", "operstate": "UP",
    "gso_max_size": 65536, "gso_max_segs": 65535, "tso_max_size": 524280, "tso_max_segs": 65535,
    "addr_info": [
        {"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"},
        {"family": "inet", "local": "10.78.0.1", "prefixlen": 24, "scope": "global"},
    ],
}])  # fmt: skip
FRESH_QDISCS = '[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]'
SHAPED_QDISCS = json.dumps([
    {"kind": "tbf", "handle": "6832:", "root": True, "refcnt": 3,
     "options": {"rate": 12500000, "burst": "31237b/1", "lat": 20001, "linklayer": "ethernet"},
     "stab": {"linklayer": "ethernet", "overhead": 24}},
    {"kind": "ingress", "handle": "ffff:", "parent": "ffff:fff1", "options": {}},
])  # fmt: skip
OUR_FILTER = '[{"protocol":"all","pref":6832,"kind":"bpf","chain":0}]'

RATE_100 = (
    "tc", "qdisc", "replace", "dev", "data0", "root", "handle", "6832:",
    "stab", "linklayer", "ethernet", "overhead", "24",
    "tbf", "rate", "100000000bit", "burst", "31250", "latency", "20ms",
)  # fmt: skip
GSO_OFF = ("ip", "link", "set", "dev", "data0", "gso_max_segs", "1")
GSO_BACK = ("ip", "link", "set", "dev", "data0", "gso_max_segs", "65535")
DEL_ROOT = ("tc", "qdisc", "del", "dev", "data0", "root", "handle", "6832:")
DEL_INGRESS = ("tc", "qdisc", "del", "dev", "data0", "ingress")
ADD_INGRESS = ("tc", "qdisc", "add", "dev", "data0", "ingress")
LOSS_10_BYTECODE = "4,32 0 0 4294963256,53 0 1 429496730,6 0 0 0,6 0 0 2"
FILTER_10 = (
    "tc", "filter", "add", "dev", "data0", "ingress", "pref", "6832", "protocol", "all",
    "bpf", "bytecode", LOSS_10_BYTECODE, "da",
)  # fmt: skip


def fresh(**changes: object) -> InterfaceState:
    state = parse_interface(FRESH_ADDR, FRESH_QDISCS, "[]", "data0")
    return replace(state, **changes)


# --- the interface's state -------------------------------------------------------------------


def test_a_fresh_interface_parses_with_its_limits_and_global_addresses_only():
    state = fresh()
    assert (state.mtu_bytes, state.gso_max_segs, state.tso_max_segs) == (1500, 65535, 65535)
    assert state.addresses == ("10.78.0.1",)
    assert state.root == Qdisc("noqueue", "0:", "root")
    assert state.ingress is None
    assert not (state.our_root or state.our_ingress) and state.foreign_root is None


def test_a_shaped_interface_is_recognised_as_ours():
    state = parse_interface(FRESH_ADDR, SHAPED_QDISCS, OUR_FILTER, "data0")
    assert state.our_root and state.our_ingress and state.foreign_root is None
    assert state.ingress == Qdisc("ingress", "ffff:", "ffff:fff1")


def test_someone_elses_qdiscs_are_foreign():
    qdiscs = '[{"kind":"htb","handle":"1:","root":true},{"kind":"clsact","handle":"ffff:"}]'
    state = parse_interface(FRESH_ADDR, qdiscs, '[{"pref":49152,"kind":"u32"}]', "data0")
    assert state.foreign_root == Qdisc("htb", "1:", "root")
    assert state.ingress is not None and not state.our_ingress


def test_an_old_kernel_without_tso_max_segs_defaults_to_gso_max_segs():
    old = json.loads(FRESH_ADDR)
    del old[0]["tso_max_segs"]
    state = parse_interface(json.dumps(old), FRESH_QDISCS, "", "data0")
    assert state.tso_max_segs is None and state.default_gso_max_segs == 65535


@pytest.mark.parametrize(
    ("addr", "message"),
    [
        ("Device not found", "ip addr show printed no JSON"),
        ('{"ifname": "data0"}', "not a JSON list"),
        ('[{"ifname": "eth0", "mtu": 1500}]', "no interface data0"),
    ],
)
def test_unreadable_output_is_a_value_error(addr: str, message: str):
    with pytest.raises(ValueError, match=message):
        parse_interface(addr, FRESH_QDISCS, "[]", "data0")


def test_route_device():
    assert parse_route_device('[{"dst":"10.78.0.2","dev":"data0","prefsrc":"10.78.0.1"}]') == (
        "data0"
    )
    assert parse_route_device('[{"type":"local","dst":"10.78.0.1","dev":"lo"}]') == "lo"
    with pytest.raises(ValueError, match="no route"):
        parse_route_device("[]")


# --- the commands ----------------------------------------------------------------------------


def test_the_studys_fastethernet_is_a_tbf_with_ethernet_overhead_and_gso_off():
    plan = plan_end(LinkConfig(rate_mbit=100), fresh())
    assert plan.apply == (RATE_100, GSO_OFF)
    assert plan.remove == (GSO_BACK, DEL_ROOT)
    assert plan.gso_max_segs_restore == 65535
    assert plan.tbf == Tbf(rate_bit_s=100_000_000, burst_bytes=31_250, latency_us=20_000)
    assert plan.netem is None and plan.loss is None
    # 1448 B of payload in each 1538 B the wire carries.
    assert tcp_goodput_mbit(100, 1500) == pytest.approx(94.148, abs=1e-3)


def test_loss_is_a_random_drop_filter_on_the_ingress():
    plan = plan_end(LinkConfig(loss_pct=10), fresh())
    assert plan.apply == (ADD_INGRESS, FILTER_10)
    assert plan.remove == (DEL_INGRESS,)
    assert plan.gso_max_segs_restore is None
    assert plan.loss is not None and plan.loss.probability_pct == pytest.approx(10, abs=1e-7)


def test_rate_and_loss_together_undo_in_reverse():
    plan = plan_end(LinkConfig(rate_mbit=100, loss_pct=10), fresh())
    assert plan.apply == (RATE_100, GSO_OFF, ADD_INGRESS, FILTER_10)
    assert plan.remove == (DEL_INGRESS, GSO_BACK, DEL_ROOT)


def test_delay_is_netem_and_a_rate_goes_beneath_it():
    delay = plan_end(LinkConfig(delay_ms=25), fresh())
    netem_root = (
        "tc", "qdisc", "replace", "dev", "data0", "root", "handle", "6832:",
        "stab", "linklayer", "ethernet", "overhead", "24",
        "netem", "delay", "25ms", "limit", "1000",
    )  # fmt: skip
    assert delay.apply == (netem_root,)
    assert delay.remove == (DEL_ROOT,)
    both = plan_end(LinkConfig(rate_mbit=100, delay_ms=100), fresh())
    # 100 ms at 100 Mbit/s is 813 full frames in flight; netem holds twice that.
    assert both.netem is not None and both.netem.limit_packets == 1626
    assert both.apply == (
        (*netem_root[:-3], "100ms", "limit", "1626"),
        ("tc", "qdisc", "replace", "dev", "data0", "parent", "6832:1", "handle", "6833:",
         *RATE_100[13:]),
        GSO_OFF,
    )  # fmt: skip
    assert both.remove == (GSO_BACK, DEL_ROOT)
    assert plan_end(LinkConfig(delay_ms=0.25), fresh()).apply[0][-3] == "250us"


def test_slow_links_keep_a_burst_of_two_frames_and_a_queue_of_sixteen():
    tbf = Tbf.for_rate(1, 1500)
    assert tbf.burst_bytes == 2 * 1538
    assert tbf.latency_us == 196_864  # 16 frames of 1538 B at 1 Mbit/s
    assert Tbf.for_rate(0.5, 1500).args()[2] == "500000bit"
    assert Tbf.for_rate(1000, 9000).args() == (
        "tbf", "rate", "1000000000bit", "burst", "312500", "latency", "20ms",
    )  # fmt: skip


def test_leftovers_of_a_dead_run_are_removed_first_and_gso_goes_back_to_the_default():
    leftover = parse_interface(FRESH_ADDR, SHAPED_QDISCS, OUR_FILTER, "data0")
    leftover = replace(leftover, gso_max_segs=1)
    again = plan_end(LinkConfig(rate_mbit=100), leftover)
    assert again.apply == (DEL_INGRESS, DEL_ROOT, RATE_100, GSO_OFF)
    assert again.remove == (GSO_BACK, DEL_ROOT)
    only_loss = plan_end(LinkConfig(loss_pct=10), leftover)
    assert only_loss.apply == (DEL_INGRESS, DEL_ROOT, GSO_BACK, ADD_INGRESS, FILTER_10)
    assert only_loss.remove == (DEL_INGRESS,)


def test_someone_elses_qdiscs_are_refused_not_replaced():
    htb = fresh(qdiscs=(Qdisc("htb", "1:", "root"),))
    with pytest.raises(LinkError, match=r"data0 already has a root qdisc h2iot did not add"):
        plan_end(LinkConfig(rate_mbit=100), htb)
    assert plan_end(LinkConfig(loss_pct=1), htb).apply == (ADD_INGRESS, *_filter_for(1))
    ingress = fresh(qdiscs=(*fresh().qdiscs, Qdisc("ingress", "ffff:", "ffff:fff1")))
    with pytest.raises(LinkError, match=r"tc qdisc del dev data0 ingress"):
        plan_end(LinkConfig(loss_pct=1), ingress)
    assert plan_end(LinkConfig(rate_mbit=10), ingress).apply[1] == GSO_OFF


def _filter_for(loss_pct: float) -> tuple[tuple[str, ...]]:
    bytecode = Loss.for_pct(loss_pct).bytecode()
    return ((*FILTER_10[:-2], bytecode, "da"),)


@given(st.floats(min_value=1e-6, max_value=99.999999, allow_nan=False))
def test_the_drop_threshold_is_the_asked_probability_to_32_bits(loss_pct: float):
    loss = Loss.for_pct(loss_pct)
    assert 1 <= loss.threshold < 2**32
    assert loss.probability_pct == pytest.approx(loss_pct, abs=100 / 2**32)
    words = loss.bytecode().split(",")
    assert words[0] == "4" and words[2] == f"53 0 1 {loss.threshold}"


@given(
    rate=st.none() | st.floats(min_value=0.01, max_value=100_000),
    loss=st.sampled_from([0.0, 0.5, 10.0, 99.0]),
    delay=st.sampled_from([0.0, 0.1, 20.0]),
    mtu=st.integers(min_value=576, max_value=9000),
    gso=st.integers(min_value=1, max_value=65535),
    leftover=st.booleans(),
)
def test_every_plan_is_undone_by_its_removal(
    rate: float | None, loss: float, delay: float, mtu: int, gso: int, leftover: bool
):
    """A model of the interface (root, ingress, gso_max_segs) runs apply then remove: what
    the interface ends with is its kernel default, with gso_max_segs as found (or, after a dead
    run left GSO off, the device's default)."""
    link = LinkConfig(rate_mbit=rate, loss_pct=loss, delay_ms=delay)
    qdiscs = json.loads(SHAPED_QDISCS) if leftover else json.loads(FRESH_QDISCS)
    state = parse_interface(
        FRESH_ADDR, json.dumps(qdiscs), OUR_FILTER if leftover else "[]", "data0"
    )
    state = replace(state, mtu_bytes=mtu, gso_max_segs=gso)
    plan = plan_end(link, state)
    model = _Model(root="ours" if leftover else "default", ingress=leftover, gso=gso)
    for argv in plan.apply:
        assert argv[argv.index("dev") + 1] == "data0"
        model.run(argv, strict=True)
    assert model.root == ("ours" if rate is not None or delay > 0 else "default")
    assert model.ingress == (loss > 0)
    if rate is not None:
        assert model.gso == 1
        assert plan.tbf is not None and plan.tbf.burst_bytes >= 2 * (mtu + 38)
    for argv in plan.remove:
        model.run(argv, strict=False)
    expected_gso = 65535 if leftover and gso == 1 else gso
    assert (model.root, model.ingress, model.gso) == ("default", False, expected_gso)
    after = replace(state, qdiscs=(Qdisc("noqueue", "0:", "root"),), ingress_filter_prefs=())
    assert removal_problems(plan, replace(after, gso_max_segs=model.gso)) == []


class _Model:
    """The part of an interface the plans touch, changed as tc and ip would change it."""

    def __init__(self, root: str, ingress: bool, gso: int) -> None:
        self.root, self.ingress, self.gso = root, ingress, gso

    def run(self, argv: tuple[str, ...], *, strict: bool) -> None:
        ok = True
        match argv:
            case ("tc", "qdisc", "replace", "dev", _, "root", "handle", "6832:", *_):
                ok = self.root != "foreign"
                self.root = "ours" if ok else self.root
            case ("tc", "qdisc", "replace", "dev", _, "parent", "6832:1", *_):
                ok = self.root == "ours"
            case ("tc", "qdisc", "del", "dev", _, "root", "handle", "6832:"):
                ok = self.root == "ours"
                self.root = "default" if ok else self.root
            case ("tc", "qdisc", "add", "dev", _, "ingress"):
                ok, self.ingress = not self.ingress, True
            case ("tc", "qdisc", "del", "dev", _, "ingress"):
                ok, self.ingress = self.ingress, False
            case ("tc", "filter", "add", "dev", _, "ingress", *_):
                ok = self.ingress
            case ("ip", "link", "set", "dev", _, "gso_max_segs", value):
                self.gso = int(value)
            case _:
                pytest.fail(f"unexpected command {argv}")
        assert ok or not strict, argv


def test_removal_problems_name_what_is_left():
    plan = plan_end(LinkConfig(rate_mbit=100, loss_pct=1), fresh())
    left = parse_interface(FRESH_ADDR, SHAPED_QDISCS, OUR_FILTER, "data0")
    assert removal_problems(plan, replace(left, gso_max_segs=1)) == [
        "data0: h2iot's root qdisc is still there",
        "data0: h2iot's ingress filter is still there",
        "data0: gso_max_segs is 1, it was 65535",
    ]


# --- refusals that need no network namespace --------------------------------------------------


def _local_nodes() -> dict[str, Node]:
    return {role: Node(LocalTransport(f"{role} (local)")) for role in ("client", "server")}


def test_local_nodes_without_a_data_interface_are_refused():
    config = Config(link=LinkConfig(rate_mbit=100))
    with pytest.raises(ConfigError) as caught, shaped_link(config, _local_nodes()):
        pytest.fail("shaped loopback")
    message = str(caught.value)
    assert message.startswith("nodes.client.data_interface: [link] shapes the client<->server")
    assert "local nodes talk over loopback" in message and "\n" not in message


class _AsNobody(LocalTransport):
    """Runs each command as the unprivileged user nobody (a real process, not a stand-in)."""

    def run(self, command: str, timeout_s: float) -> CommandResult:
        as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c"
        return super().run(f"exec {as_nobody} {shlex.quote(command)}", timeout_s)


def test_shaping_without_root_is_refused_in_one_line():
    require_root()  # to become nobody
    require_tool("setpriv")
    local = NodeConfig(role="client", data_interface="lo")
    config = Config(client=local, server=replace(local, role="server"), link=LinkConfig(loss_pct=1))
    nodes = {role: Node(_AsNobody(f"{role} (local)")) for role in ("client", "server")}
    with pytest.raises(ConfigError) as caught, shaped_link(config, nodes):
        pytest.fail("shaped without root")
    assert str(caught.value) == (
        "link: shaping the data link needs root on client (local) (tc and ip change lo); "
        "run h2iot as root or allow passwordless sudo"
    )


def test_an_unshaped_profile_touches_nothing():
    with shaped_link(Config(), _local_nodes()) as facts:
        assert facts == {"shaped": False}


def test_the_sweep_cli_refuses_to_shape_loopback_in_one_line(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "controller.cli", "sweep", "--no-dashboard", "--out",
         str(tmp_path), "--set", "link.rate_mbit=100", "--set", "run.idle_baseline_s=0.1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("h2iot: error: nodes.client.data_interface: [link] shapes")


# --- for real, on the data link between two namespaces ----------------------------------------

PORT = 47_011
RUN_S = 1.5
SKIP_S = 0.3  # slow start and the bucket's first burst
DATAGRAMS = 20_000

TCP_RECEIVER = f"""
import json, socket, sys, time
server = socket.create_server((sys.argv[1], {PORT}))
server.settimeout(20)
conn, _ = server.accept()
buf = bytearray(1 << 20)
marks = []
total = 0
while n := conn.recv_into(buf):
    total += n
    marks.append((time.monotonic(), total))
start = next(m for m in marks if m[0] - marks[0][0] >= {SKIP_S})
end = marks[-1]
print(json.dumps({{"mbit": (end[1] - start[1]) * 8 / (end[0] - start[0]) / 1e6}}))
"""
TCP_SENDER = f"""
import socket, sys, time
deadline = time.monotonic() + 10
while True:
    try:
        sock = socket.create_connection((sys.argv[1], {PORT}), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
chunk = bytes(65536)
end = time.monotonic() + {RUN_S}
while time.monotonic() < end:
    sock.sendall(chunk)
sock.close()
"""
UDP_RECEIVER = f"""
import socket, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE: past rmem_max
sock.bind((sys.argv[1], {PORT}))
sock.settimeout(10)
count = 0
try:
    while True:
        sock.recv(2048)
        count += 1
        sock.settimeout(1)
except TimeoutError:
    pass
print(count)
"""
UDP_SENDER = f"""
import socket, sys, time
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
time.sleep(0.3)
for i in range({DATAGRAMS}):
    sock.sendto(b"x" * 64, (sys.argv[1], {PORT}))
    if i % 100 == 99:
        time.sleep(0.001)
"""


def _between(testbed: Testbed, receiver: str, sender: str, receive: str, send: str) -> str:
    """Run a receiver in one namespace and a sender in the other; the receiver's output."""
    address = testbed.hosts[receiver].data_address
    assert address is not None
    out: list[str] = []
    thread = threading.Thread(
        target=lambda: out.append(
            testbed.exec_in(receiver, [sys.executable, "-c", receive, address])
        )
    )
    thread.start()
    testbed.exec_in(sender, [sys.executable, "-c", send, address])
    thread.join(timeout=30)
    assert out, "the receiver printed nothing"
    return out[0]


def _goodput_mbit(testbed: Testbed, receiver: str, sender: str) -> float:
    return float(json.loads(_between(testbed, receiver, sender, TCP_RECEIVER, TCP_SENDER))["mbit"])


def _overlimits(testbed: Testbed, role: str) -> int:
    """How often the role's egress bucket held a packet back for want of tokens."""
    out = testbed.exec_in(role, ["tc", "-s", "-j", "qdisc", "show", "dev", "data0", "root"])
    return int(json.loads(out)[0]["overlimits"])


ATTEMPTS = 3


def _assert_rate_held(testbed: Testbed, receiver: str, sender: str, bound_mbit: float) -> float:
    """The shaper holds a flow at its rate: never above it (a loaded machine only slows a flow,
    so that bound is strict on every attempt), with the sender's bucket the bottleneck, and close
    to it on the best of a few attempts (a busy CPU makes a Python receiver fall behind, and
    the bucket's timer fire late, on one attempt, not the capacity low on all)."""
    attempts = []
    for _ in range(ATTEMPTS):
        held = _overlimits(testbed, sender)
        goodput = _goodput_mbit(testbed, receiver, sender)
        attempts.append(goodput)
        print(f"{sender}->{receiver}: {goodput:.2f} Mbit/s of {bound_mbit:.2f}")
        assert goodput <= bound_mbit * 1.03
        assert _overlimits(testbed, sender) > held, "the sender's bucket never held a packet back"
        if goodput >= bound_mbit * 0.95:
            break
    assert max(attempts) == pytest.approx(bound_mbit, rel=0.05), attempts
    return max(attempts)


def _snapshot(testbed: Testbed) -> dict[str, tuple[object, ...]]:
    """What shaping may change on each end: qdiscs (without counters) and gso_max_segs."""
    snap = {}
    for role in ("client", "server"):
        qdiscs = json.loads(
            testbed.exec_in(role, ["tc", "-j", "-d", "qdisc", "show", "dev", "data0"])
        )
        link = json.loads(testbed.exec_in(role, ["ip", "-j", "-d", "link", "show", "dev", "data0"]))
        filters = testbed.exec_in(role, ["tc", "-j", "filter", "show", "dev", "data0", "ingress"])
        snap[role] = (
            [(q["kind"], q["handle"], q.get("options")) for q in qdiscs],
            link[0]["gso_max_segs"],
            json.loads(filters or "[]"),
        )
    return snap


def _config(testbed: Testbed, **link: float) -> Config:
    def node(role: str) -> NodeConfig:
        host = testbed.hosts[role]
        return NodeConfig(
            role=role,
            host=host.address,
            user=host.user,
            key=host.key,
            known_hosts=host.known_hosts,
            address=testbed.server.data_address or "",
            data_interface=testbed.data_interface,
        )

    return Config(client=node("client"), server=node("server"), link=LinkConfig(**link))


@pytest.fixture(scope="module")
def ends(netns_testbed: Testbed) -> Iterator[dict[str, Node]]:
    require_tool("tc")
    config = _config(netns_testbed)
    nodes = {role: connect(config.node(role)) for role in ("client", "server")}
    yield nodes
    for node in nodes.values():
        node.close()


@pytest.mark.quiet
def test_the_rate_holds_both_ways_and_removal_restores_both_ends(
    netns_testbed: Testbed, ends: dict[str, Node]
):
    before = _snapshot(netns_testbed)
    config = _config(netns_testbed, rate_mbit=100)
    bound = tcp_goodput_mbit(100, 1500)
    with shaped_link(config, ends) as facts:
        _assert_rate_held(netns_testbed, "client", "server", bound)
        _assert_rate_held(netns_testbed, "server", "client", bound)
    assert _snapshot(netns_testbed) == before
    client = facts["nodes"]["client"]
    assert facts["shaped"] and facts["rate_mbit"] == 100
    assert client["interface"] == "data0" and client["gso_max_segs"] == 1
    (root,) = [q for q in client["qdiscs"] if q.get("root")]
    assert root["kind"] == "tbf" and root["handle"] == "6832:"
    assert root["stab"] == {"linklayer": "ethernet", "overhead": 24}
    assert root["options"]["rate"] == 12_500_000  # bytes/s
    assert client["before"] == {"root_qdisc": "noqueue", "gso_max_segs": 65535,
                                "h2iot_leftovers": False}  # fmt: skip
    assert client["tcp_goodput_bound_mbit"] == pytest.approx(bound)


def test_a_slower_rate_is_held_too(netns_testbed: Testbed, ends: dict[str, Node]):
    with shaped_link(_config(netns_testbed, rate_mbit=20), ends):
        _assert_rate_held(netns_testbed, "client", "server", tcp_goodput_mbit(20, 1500))


def _ingress_drops(testbed: Testbed, role: str) -> int:
    out = testbed.exec_in(role, ["tc", "-s", "-j", "qdisc", "show", "dev", "data0", "ingress"])
    return int(json.loads(out)[0]["drops"])


@pytest.mark.quiet
def test_loss_drops_the_asked_share_on_each_ends_ingress(
    netns_testbed: Testbed, ends: dict[str, Node]
):
    before = _snapshot(netns_testbed)
    with shaped_link(_config(netns_testbed, loss_pct=10), ends) as facts:
        for receiver, sender in (("client", "server"), ("server", "client")):
            drops = _ingress_drops(netns_testbed, receiver)
            received = int(_between(netns_testbed, receiver, sender, UDP_RECEIVER, UDP_SENDER))
            lost = DATAGRAMS - received
            print(f"10 % loss at the {receiver}: {100 * lost / DATAGRAMS:.2f} %")
            # 20000 draws at p = 0.1: one standard deviation is 0.21 percentage points.
            assert 100 * lost / DATAGRAMS == pytest.approx(10, abs=1.0)
            # Every lost datagram was the filter's doing (a few ARP frames may add to it).
            assert 0 <= _ingress_drops(netns_testbed, receiver) - drops - lost <= 10
    assert _snapshot(netns_testbed) == before
    assert facts["nodes"]["server"]["loss_probability_pct"] == pytest.approx(10)


def test_a_dead_runs_leftovers_are_cleaned_up_by_the_next_run(
    netns_testbed: Testbed, ends: dict[str, Node]
):
    before = _snapshot(netns_testbed)
    # What a controller SIGKILLed mid-sweep leaves behind: its commands applied, none undone.
    for role in ("client", "server"):

        def show(*argv: str, role: str = role) -> str:
            return netns_testbed.exec_in(role, [*argv, "dev", "data0"])

        state = parse_interface(
            show("ip", "-j", "-d", "addr", "show"),
            show("tc", "-j", "-d", "qdisc", "show"),
            netns_testbed.exec_in(role, ["tc", "-j", "filter", "show", "dev", "data0", "ingress"]),
            "data0",
        )
        for argv in plan_end(LinkConfig(rate_mbit=50, loss_pct=1), state).apply:
            netns_testbed.exec_in(role, list(argv))
    assert _snapshot(netns_testbed) != before
    with shaped_link(_config(netns_testbed, loss_pct=2), ends) as facts:
        client = facts["nodes"]["client"]
        assert client["before"]["h2iot_leftovers"] and client["gso_max_segs"] == 65535
        assert [q["kind"] for q in client["qdiscs"]] == ["noqueue", "ingress"]
    assert _snapshot(netns_testbed) == before


def test_delay_without_netem_is_one_line_and_changes_nothing(
    netns_testbed: Testbed, ends: dict[str, Node]
):
    before = _snapshot(netns_testbed)
    config = _config(netns_testbed, rate_mbit=100, delay_ms=5)
    try:
        with shaped_link(config, ends) as facts:
            # A kernel with netem: the delay is applied, with the rate beneath it.
            kinds = [q["kind"] for q in facts["nodes"]["client"]["qdiscs"]]
            assert kinds[:2] == ["netem", "tbf"]
    except ConfigError as exc:
        message = str(exc)
        print(message)
        assert message.startswith(
            "link.delay_ms: delay needs the kernel's netem support, which the kernel of client ("
        )
        assert "(Raspberry Pi OS kernels have it; between two local emulated nodes, " in message
        assert 'link.delay_method = "relay" delays without it)' in message and "\n" not in message
    assert _snapshot(netns_testbed) == before


def test_someone_elses_root_qdisc_is_refused_before_anything_changes(
    netns_testbed: Testbed, ends: dict[str, Node]
):
    server_before = _snapshot(netns_testbed)["server"]
    netns_testbed.exec_in(
        "client", ["tc", "qdisc", "replace", "dev", "data0", "root", "handle", "7:",
                   "tbf", "rate", "1gbit", "burst", "100k", "latency", "1ms"],
    )  # fmt: skip
    try:
        config = _config(netns_testbed, rate_mbit=100)
        with pytest.raises(LinkError) as caught, shaped_link(config, ends):
            pytest.fail("replaced a foreign qdisc")
        assert str(caught.value).startswith("client (root@")
        assert "data0 already has a root qdisc h2iot did not add (tbf 7:)" in str(caught.value)
        assert _snapshot(netns_testbed)["server"] == server_before
    finally:
        netns_testbed.exec_in("client", ["tc", "qdisc", "del", "dev", "data0", "root"])


def test_a_wrong_or_missing_interface_is_named(netns_testbed: Testbed, ends: dict[str, Node]):
    config = _config(netns_testbed, rate_mbit=100)
    missing = replace(config, client=replace(config.client, data_interface="nope0"))
    no_such = r"^nodes.client.data_interface: client \(root@.*\) has no interface nope0$"
    with pytest.raises(ConfigError, match=no_such), shaped_link(missing, ends):
        pytest.fail("shaped a missing interface")
    # ctl0 exists, but the client reaches the server's data address through data0.
    wrong = replace(config, client=replace(config.client, data_interface="ctl0"))
    with pytest.raises(ConfigError) as caught, shaped_link(wrong, ends):
        pytest.fail("shaped the control link")
    assert str(caught.value).startswith("nodes.client.data_interface: ctl0, but client (root@")
    assert str(caught.value).endswith(f"reaches nodes.client.address {config.client.address} "
                                      "through data0")  # fmt: skip


class _RefusingTc:
    """A node's real transport, except that its tc refuses to replace a qdisc, as a kernel
    without the qdisc or a busy device would: the first end is already shaped when it fails."""

    def __init__(self, inner: Transport, on_refusal: Callable[[], None]) -> None:
        self._inner = inner
        self._on_refusal = on_refusal
        self.label = inner.label

    def run(self, command: str, timeout_s: float) -> CommandResult:
        if "tc qdisc replace" in command:
            self._on_refusal()
            return CommandResult(command, "", "RTNETLINK answers: Device or resource busy\n", 2, 0)
        return self._inner.run(command, timeout_s)

    def put(self, local: Path, remote: str) -> None:
        self._inner.put(local, remote)

    def clock_offset(self, python: str, samples: int) -> ClockOffset:
        return self._inner.clock_offset(python, samples)

    def close(self) -> None:
        self._inner.close()


def test_a_failed_apply_on_the_server_rolls_the_client_back(
    netns_testbed: Testbed, ends: dict[str, Node]
):
    before = _snapshot(netns_testbed)
    seen_at_refusal: list[dict[str, tuple[object, ...]]] = []
    server = Node(_RefusingTc(ends["server"].transport, lambda: seen_at_refusal.append(
        _snapshot(netns_testbed))))  # fmt: skip
    config = _config(netns_testbed, rate_mbit=100, loss_pct=1)
    with pytest.raises(LinkError) as caught, shaped_link(config, {**ends, "server": server}):
        pytest.fail("shaped with a refusing server")
    message = str(caught.value)
    assert message.startswith("server (root@") and "\n" not in message
    assert "`tc qdisc replace dev data0 root handle 6832: " in message
    assert message.endswith("failed: RTNETLINK answers: Device or resource busy")
    # The client was shaped (rate, GSO off, loss filter) when the server refused ...
    (client_then, gso_then, filters_then) = seen_at_refusal[0]["client"]
    assert [kind for kind, _, _ in client_then] == ["tbf", "ingress"]
    assert gso_then == 1 and filters_then
    # ... and both ends are as they were.
    assert _snapshot(netns_testbed) == before
