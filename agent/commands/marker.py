"""`h2iot-agent marker pulse --marker SPEC [--width-s S]`: raise the trial marker, hold it, lower
it, and print the pulse's width as this node's clock timed it (one JSON line), so `h2iot rig
check` can compare it with the edges the meter saw."""

from __future__ import annotations

import argparse
import json
import time

from agent.commands import add_example


def configure(parser: argparse.ArgumentParser) -> None:
    add_example(parser, "h2iot-agent marker pulse --marker gpio:gpiochip0:17")
    actions = parser.add_subparsers(dest="marker_action", metavar="ACTION", required=True)
    pulse = actions.add_parser("pulse", help="one pulse: raise, hold, lower")
    add_example(pulse, "h2iot-agent marker pulse --marker fifo:/tmp/marker --width-s 0.5")
    pulse.add_argument("--marker", required=True, help="gpio:CHIP:LINE or fifo:PATH")
    pulse.add_argument("--width-s", type=float, default=0.2, help="how long it is high")
    pulse.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.errors import UsageError  # noqa: PLC0415
    from agent.marker import open_marker  # noqa: PLC0415

    if not 0 < args.width_s <= 10:
        raise UsageError(f"--width-s {args.width_s}: must be more than 0 and at most 10")
    marker = open_marker(args.marker)
    try:
        # The instants the line carries to the meter, where it carries any: a late reader
        # on the meter's side then sees the width timed here.
        rose_ns = marker.raise_line()
        time.sleep(args.width_s)
        fell_ns = marker.lower_line()
    finally:
        marker.close()
    print(json.dumps({"marker": marker.describe(), "width_s": (fell_ns - rose_ns) / 1e9}))
    return 0
