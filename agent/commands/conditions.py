"""`h2iot-agent conditions [--sample-s S] [--cpu N]`: the node's state as one JSON line, for
`h2iot rig check`: CPU frequency and governor per CPU, temperature, the Pi firmware's throttling
flags, memory and swap, and the processes that used CPU over the sampling interval."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict

from agent.commands import add_example
from agent.commands.common import pin


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sample-s",
        type=float,
        default=1.0,
        help="how long to watch the other processes' CPU use (default 1)",
    )
    parser.add_argument("--cpu", type=int, help="the core the node's agent is pinned to")
    add_example(parser, "h2iot-agent conditions --sample-s 2 --cpu 0")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.conditions import Host, busy_processes, memory_bytes  # noqa: PLC0415

    pin(args.cpu)
    host = Host()
    snap = host.snapshot()
    unavailable = dict(snap.unavailable)
    try:
        memory: dict[str, int] = memory_bytes()
    except OSError as exc:
        memory = {}
        unavailable["memory"] = f"/proc/meminfo: {exc.strerror or exc}"
    busy = busy_processes(max(0.0, args.sample_s), exclude=frozenset({os.getpid()}))
    report = {
        "cpus": list(host.cpus),
        "cpu_freq_mhz": [f / 1000 for f in snap.cpu_freq_khz] if snap.cpu_freq_khz else None,
        "governors": None if snap.governors is None else list(snap.governors),
        "temp_c": None if snap.temp_mc is None else snap.temp_mc / 1000,
        "temp_zone": snap.temp_zone,
        "throttled_flags": snap.throttled_flags,
        "memory_bytes": memory,
        "busy_processes": [asdict(p) for p in busy],
        "sample_s": args.sample_s,
        "unavailable": unavailable,
    }
    print(json.dumps(report, separators=(",", ":")))
    return 0
