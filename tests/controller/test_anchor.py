"""A local node is one process tree: its commands and the background agents they leave run
under the node's anchor, so a meter watching the anchor sees the node and nothing else."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from controller.nodes.anchor import AnchoredLocalTransport
from controller.nodes.errors import NodeUnreachableError
from controller.nodes.node import Node


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
