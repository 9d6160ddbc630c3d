"""A local node as one process tree: the anchor.

A meter models a *node*, so in local mode it must see exactly the node's processes: the agents
that come and go per trial, and nothing of the controller's own (its reader, dashboard or virtual
meter). Each local node therefore gets an anchor process; every command of that node runs as the
anchor's child, and the anchor is a child subreaper, so background agents that `nohup ... &`
orphans are re-parented to it rather than to init. The virtual meter watches `pid:<anchor>`.

Run as `python -m controller.nodes.anchor`: it reads one JSON request per line on stdin
(`{"command": ..., "timeout_s": ...}`), runs it with `/bin/sh -c` in a session of its own, and
answers one JSON line on stdout (`stdout`, `stderr`, `exit_status`, `duration_s`, and the
process's span: `t_mono_start_ns` just before it is started, `t_mono_end_ns` once it is reaped,
`cpu_s` the CPU time it and the children it waited for used). The span is what the energy
window "process" integrates over (a trial process's whole life, start-up included); the CPU time
is the growth of the anchor's RUSAGE_CHILDREN across the command, so while a command runs the
anchor reaps no adopted orphan (one would add its time): those wait for the command's end.
`AnchoredLocalTransport` is the controller's side, a `Transport` like `LocalTransport`.

Nothing of the node outlives the controller: only the controller holds the anchor's stdin, so
when it ends, however it ends (SIGKILL included), the anchor reads end-of-file and kills its
whole tree, the server agent it adopted and a command still running alike, then exits. Its
stdin is read on the main thread while a worker runs the commands, so a kill during a trial is
seen at once, not after the trial's timeout.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from controller.nodes.errors import CommandTimeoutError, NodeUnreachableError
from controller.nodes.records import ClockOffset, CommandResult, ProcessSpan
from controller.nodes.transport import LocalTransport, Stream, loopback_socket

_PR_SET_CHILD_SUBREAPER = 36
_REAP_INTERVAL_S = 0.1
_END_TREE_ROUNDS = 100  # x 20 ms: a tree that keeps forking is given 2 s, then left


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _children(pid: int | str = "self") -> set[int]:
    """A process's children, from /proc (cheap: psutil's scan cost a few % of a core every
    50 ms)."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.update(int(child) for child in handle.read().split())
        except OSError:
            continue
    return found


def _descendants() -> set[int]:
    found: set[int] = set()
    todo = list(_children())
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(_children(pid))
    return found


def _end_tree() -> None:
    """Kill every process below us, until none is left alive. Those that a kill orphans come
    to us (we are their subreaper) and are found in the next round; zombies are reaped."""
    for _ in range(_END_TREE_ROUNDS):
        alive = [pid for pid in _descendants() if not _is_zombie(pid)]
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        if not alive:
            return
        time.sleep(0.02)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            # The state follows the parenthesised command name, which may contain spaces.
            return handle.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _reap_adopted(direct: set[int], lock: threading.Lock) -> None:
    """Collect adopted orphans that exited, between commands only (a command's CPU time is
    measured through RUSAGE_CHILDREN); commands we wait for ourselves are left alone."""
    while True:
        time.sleep(_REAP_INTERVAL_S)
        with lock:
            if direct:
                continue
            for pid in _children():
                if _is_zombie(pid):
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, os.WNOHANG)


def _run(
    command: str, timeout_s: float, direct: set[int], lock: threading.Lock
) -> dict[str, object]:
    with lock:  # no orphan is reaped from here on, until the command is reaped
        direct.add(-1)
        cpu_before = _children_cpu_s()
        started_ns = time.monotonic_ns()
    started = time.monotonic()
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    with lock:
        direct.add(process.pid)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        timed_out = True
    finally:
        ended_ns = time.monotonic_ns()
        cpu_s = _children_cpu_s() - cpu_before
        with lock:
            direct.discard(process.pid)
            direct.discard(-1)
    status = process.returncode if process.returncode >= 0 else 128 - process.returncode
    return {
        "stdout": stdout.decode(errors="replace"),
        "stderr": stderr.decode(errors="replace"),
        "exit_status": status,
        "duration_s": time.monotonic() - started,
        "timed_out": timed_out,
        "t_mono_start_ns": started_ns,
        "t_mono_end_ns": ended_ns,
        "cpu_s": cpu_s,
    }


def _serve(requests: queue.Queue[str], direct: set[int], lock: threading.Lock) -> None:
    """The worker: run each request in turn and answer it."""
    while True:
        request = json.loads(requests.get())
        answer = _run(str(request["command"]), float(request["timeout_s"]), direct, lock)
        try:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):  # the controller is gone: main ends the tree
            return


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    _become_subreaper()
    direct: set[int] = set()
    lock = threading.Lock()
    requests: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_reap_adopted, args=(direct, lock), daemon=True).start()
    threading.Thread(target=_serve, args=(requests, direct, lock), daemon=True).start()
    for line in sys.stdin:
        requests.put(line)
    # End of input: the controller closed us or died. Nothing of this node may outlive it.
    _end_tree()
    os._exit(0)  # no flush of a stdout whose reader is gone, no wait for the worker


class AnchoredLocalTransport:
    """Runs a local node's commands as children of its anchor process (see the module doc)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._local = LocalTransport(label)
        self._lock = threading.Lock()
        self._anchor = subprocess.Popen(
            [sys.executable, "-m", "controller.nodes.anchor"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        """The anchor's pid: the root of this node's process tree."""
        return self._anchor.pid

    def run(self, command: str, timeout_s: float) -> CommandResult:
        assert self._anchor.stdin is not None and self._anchor.stdout is not None
        with self._lock:
            try:
                self._anchor.stdin.write(
                    json.dumps({"command": command, "timeout_s": timeout_s}) + "\n"
                )
                self._anchor.stdin.flush()
                line = self._anchor.stdout.readline()
            except (BrokenPipeError, ValueError):
                line = ""
        if not line:
            raise NodeUnreachableError(f"{self.label}: the node's anchor process has exited")
        answer = json.loads(line)
        if answer["timed_out"]:
            raise CommandTimeoutError(
                f"{self.label}: `{command}` still running after {timeout_s:g} s"
            )
        return CommandResult(
            command=command,
            stdout=answer["stdout"],
            stderr=answer["stderr"],
            exit_status=int(answer["exit_status"]),
            duration_s=float(answer["duration_s"]),
            process=ProcessSpan(
                int(answer["t_mono_start_ns"]),
                int(answer["t_mono_end_ns"]),
                float(answer["cpu_s"]),
            ),
        )

    def put(self, local: Path, remote: str) -> None:
        self._local.put(local, remote)

    def clock_offset(self, python: str, samples: int) -> ClockOffset:
        return ClockOffset.same_clock()

    def open_loopback(self, port: int, timeout_s: float) -> Stream:
        # The anchor's namespace is the node's: an emulated device's has a loopback of its own.
        netns = Path(f"/proc/{self._anchor.pid}/ns/net")
        return loopback_socket(self.label, port, timeout_s, netns)

    def close(self) -> None:
        """End the anchor; processes still in its tree (a server left running) are killed."""
        if self._anchor.poll() is None:
            for child in psutil.Process(self._anchor.pid).children(recursive=True):
                try:
                    child.kill()
                except psutil.Error:
                    continue
            assert self._anchor.stdin is not None
            self._anchor.stdin.close()
            try:
                self._anchor.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._anchor.kill()
                self._anchor.wait()
        if self._anchor.stdout is not None:
            self._anchor.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
