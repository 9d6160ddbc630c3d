"""`WarmAgent`: the controller's side of a client node's warm agent (agent.warm).

Started on first use, in the background like the server agent (so on a local node it is a
child of the node's anchor and the meter models it as the node's; on an emulated device it is
in the device's cgroup), then reached on the node's loopback through the node's own transport:
a socket for a local node, a direct-tcpip channel of the SSH session for a remote one. Each
trial is one request line and one answer line, returned as the `CommandResult` a fresh
`h2iot-agent trial` process would have given, its span and CPU time the agent's own account of
the trial.

A trial that outlives its timeout, or an agent that dies or breaks the connection, gets the
agent killed and forgotten: the trial fails (CommandTimeoutError, CommandFailedError, as a
fresh process's would) and the next one starts a new agent. Closing the connection ends the
agent; so does the controller's end, however it ends, since the agent exits when its
connection does.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from typing import Any

from agent.trial_request import TrialRequest
from controller.nodes.errors import CommandFailedError, CommandTimeoutError, NodeError
from controller.nodes.node import Node
from controller.nodes.records import CommandResult, ProcessSpan
from controller.nodes.transport import Stream

START_TIMEOUT_S = 30.0
POLL_S = 0.05
STOP_GRACE_S = 2.0
MAX_ANSWER_BYTES = 64 << 20  # a trial's JSON lines; a page's record is a few KB


class WarmAgent:
    """One client node's warm agent. `command`: the agent's argv prefix on the node (its
    interpreter and `-m agent.cli`); `state_dir`: where its pidfile, log and ready file go."""

    def __init__(self, node: Node, command: Sequence[str], state_dir: str) -> None:
        self.node = node
        self.command = tuple(command)
        self.pidfile = f"{state_dir}/warm.pid"
        self.log = f"{state_dir}/warm.log"
        self.ready_file = f"{state_dir}/warm-ready.json"
        self._stream: Stream | None = None
        self._pending = b""
        self.started = 0  # agents started so far: 1 for a sweep without a replaced one

    def run(self, request: TrialRequest, timeout_s: float) -> CommandResult:
        """One trial in the warm agent, as a fresh `h2iot-agent trial` would run it."""
        stream = self._connected()
        words = shlex.join(request.argv())
        started = time.monotonic()
        try:
            stream.settimeout(timeout_s)
            stream.sendall(request.json_line())
            answer = self._line(stream, started + timeout_s)
        except TimeoutError:
            self._discard()
            raise CommandTimeoutError(
                f"{self.node.label}: warm agent: `{words}` still running after {timeout_s:g} s "
                "(agent killed; the next trial starts a new one)"
            ) from None
        except (OSError, EOFError, ValueError) as exc:
            log = self._log_tail()
            self._discard()
            raise CommandFailedError(
                f"{self.node.label}: warm agent ended during `{words}` ({exc}): {log}"
            ) from None
        return CommandResult(
            command=words,
            stdout=str(answer["stdout"]),
            stderr=str(answer["stderr"]),
            exit_status=int(answer["exit_status"]),
            duration_s=time.monotonic() - started,
            process=ProcessSpan(
                int(answer["t_mono_start_ns"]), int(answer["t_mono_end_ns"]), float(answer["cpu_s"])
            ),
        )

    def start(self) -> None:
        """Start the agent now rather than with the first trial (it is started once)."""
        self._connected()

    def close(self) -> None:
        """Hang up: the agent exits."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _connected(self) -> Stream:
        if self._stream is None:
            self._stream = self._start()
        return self._stream

    def _start(self) -> Stream:
        self.node.makedirs(self.pidfile.rsplit("/", 1)[0])
        self.node.run(["rm", "-f", "--", self.ready_file])
        self.node.start_background(
            [*self.command, "warm", "--ready-file", self.ready_file],
            pidfile=self.pidfile,
            log=self.log,
        )
        self.started += 1
        ready = self._ready(time.monotonic() + START_TIMEOUT_S)
        # Its token is no use to anyone once read, and the file may sit in a published run.
        self.node.run(["rm", "-f", "--", self.ready_file])
        stream = self.node.transport.open_loopback(int(ready["port"]), START_TIMEOUT_S)
        self._pending = b""
        try:
            stream.settimeout(START_TIMEOUT_S)
            stream.sendall(json.dumps({"token": ready["token"]}).encode() + b"\n")
            self._line(stream, time.monotonic() + START_TIMEOUT_S)
        except (OSError, EOFError, ValueError) as exc:
            stream.close()
            self._kill()
            raise NodeError(
                f"{self.node.label}: warm agent refused the controller: {exc}"
            ) from None
        return stream

    def _ready(self, deadline: float) -> dict[str, Any]:
        while True:
            result = self.node.run(["cat", "--", self.ready_file], check=False)
            if result.ok and result.stdout.strip():
                ready: dict[str, Any] = json.loads(result.stdout)
                return ready
            if self.node.running_pid(self.pidfile) is None:
                raise NodeError(
                    f"{self.node.label}: warm agent exited before listening: {self._log_tail()}"
                )
            if time.monotonic() > deadline:
                self._kill()
                raise NodeError(
                    f"{self.node.label}: warm agent not listening after {START_TIMEOUT_S:g} s"
                )
            time.sleep(POLL_S)

    def _line(self, stream: Stream, deadline: float) -> dict[str, Any]:
        """The next answer line, parsed."""
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            stream.settimeout(left)
            chunk = stream.recv(1 << 16)
            if not chunk:
                raise EOFError("connection closed")
            self._pending += chunk
            if len(self._pending) > MAX_ANSWER_BYTES:
                raise EOFError(f"an answer of more than {MAX_ANSWER_BYTES} bytes")
        line, self._pending = self._pending.split(b"\n", 1)
        answer = json.loads(line)
        if not isinstance(answer, dict):
            raise EOFError(f"not an answer: {line[:80]!r}")
        return answer

    def _discard(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self._kill()

    def _kill(self) -> None:
        self.node.stop_background(self.pidfile, grace_s=STOP_GRACE_S)

    def _log_tail(self) -> str:
        result = self.node.run(["tail", "-n", "1", "--", self.log], check=False)
        return result.stdout.strip() or "no output"
