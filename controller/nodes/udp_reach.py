"""Do a client node's UDP datagrams reach the server's HTTP/3 port? For `nodes check` and
`rig check` of a config with HTTP/3 trials.

The server node holds the port with a small echo listener (stdlib Python, the node's own
interpreter, bound as `h2iot-agent serve --protocol h3` binds) for the probe's duration; the
client node sends it datagrams of QUIC's minimum size from a connected socket, so the kernel
reports an ICMP error to it. What comes back is one of the `Finding`s, each a different fix.

Pure: the record, the pairs to probe, the port, parsing the probe's report and the wording.
I/O: `probe_udp`, the listener and the probe as commands on the two nodes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from agent.protocols import protocol_spec
from controller.config.model import Config, NodeConfig
from controller.nodes.connect import node_label
from controller.nodes.errors import NodeError
from controller.nodes.node import Node

Finding = Literal["echo", "refused", "silence", "error", "no listener", "not probed"]
"""echo: the datagram reached the listener and its echo came back. refused: ICMP port
unreachable, a host answered but nothing listens there (the address is not the one the
server binds). silence: no answer at all (a firewall drops it, or the way back is blocked).
error: the client's kernel refused to send or reported another ICMP error (no route, host
unreachable), or a command on either node failed. no listener: the server node cannot hold the
port (another process has it). not probed: a node was not reached or has no working Python,
which its own check reports."""

PROBE_DATAGRAM_BYTES = 1200
"""QUIC's client Initial datagrams are padded to 1200 bytes (RFC 9000 section 14.1): a path that
carries small datagrams but drops these would pass a smaller probe and fail every handshake."""
PROBE_DATAGRAMS = 3  # UDP may lose one on a busy link: silence only after all went unanswered
PROBE_WAIT_S = 1.0  # per datagram; a Pi's echo over Wi-Fi is tens of ms
LISTENER_START_S = 20.0  # a Pi's interpreter over SSH takes about a second to bind
LISTENER_LIFETIME_S = 120.0  # a backstop: the listener ends itself should the controller die
_POLL_S = 0.05

# argv: host port lifetime_s. Prints {"port": N} once bound, or {"error": why}.
_LISTENER = """\
import json, socket, sys, time
host, port, life = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
try:
    sock.bind((host, port))
except OSError as exc:
    print(json.dumps({"error": str(exc)}), flush=True)
    sys.exit(1)
print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
end = time.monotonic() + life
while (left := end - time.monotonic()) > 0:
    sock.settimeout(left)
    try:
        data, peer = sock.recvfrom(65535)
        sock.sendto(data, peer)
    except TimeoutError:
        break
    except OSError:
        pass
"""

# argv: host port datagram_bytes datagrams wait_s. Prints one JSON object (ProbeReport's).
_PROBE = """\
import errno, json, os, socket, sys, time
host, port, size, tries, wait = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
int(sys.argv[4]), float(sys.argv[5])
def done(outcome, sent, **more):
    print(json.dumps({"outcome": outcome, "sent": sent, **more}))
    sys.exit(0)
def why(exc):
    return f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno, exc.errno)})"
try:
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
except OSError as exc:
    done("error", 0, error=why(exc))
sock = socket.socket(family, kind, proto)
sock.connect(address[:2])
sent = 0
for _ in range(tries):
    payload = os.urandom(size)
    started = time.perf_counter_ns()
    try:
        sock.send(payload)
        sent += 1
        sock.settimeout(wait)
        while sock.recv(65535) != payload:
            pass
    except TimeoutError:
        continue
    except ConnectionRefusedError:
        done("refused", sent)
    except OSError as exc:
        done("error", sent, error=why(exc))
    done("echo", sent, round_trip_ns=time.perf_counter_ns() - started)
done("silence", sent)
"""


@dataclass(frozen=True)
class UdpReach:
    """What one client node's datagrams to the server's HTTP/3 port found."""

    client: str  # the client node's label
    server: str  # the server node's label
    address: str  # where the client sends: its nodes.<client>.address
    port: int  # the UDP port the listener held
    finding: Finding
    datagrams_sent: int
    datagram_bytes: int = PROBE_DATAGRAM_BYTES
    wait_s: float = PROBE_WAIT_S  # for each datagram's echo
    round_trip_ns: int | None = None  # the echo's, for "echo"
    error: str = ""  # the kernel's words, for "error" and "no listener"
    bind_address: str = ""  # where the listener bound: nodes.server.address

    @classmethod
    def of_pair(
        cls, client: NodeConfig, server: NodeConfig, finding: Finding = "error", error: str = ""
    ) -> UdpReach:
        """The pair before (or without) a probe: the server's port as `listen_port` says."""
        return cls(
            client=node_label(client),
            server=node_label(server),
            address=client.address,
            port=listen_port(server),
            finding=finding,
            datagrams_sent=0,
            error=error,
            bind_address=server.address,
        )

    @property
    def ok(self) -> bool:
        return self.finding == "echo"

    @property
    def target(self) -> str:
        # Port 0 before a local listener took its free port.
        return (
            f"UDP {self.address}:{self.port}" if self.port else f"UDP {self.address} (a free port)"
        )

    def detail(self) -> str:
        """What was found, in a sentence naming the address and port."""
        if self.finding == "echo":
            rtt_ms = (self.round_trip_ns or 0) / 1e6
            return f"{self.target}: a {self.datagram_bytes}-byte datagram echoed in {rtt_ms:.2f} ms"
        if self.finding == "refused":
            return (
                f"{self.target}: ICMP port unreachable, nothing listens there (the server's "
                f"listener is on {self.bind_address or '?'}:{self.port})"
            )
        if self.finding == "silence":
            waited_s = self.datagrams_sent * self.wait_s
            return (
                f"{self.target}: no answer to {self.datagrams_sent} datagrams of "
                f"{self.datagram_bytes} bytes in {waited_s:g} s (dropped on the way there or back)"
            )
        if self.finding == "not probed":
            return f"{self.target}: not probed: {self.error}"
        if self.finding == "no listener":
            return (
                f"{self.server}: cannot listen on UDP {self.bind_address}:{self.port}: {self.error}"
            )
        return f"{self.target}: {self.error}"

    def problem(self) -> str | None:
        """One line naming both nodes, the address and the port; None when it reached, or was
        not probed (the node's own check says why)."""
        if self.finding in ("echo", "not probed"):
            return None
        return f"{self.client} -> {self.server}: HTTP/3 {self.detail()}"


def udp_pairs(config: Config) -> tuple[tuple[NodeConfig, NodeConfig], ...]:
    """(client, server) per client node when the config has HTTP/3 trials, else none."""
    if not any(protocol_spec(p).quic for p in config.protocols):
        return ()
    return tuple((client, config.server) for client in config.client_nodes)


def listen_port(server: NodeConfig) -> int:
    """The port the HTTP/3 server takes: a local one a free port (0), as a local sweep's does
    (several may run side by side), an SSH one its nodes.server.http_port."""
    return 0 if server.is_local else server.http_port


def listener_event(lines: Sequence[str]) -> dict[str, object] | None:
    """The listener's `{"port": N}` or `{"error": why}` among its output lines, if printed."""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and ("port" in event or "error" in event):
            return event
    return None


def reach_of(base: UdpReach, report: str) -> UdpReach:
    """The probe's JSON report (its last line) as what `base` (who probed where) found; a
    report that is not one is an "error" finding saying so."""
    lines = report.strip().splitlines()
    try:
        found = json.loads(lines[-1])
        outcome = found["outcome"]
        sent = int(found["sent"])
    except (ValueError, IndexError, KeyError, TypeError):
        return replace(base, finding="error", error=f"the probe printed {report!r}")
    if outcome not in ("echo", "refused", "silence", "error"):
        return replace(base, finding="error", datagrams_sent=sent, error=f"{outcome!r}?")
    rtt = found.get("round_trip_ns")
    return replace(
        base,
        finding=outcome,
        datagrams_sent=sent,
        round_trip_ns=rtt if isinstance(rtt, int) else None,
        error=str(found.get("error") or ""),
    )


# --- I/O ---------------------------------------------------------------------------------------


def probe_udp(
    client: Node,
    client_config: NodeConfig,
    server: Node,
    server_config: NodeConfig,
    *,
    port: int | None = None,
) -> UdpReach:
    """Hold the server's HTTP/3 port (`listen_port`, unless `port` is given) with an echo
    listener on the server node, probe it from the client node, stop the listener. A command
    that fails on either node is an "error" finding with the node's words."""
    base = UdpReach.of_pair(client_config, server_config)
    base = base if port is None else replace(base, port=port)
    try:
        return _probe(client, client_config, server, server_config, base)
    except NodeError as exc:
        return replace(base, error=str(exc))


def _probe(
    client: Node, client_config: NodeConfig, server: Node, server_config: NodeConfig, base: UdpReach
) -> UdpReach:
    scratch = server.run(["mktemp", "-d", "-t", "h2iot-udp.XXXXXX"]).stdout.strip()
    pidfile, log = f"{scratch}/listener.pid", f"{scratch}/listener.log"
    try:
        listener = [
            server.path(server_config.python), "-c", _LISTENER, base.bind_address,
            str(base.port), f"{LISTENER_LIFETIME_S:g}",
        ]  # fmt: skip
        server.start_background(listener, pidfile=pidfile, log=log)
        event = _listening(server, pidfile, log)
        if "error" in event:
            return replace(base, finding="no listener", error=str(event["error"]))
        held = replace(base, port=int(str(event["port"])))
        probe = [
            client.path(client_config.python), "-c", _PROBE, held.address, str(held.port),
            str(held.datagram_bytes), str(PROBE_DATAGRAMS), f"{held.wait_s:g}",
        ]  # fmt: skip
        result = client.run(probe, timeout_s=PROBE_DATAGRAMS * held.wait_s + 30)
        return reach_of(held, result.stdout)
    finally:
        try:
            server.stop_background(pidfile, grace_s=2)
        finally:
            server.run(["rm", "-rf", "--", scratch], check=False)


def _listening(server: Node, pidfile: str, log: str) -> dict[str, object]:
    deadline = time.monotonic() + LISTENER_START_S
    while True:
        # Alive first: a listener that printed its line and exited is found by the read.
        alive = server.running_pid(pidfile) is not None
        event = listener_event(server.read_new_lines(log).lines)
        if event is not None:
            return event
        if not alive:
            said = server.read_file(log).strip().splitlines()
            raise NodeError(
                f"{server.label}: the UDP listener exited: {said[-1] if said else 'no output'}"
            )
        if time.monotonic() > deadline:
            raise NodeError(
                f"{server.label}: the UDP listener did not bind in {LISTENER_START_S:g} s"
            )
        time.sleep(_POLL_S)
