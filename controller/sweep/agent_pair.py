"""The client and server agents of one sweep as the engine uses them (`TrialNodes`).

The swept SETTINGS are announced by both agents: the client's govern what the server may send
(the study's SETTINGS_INITIAL_WINDOW_SIZE), the server's what the client may send. The server is
restarted only when the trial's settings differ from those it runs with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.config.model import Config
from controller.nodes.agent import AgentNode, ServerProcess
from controller.nodes.errors import CommandFailedError, NodeError, NodeUnreachableError
from controller.sweep.errors import NodeLost

WINDOW = "initial_window_size"


class AgentPair:
    def __init__(
        self,
        config: Config,
        client: AgentNode,
        server: AgentNode,
        *,
        site_dir: str,
        manifest: str | None,
        marker: str | None,
        client_offset_ns: int,
        facts: Mapping[str, Any],
    ) -> None:
        self.config = config
        self.client = client
        self.server = server
        self.site_dir = site_dir
        self.manifest = manifest
        self.marker = marker
        self._client_offset_ns = client_offset_ns
        self._facts = dict(facts)
        self._running: ServerProcess | None = None

    def facts(self) -> Mapping[str, Any]:
        return self._facts

    def ensure_server(self, settings: Mapping[str, int]) -> None:
        wanted = tuple(settings.items())
        running = self._running
        try:
            if running is not None and running.settings == wanted and self.server.server_pid():
                return
            self.server.stop_server()
            self._running = self.server.start_server(
                root=self.site_dir,
                host=self.config.server.address,
                # Local nodes take a free port: several local sweeps may run side by side.
                port=0 if self.config.server.is_local else self.config.server.http_port,
                settings=settings,
                engine=self.config.server.engine,
                unrepresentable_window=self.config.workload.unrepresentable_window,
            )
        except NodeUnreachableError as exc:
            raise NodeLost(str(exc), role="server") from None
        except NodeError as exc:
            raise NodeLost(f"server agent: {exc}", role="server") from None

    def fetch(self, trial_id: str, settings: Mapping[str, int], timeout_s: float) -> dict[str, Any]:
        assert self._running is not None, "ensure_server first"
        workload = self.config.workload
        others = {name: value for name, value in settings.items() if name != WINDOW}
        window = settings.get(WINDOW)
        connection_window = workload.connection_window
        if connection_window is None and window is not None:
            connection_window = window  # as the study passed the same N to nghttp's -w and -W
        url = f"http://{self.config.client.address}:{self._running.port}/"
        control = self._running.control_port
        # nghttpd's agent counts trials by the client's trial-control messages, not the header.
        trial_control = None if control is None else f"{self.config.client.address}:{control}"
        try:
            return self.client.fetch(
                url,
                initial_window_size=window,
                connection_window=connection_window,
                window_update_policy=workload.window_update_policy,
                settings=others,
                trial_id=trial_id,
                manifest=self.manifest,
                marker=self.marker,
                timeout_s=timeout_s,
                engine=self.config.client.engine,
                unrepresentable_window=workload.unrepresentable_window,
                trial_control=trial_control,
            )
        except NodeUnreachableError as exc:
            raise NodeLost(str(exc), role="client") from None
        except CommandFailedError as exc:
            # The node answered: a failed trial, not a lost node. If the server agent died,
            # the next attempt's ensure_server starts a new one.
            gone = "" if self.server.server_pid() else " (the server agent is not running)"
            return {"ok": False, "error": f"{exc}{gone}"}

    def server_trial(self, trial_id: str, timeout_s: float) -> dict[str, Any] | None:
        try:
            return self.server.trial_record(trial_id, timeout_s=timeout_s)
        except NodeUnreachableError as exc:
            raise NodeLost(str(exc), role="server") from None
        except NodeError:
            return None

    def measure_rtt_s(self, samples: int = 20) -> float:
        """Round-trip time between the client and the running server: the best of `samples`
        TCP handshakes from the client node (the report draws window / RTT with it)."""
        assert self._running is not None, "ensure_server first"
        probe = (
            "import socket,sys,time\n"
            "best=1e9\n"
            f"for _ in range({samples}):\n"
            " t=time.perf_counter()\n"
            f" s=socket.create_connection(({self.config.client.address!r},{self._running.port}))\n"
            " best=min(best,time.perf_counter()-t)\n"
            " s.close()\n"
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
