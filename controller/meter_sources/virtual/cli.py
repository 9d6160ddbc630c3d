"""`h2iot meter virtual`: the virtual meter on a pty, for any client of the firmware's
protocol; with `--device NAME` another source's emulated device instead (a source whose
declaration names an `emulator`, e.g. the PPK2's)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from controller.cli._help import FORMATTER, example
from controller.cli._meter import fail, model_options, modelled, serve_meter
from controller.config.meter_sources import SPECS, MeterSourceSpec, spec_of
from controller.errors import ControllerError
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions

__all__ = ["register"]

ARDUINO = "arduino"  # the default --device: the Arduino sketch's frames


def _emulated() -> Iterator[MeterSourceSpec]:
    return (spec for spec in SPECS.values() if spec.emulator is not None)


def register(actions: Any) -> None:
    virtual = actions.add_parser(
        "virtual",
        help="a pty speaking the meter protocol, powered by a Pi 3B model of watched processes",
        epilog=example("h2iot meter virtual --watch-pid 4242 --duration 60 --truth truth.csv"),
        formatter_class=FORMATTER,
    )
    model_options(virtual)
    virtual.add_argument("--truth", type=Path, help="write the modelled power (CSV) here")
    virtual.add_argument(
        "--tick-s", type=float, default=0.01, help="CPU measuring period (default 0.01)"
    )
    emulators = {spec.name: spec.load(f"{spec.emulator}:add_options") for spec in _emulated()}
    virtual.add_argument(
        "--device",
        choices=(ARDUINO, *emulators),
        default=ARDUINO,
        help="what the pty is: "
        + " or ".join(
            [
                "the Arduino sketch's protocol (default)",
                *(spec.load(f"{spec.emulator}:DEVICE") for spec in _emulated()),
            ]
        ),
    )
    for add_options in emulators.values():
        add_options(virtual)
    virtual.set_defaults(handler=_virtual)


def _virtual(args: argparse.Namespace) -> int:
    if args.device != ARDUINO:
        spec = spec_of(args.device)
        code: int = spec.load(f"{spec.emulator}:serve")(args)
        return code
    try:
        meter = VirtualMeter(VirtualMeterOptions(**modelled(args)))
    except ControllerError as exc:
        return fail(exc)
    return serve_meter(meter, args.duration)
