"""`h2iot-agent engines [--json]`: what each engine declares (agent.engines)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from agent.commands import add_example


def configure(engines: argparse.ArgumentParser) -> None:
    engines.add_argument("--json", action="store_true", help="one JSON line: a list of specs")
    add_example(engines, "h2iot-agent engines --json")
    engines.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.engines import engine_names, engine_spec  # noqa: PLC0415
    from agent.protocols import PROTOCOLS  # noqa: PLC0415

    specs = [engine_spec(name) for name in engine_names()]
    if args.json:
        print(json.dumps([asdict(spec) for spec in specs], separators=(",", ":")))
        return 0
    for spec in specs:
        sides = "serves" if spec.serves_only else "client and server"
        protocols = spec.protocols or PROTOCOLS
        workloads = ", ".join(spec.workloads) if spec.workloads else "every workload"
        print(f"{spec.name}: {spec.doc} ({sides}; over {', '.join(protocols)}; {workloads})")
    return 0
