"""`h2iot meter virtual --device ppk2`: an emulated Nordic PPK2 on a pty (its USB serial
protocol, 100 kS/s sample words, the marker FIFO on a logic input), for ppk2-api or any PPK2
client to open; `add_options` adds its flags to the virtual verb, `serve` runs it."""

from __future__ import annotations

import argparse
import threading

from controller.cli._meter import fail, modelled, stop_on_signals
from controller.errors import ConfigError, ControllerError
from controller.meter.node_power import ModelledMeterOptions
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ, VDD_MAX_MV, VDD_MIN_MV
from controller.meter.ppk2.modelled import ModelledPpk2, ModelledPpk2Source

__all__ = ["DEVICE", "add_options", "serve"]

DEVICE = "a Nordic PPK2 (the first watched source, --supply-v its supply, 0.8-5 V)"
_ERROR_POLL_S = 0.1  # how often a serving emulated PPK2 is asked whether its thread failed


def add_options(virtual: argparse.ArgumentParser) -> None:
    virtual.add_argument(
        "--marker-input",
        type=int,
        default=0,
        metavar="N",
        help="with --device ppk2: the logic input D0-D7 the marker FIFO sets (default 0)",
    )
    virtual.add_argument(
        "--rate-hz",
        type=int,
        default=1000,
        help="with --device ppk2: the rate --truth is written at, the bins a reader averages "
        f"the {SAMPLE_RATE_HZ} S/s stream into (a divisor of it; default 1000)",
    )


def _ppk2(args: argparse.Namespace) -> ModelledPpk2:
    """The emulated PPK2 the flags describe, driven by the model of the first watched source."""
    supply_mv = round(args.supply_v * 1000)
    if not VDD_MIN_MV <= supply_mv <= VDD_MAX_MV:
        raise ConfigError(f"--supply-v {args.supply_v:g}: a PPK2 supplies 0.8-5 V")
    if not 0 <= args.marker_input <= 7:
        raise ConfigError(f"--marker-input {args.marker_input}: a PPK2 has inputs D0-D7")
    if not 0 < args.rate_hz <= SAMPLE_RATE_HZ or SAMPLE_RATE_HZ % args.rate_hz:
        raise ConfigError(f"--rate-hz {args.rate_hz}: must divide {SAMPLE_RATE_HZ}")
    if len(args.watch) > 1:
        raise ConfigError("--device ppk2: a PPK2 measures one node, watch one source")
    options = ModelledMeterOptions(**modelled(args))
    source = ModelledPpk2Source(options, supply_mv, args.marker_input, rate_hz=args.rate_hz)
    return ModelledPpk2(source)


def serve(args: argparse.Namespace) -> int:
    """Print the emulated PPK2's pty, serve until SIGINT/SIGTERM or the duration, close: the
    emulator serves from its own thread, so this one only waits, and says why it failed."""
    try:
        meter = _ppk2(args)
    except ControllerError as exc:
        return fail(exc)
    stopped = threading.Event()
    stop_on_signals(stopped.set, args.duration)
    try:
        meter.start()
        print(meter.port, flush=True)
        while not stopped.wait(_ERROR_POLL_S):
            if meter.error is not None:
                raise meter.error
    except ControllerError as exc:
        return fail(exc)
    finally:
        meter.close()
    return 0
