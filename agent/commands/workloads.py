"""`h2iot-agent workloads [--json]`: what each workload declares (agent.workloads)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from agent.commands import add_example


def configure(workloads: argparse.ArgumentParser) -> None:
    workloads.add_argument("--json", action="store_true", help="one JSON line: a list of specs")
    add_example(workloads, "h2iot-agent workloads --json")
    workloads.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.engines import engines_where  # noqa: PLC0415
    from agent.workloads import SPECS  # noqa: PLC0415

    # Which engines run a workload is each engine's to say: asked here, listed with the spec.
    engines = {kind: list(engines_where(workload=kind)) for kind in SPECS}
    if args.json:
        specs = [{**asdict(spec), "engines": engines[spec.kind]} for spec in SPECS.values()]
        print(json.dumps(specs, separators=(",", ":")))
        return 0
    for spec in SPECS.values():
        print(f"{spec.kind}: {spec.doc} (engines: {', '.join(engines[spec.kind])})")
        for param in spec.params:
            unit = f" {param.unit}" if param.unit else ""
            print(
                f"  param {param.name} ({param.side}, {param.kind} {param.range_text()}, "
                f"default {json.dumps(param.default)}{unit}): {param.doc}"
            )
        for field in spec.fields:
            print(f"  field {field.name}: {field.doc}")
    return 0
