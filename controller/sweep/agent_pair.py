"""The client and server agents of one sweep as the engine uses them (`TrialNodes`).

Each trial carries its grid point as one `TrialPoint` (`Config.point`, built by the planner or a
search): its SETTINGS are announced by both agents (the client's govern what the server may send,
the study's SETTINGS_INITIAL_WINDOW_SIZE; the server's what the client may send), its workload
parameters go where their declaration says (client, server, or the server node's set-up). The
server is restarted only when what it serves changes; in a warm sweep a server on the agent's own
engine over HTTP/2 takes a new point's SETTINGS without a restart (AgentNode.reload_settings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from agent.engines import engine_spec
from agent.protocols import protocol_spec
from agent.trial_request import TrialRequest
from agent.workloads import ParamValue
from agent.workloads.spec import ParamSide
from controller.config.model import Config, Role, TrialPoint
from controller.meter.net_load import Counters
from controller.nodes.agent import AgentNode, ServerMount, ServerProcess
from controller.nodes.clock import PeerOffset
from controller.nodes.errors import CommandFailedError, NodeError, NodeUnreachableError
from controller.sweep.errors import NodeLost
from controller.workloads import Served, params_for

TRIAL_INTERFACE = "trial_interface"
"""The key `run_trial` adds to a local client's record: the bytes and packets its network
interface carried while the trial command ran (loopback: each frame once, and anything else on
this machine that used it then)."""


@dataclass(frozen=True)
class NodeCredentials:
    """The run's TLS files where the agents read them (controller.run.tls makes them)."""

    server_cert: str  # on the server node
    server_key: str  # on the server node
    ca_file: str  # on the client node: what the server's certificate must chain to


def peer_clock(config: Config, facts: Mapping[str, Any]) -> PeerOffset | None:
    """The server node's wall clock minus the client node's, from their measured offsets (the
    run's facts); 0 exactly when both are on one host, None when either was not measured."""
    if config.server.host == config.client.host:
        return PeerOffset(0, 0)
    server = PeerOffset.of_node(facts.get("server", {}).get("clock"))
    client = PeerOffset.of_node(facts.get("client", {}).get("clock"))
    return None if server is None or client is None else server.minus(client)


class AgentPair:
    def __init__(
        self,
        config: Config,
        client: AgentNode,
        server: AgentNode,
        *,
        prepare: Callable[[Mapping[str, ParamValue]], Served],
        marker: str | None,
        client_offset_ns: int,
        facts: Mapping[str, Any],
        client_traffic: Callable[[], Counters | None] | None = None,
        tls: NodeCredentials | None = None,
    ) -> None:
        self.config = config
        self.tls = tls
        self.client = client
        if config.run.agent == "warm":
            # Started now, ended with the client node's session.
            client.keep_warm()
        self.server = server
        self.prepare = prepare
        self.marker = marker
        self._client_offset_ns = client_offset_ns
        self._facts = dict(facts)
        self._client_traffic = client_traffic
        self.peer_clock = peer_clock(config, facts)
        self._running: ServerProcess | None = None
        self._engine = config.server.engine  # the running server's (a swept server_engine)
        self._served = Served()

    def facts(self) -> Mapping[str, Any]:
        return self._facts

    def _side(self, point: TrialPoint, side: ParamSide) -> tuple[tuple[str, ParamValue], ...]:
        return params_for(self.config.workload.kind, point.params, side)

    def ensure_server(self, point: TrialPoint) -> None:
        try:
            served = self.prepare(dict(self._side(point, "setup")))
            engine = point.server_engine or self.config.server.engine
            mount = ServerMount(
                workload=self.config.workload.kind,
                settings=point.settings,
                params=self._side(point, "server"),
                root=served.root,
                tls=self._server_credentials(point),
                protocol=point.protocol,
                datagram_bytes=point.datagram_bytes,
                events_max_bytes=self._server_events(engine, point.protocol),
                trial_control=self._brackets_trials(point.protocol),
            )
            running = self._running
            if running is not None and self._engine == engine and self.server.server_pid():
                if running.mount == mount:
                    return
                if (
                    running.settings_file is not None
                    and replace(running.mount, settings=mount.settings) == mount
                ):
                    self._running = self.server.reload_settings(running, mount.settings)
                    return
            self.server.stop_server()
            self._running = self.server.start_server(
                mount=mount,
                host=self.config.server.address,
                # Local nodes take a free port: several local sweeps may run side by side.
                port=0 if self.config.server.is_local else self.config.server.http_port,
                engine=engine,
                unrepresentable_window=self.config.workload.unrepresentable_window,
                # A warm sweep keeps its server across SETTINGS where the engine can (the
                # agent's own over HTTP/2); a fresh one starts a server per setting, as the
                # study ran nghttpd.
                reloadable=self.config.run.agent == "warm"
                and engine_spec(engine).reloads_settings
                and not protocol_spec(mount.protocol).quic,
                event_loop=self.config.run.server_event_loop,
            )
            self._engine = engine
            self._served = served
        except NodeUnreachableError as exc:
            raise NodeLost(str(exc), role="server") from None
        except NodeError as exc:
            raise NodeLost(f"server agent: {exc}", role="server") from None

    def _brackets_trials(self, protocol: str) -> bool:
        """Whether the client brackets its trials by trial-control messages over `protocol`
        (the nghttp2 engine's gtlsclient sends no trial header), so the server must take
        them."""
        client = engine_spec(self.config.client.engine)
        return client.quic_client_counted_by_control and protocol_spec(protocol).quic

    def _server_events(self, engine: str, protocol: str) -> int | None:
        """The server's trace limit where it traces (run.events, over a protocol its engine
        traces: agent/README.md, Event traces), else None."""
        traces = protocol in engine_spec(engine).server_traces
        return self.config.run.events_max_bytes if self.config.run.events and traces else None

    def _server_credentials(self, point: TrialPoint) -> tuple[str, str] | None:
        if not point.tls:
            return None
        assert self.tls is not None, "a run with TLS trials deploys its credentials first"
        return self.tls.server_cert, self.tls.server_key

    def _ca_file(self, point: TrialPoint) -> str | None:
        """The authority the client checks the server against; none for an engine whose client
        checks no certificate (nghttp, gtlsclient: their agent refuses --ca-file)."""
        if not point.tls or not engine_spec(self.config.client.engine).checks_certificates:
            return None
        assert self.tls is not None, "a run with TLS trials deploys its credentials first"
        return self.tls.ca_file

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        assert self._running is not None, "ensure_server first"
        scheme = protocol_spec(point.protocol).scheme
        url = f"{scheme}://{self.config.client.address}:{self._running.port}/"
        control = self._running.control_port
        # nghttpd's agent counts trials by the client's trial-control messages, not the header.
        trial_control = None if control is None else f"{self.config.client.address}:{control}"
        before = self._client_traffic() if self._client_traffic else None
        peer = self.peer_clock
        try:
            record = self.client.run_trial(
                TrialRequest(
                    url,
                    workload=self.config.workload.kind,
                    protocol=point.protocol,
                    engine=self.config.client.engine,
                    params=self._side(point, "client"),
                    settings=point.settings,
                    connection_window=point.connection_window,
                    window_update_policy=point.window_update_policy,
                    trial_id=trial_id,
                    manifest=self._served.manifest,
                    marker=self.marker,
                    timeout_s=timeout_s,
                    unrepresentable_window=self.config.workload.unrepresentable_window,
                    trial_control=trial_control,
                    peer_clock_offset_ns=None if peer is None else peer.offset_ns,
                    peer_clock_uncertainty_ns=None if peer is None else peer.uncertainty_ns,
                    ca_file=self._ca_file(point),
                    datagram_bytes=point.datagram_bytes,
                    ack_eliciting_threshold=point.ack_eliciting_threshold,
                    max_ack_delay_ms=point.max_ack_delay_ms,
                    event_loop=self.config.run.event_loop,
                    events_dir=self.client.events_dir if self.config.run.events else None,
                    events_max_bytes=self.config.run.events_max_bytes,
                )
            )
        except NodeUnreachableError as exc:
            raise NodeLost(str(exc), role="client") from None
        except CommandFailedError as exc:
            # The node answered: a failed trial, not a lost node. If the server agent died,
            # the next attempt's ensure_server starts a new one.
            gone = "" if self.server.server_pid() else " (the server agent is not running)"
            return {"ok": False, "error": f"{exc}{gone}"}
        after = self._client_traffic() if self._client_traffic else None
        if before is not None and after is not None:
            moved = Counters(after.bytes - before.bytes, after.packets - before.packets)
            record[TRIAL_INTERFACE] = asdict(moved)
        return record

    def server_trial(self, trial_id: str, timeout_s: float) -> dict[str, Any] | None:
        try:
            return self.server.trial_record(trial_id, timeout_s=timeout_s)
        except NodeUnreachableError as exc:
            raise NodeLost(str(exc), role="server") from None
        except NodeError:
            return None

    def trial_events(self, trial_id: str) -> dict[str, bytes]:
        """The trial's event traces by role, fetched from the nodes; none unless run.events, and
        none of a role whose node has no trace of the trial."""
        if not self.config.run.events:
            return {}
        traces: dict[str, bytes] = {}
        nodes: list[tuple[Role, AgentNode]] = [("client", self.client)]
        if self._running is not None and self._running.mount.events_max_bytes is not None:
            nodes.append(("server", self.server))
        for role, node in nodes:
            try:
                traces[role] = node.take_events(trial_id, role)
            except NodeUnreachableError as exc:
                raise NodeLost(str(exc), role=role) from None
            except CommandFailedError:
                # Not on the node (its agent could not write it): the trial's row stands
                # without it, as data/README.md says.
                continue
        return traces

    def measure_rtt_s(self, samples: int = 20) -> float:
        """Round-trip time between the client and the running server: the best of `samples`
        TCP handshakes from the client node (the report draws window / RTT with it). An HTTP/3
        server listens on UDP only: its host answers the TCP SYN with a reset, one round trip
        as well."""
        assert self._running is not None, "ensure_server first"
        address = (self.config.client.address, self._running.port)
        probe = (
            "import socket,sys,time\n"
            "best=1e9\n"
            f"for _ in range({samples}):\n"
            " t=time.perf_counter()\n"
            " try:\n"
            f"  socket.create_connection({address!r}).close()\n"
            " except ConnectionRefusedError:\n"
            "  pass\n"
            " best=min(best,time.perf_counter()-t)\n"
            "print(best)\n"
        )
        try:
            result = self.client.node.run([self.client.node.path(self.client.python), "-c", probe])
        except NodeError as exc:
            raise NodeLost(f"measuring the RTT: {exc}", role="client") from None
        return float(result.stdout.strip())

    def client_clock_offset_ns(self) -> int:
        return self._client_offset_ns

    def close(self) -> None:
        try:
            self.server.stop_server()
        except NodeError:
            pass
        finally:
            self.client.node.close()
            self.server.node.close()
