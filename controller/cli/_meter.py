"""What the `h2iot meter` verbs share, whichever source's folder declares them
(controller/meter_sources/<name>/cli.py): the sensor's and the power model's flags, the
options a modelled meter is built from, serving until interrupted, and the error line."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.errors import ConfigError, ControllerError
from controller.meter.calibration import ACS712_SENSITIVITY_MV_PER_A
from controller.meter.node_power import WatchSpec
from controller.meter.power_model import PI_3B, PowerModel
from controller.meter.sensor import Acs712
from controller.meter.simulate import SimulatedMeter
from controller.meter.virtual import VirtualMeter

__all__ = [
    "VARIANTS",
    "fail",
    "model_options",
    "modelled",
    "power_model",
    "sensor_options",
    "serve_meter",
    "stop_on_signals",
]

VARIANTS = tuple(ACS712_SENSITIVITY_MV_PER_A)


def sensor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", choices=VARIANTS, default="5A", help="ACS712 part")
    parser.add_argument("--supply-v", type=float, default=5.0, help="node supply (default 5.0)")


def model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--watch-pid",
        dest="watch",
        action="append",
        type=lambda text: f"pid:{text}",
        default=[],
        metavar="PID",
        help="a node's process (its whole tree); the n-th watched source drives input An",
    )
    parser.add_argument(
        "--watch",
        dest="watch",
        action="append",
        metavar="SPEC",
        help="pid:PID or cgroup:PATH (v1 or v2 cgroup directory), in input order with --watch-pid",
    )
    parser.add_argument(
        "--marker-fifo",
        type=Path,
        help="FIFO of marker edges: 'LEVEL MONO_NS' lines (agent --marker fifo:PATH) or bare 1/0",
    )
    parser.add_argument("--no-load", action="store_true", help="zero current (to calibrate)")
    parser.add_argument("--zero-offset-mv", type=float, default=0.0, help="sensor offset error")
    parser.add_argument("--idle-mw", type=float, default=PI_3B.idle_mw, help="model at idle")
    parser.add_argument("--full-mw", type=float, default=PI_3B.full_mw, help="at full load")
    parser.add_argument("--cores", type=int, default=PI_3B.cores, help="modelled board's cores")
    parser.add_argument(
        "--network-nj-per-byte",
        type=float,
        default=PI_3B.network_nj_per_byte,
        help="the model's network term, per byte on --net-interface (0: none)",
    )
    parser.add_argument(
        "--net-interface",
        metavar="IFACE",
        help="the watched nodes' network interface, whose traffic drives the network term "
        "(lo is counted once per frame); default: no network term",
    )
    parser.add_argument("--seed", type=int, help="noise seed (default: random)")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    sensor_options(parser)


# --- handlers -------------------------------------------------------------------------------


def modelled(args: argparse.Namespace) -> dict[str, Any]:
    """The options every modelled meter is built from (`ModelledMeterOptions`'s), from the
    flags `model_options` adds."""
    return {
        "watch": tuple(
            replace(WatchSpec.parse(spec), interface=args.net_interface) for spec in args.watch
        ),
        "truth_path": args.truth,
        "marker_fifo": args.marker_fifo,
        "model": power_model(args),
        "sensor": Acs712(args.variant, args.supply_v, zero_offset_mv=args.zero_offset_mv),
        "no_load": args.no_load,
        "tick_s": args.tick_s,
        "seed": args.seed,
    }


def serve_meter(meter: VirtualMeter | SimulatedMeter, duration: float | None) -> int:
    """Print the pty, serve until SIGINT/SIGTERM or the duration, close."""
    stop_on_signals(meter.request_stop, duration)  # before the port is out: a client may stop us
    print(meter.port, flush=True)
    try:
        meter.run()
    except ControllerError as exc:
        return fail(exc)
    finally:
        meter.close()
    return 0


def stop_on_signals(stop: Any, duration: float | None) -> None:
    """SIGINT/SIGTERM (and --duration) end a serving command cleanly."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop())
    if duration is not None:
        timer = threading.Timer(duration, stop)
        timer.daemon = True
        timer.start()


def power_model(args: argparse.Namespace) -> PowerModel:
    if args.cores < 1 or args.full_mw < args.idle_mw or args.idle_mw < 0:
        raise ConfigError("--idle-mw/--full-mw/--cores: need 0 <= idle <= full and cores >= 1")
    if args.network_nj_per_byte < 0:
        raise ConfigError("--network-nj-per-byte: must be 0 or more")
    return PowerModel(
        args.idle_mw, args.full_mw, args.cores, network_nj_per_byte=args.network_nj_per_byte
    )


def fail(exc: ControllerError) -> int:
    print(f"h2iot: error: {exc}", file=sys.stderr)
    return exc.exit_status
