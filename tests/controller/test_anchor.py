"""A local node is one process tree: its commands and the background agents they leave run
under the node's anchor, so a meter watching the anchor sees the node and nothing else."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from controller.nodes.anchor import AnchoredLocalTransport
from controller.nodes.errors import NodeUnreachableError
from controller.nodes.node import Node
from tests._processes import survivors


def test_commands_and_orphaned_background_processes_stay_in_the_anchors_tree(
    tmp_path: Path,
) -> None:
    transport = AnchoredLocalTransport("client (local)")
    node = Node(transport)
    try:
        result = node.shell("echo $PPID; echo err >&2; exit 3", check=False)
        assert result.exit_status == 3
        assert result.stderr == "err\n"
        background = node.start_background(
            ["sleep", "30"], pidfile=str(tmp_path / "pid"), log=str(tmp_path / "log")
        )
        tree = {p.pid for p in psutil.Process(transport.pid).children(recursive=True)}
        assert background.pid in tree
        assert psutil.Process(background.pid).ppid() == transport.pid  # adopted, not init's
        assert os.getpid() not in tree
        assert node.stop_background(str(tmp_path / "pid"), grace_s=5) == "terminated"
        deadline = time.monotonic() + 5
        while background.pid in {p.pid for p in psutil.Process(transport.pid).children()}:
            assert time.monotonic() < deadline, "the anchor did not reap its adopted child"
            time.sleep(0.05)
    finally:
        transport.close()
    with pytest.raises(NodeUnreachableError, match="anchor process has exited"):
        node.shell("true")


@pytest.mark.parametrize("during_a_command", [False, True], ids=["idle", "during-a-command"])
def test_the_node_ends_with_its_controller(tmp_path: Path, during_a_command: bool) -> None:
    """The controller's end (SIGKILL included) closes the anchor's stdin, nothing else: the
    anchor then ends its whole tree at once, a command still running too (issue 13, item 7)."""
    transport = AnchoredLocalTransport("server (local)")
    node = Node(transport)
    background = node.start_background(
        ["sleep", "300"], pidfile=str(tmp_path / "pid"), log=str(tmp_path / "log")
    )
    pids = [transport.pid, background.pid]
    if during_a_command:

        def trial() -> None:
            with contextlib.suppress(NodeUnreachableError):  # the anchor ends mid-command
                node.shell("sleep 300", check=False, timeout_s=600)

        running = threading.Thread(target=trial, daemon=True)
        running.start()
        deadline = time.monotonic() + 10
        while len(psutil.Process(transport.pid).children(recursive=True)) < 3:
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.02)
        pids += [p.pid for p in psutil.Process(transport.pid).children(recursive=True)]
    try:
        assert transport._anchor.stdin is not None
        transport._anchor.stdin.close()  # what the kernel does when the controller dies
        assert survivors(pids, within_s=5) == []
    finally:
        transport.close()


def test_a_command_reports_its_process_span_and_the_cpu_it_and_its_children_used() -> None:
    """What the energy window "process" integrates over: the trial process from its start to
    its reaping on the node's monotonic clock, and its CPU time, children included."""
    transport = AnchoredLocalTransport("client (local)")
    try:
        before_ns = time.monotonic_ns()
        busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"
        result = Node(transport).run(["sh", "-c", '"$0" -c "$1"', sys.executable, busy])
        after_ns = time.monotonic_ns()
    finally:
        transport.close()
    span = result.process
    assert span is not None
    assert before_ns <= span.t_mono_start_ns < span.t_mono_end_ns <= after_ns
    assert span.cpu_s >= 0.2  # the grandchild's busy loop, reaped through its parent
    assert span.duration_s >= 0.2
