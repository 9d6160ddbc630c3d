"""`h2iot-agent api-db FILE --records N`: the api workload's seeded SQLite database."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.commands import add_example


def configure(build: argparse.ArgumentParser) -> None:
    build.add_argument("file", type=Path)
    build.add_argument("--records", type=int, default=1000, help="rows per resource (default 1000)")
    add_example(build, "h2iot-agent api-db /tmp/api.sqlite --records 1000")
    build.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.errors import UsageError  # noqa: PLC0415
    from agent.workloads.api.spec import API  # noqa: PLC0415
    from agent.workloads.api.store import build_database  # noqa: PLC0415
    from agent.workloads.spec import ParamError  # noqa: PLC0415

    try:
        records = int(API.param("records").check(args.records))
    except ParamError as exc:
        raise UsageError(f"--records: {exc.reason}") from None
    written = build_database(args.file, records)
    state = "wrote" if written else "kept"
    print(f"{state} {args.file}: 7 resources x {records} rows")
    return 0
