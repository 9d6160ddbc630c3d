"""The toy engine's `serve`: the blob body of the default size written as a file, then a
trivial external server (nghttpd, cleartext, prior knowledge) serving them until it is stopped.
The listening line is the agent's, so a caller finds the port as for any engine."""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent.protocols import ProtocolSpec
from agent.workloads.blob.body import PATH_PREFIX
from agent.workloads.bodies import blob_body
from agent.workloads.spec import ParamValue, WorkloadSpec


def serve(
    args: argparse.Namespace,
    protocol: ProtocolSpec,
    workload: WorkloadSpec,
    params: dict[str, ParamValue],
    settings: dict[str, int],
) -> int:
    # The client's size is its own parameter: the toy serves the default one.
    size = int(workload.param("size_bytes").default)
    port = args.port or _free_port(args.host)
    with tempfile.TemporaryDirectory() as root:
        blobs = Path(root, PATH_PREFIX.strip("/"))
        blobs.mkdir()
        (blobs / str(size)).write_bytes(blob_body(size))
        nghttpd = shutil.which("nghttpd") or "/usr/sbin/nghttpd"
        server = subprocess.Popen(
            [nghttpd, "--no-tls", "-a", args.host, "-d", root, str(port)],
            stdout=subprocess.DEVNULL,
        )
        # Listening means accepting: said only once nghttpd takes a connection.
        while server.poll() is None and not _accepts(args.host, port):
            time.sleep(0.01)
        if server.poll() is None:
            print(json.dumps({"event": "listening", "port": port}), file=sys.stderr, flush=True)
        return server.wait()


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port
