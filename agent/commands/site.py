"""`h2iot-agent site build DIR`: the page workload's deterministic site."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.commands import add_example


def configure(site: argparse.ArgumentParser) -> None:
    add_example(site, "h2iot-agent site build /tmp/site")
    site_commands = site.add_subparsers(dest="site_command", metavar="ACTION", required=True)
    build = site_commands.add_parser("build", help="write the deterministic test page")
    add_example(build, "h2iot-agent site build /tmp/site --seed 3 --total-bytes 1000000")
    build.add_argument("directory", type=Path)
    build.add_argument("--seed", type=int, default=0)
    build.add_argument(
        "--total-bytes",
        type=int,
        default=None,
        help="approximate size of the page with all its files (default 7 MB)",
    )
    build.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.site import DEFAULT_TOTAL_BYTES, build_site  # noqa: PLC0415

    total = DEFAULT_TOTAL_BYTES if args.total_bytes is None else args.total_bytes
    manifest = build_site(args.directory, seed=args.seed, total_bytes=total)
    print(f"wrote {len(manifest.files)} files, {manifest.total_bytes} bytes, to {args.directory}")
    return 0
