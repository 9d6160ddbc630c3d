"""`h2iot meter simulate`: the real firmware in simavr on a pty, its ADC fed by the power
model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from controller.cli._help import FORMATTER, example
from controller.cli._meter import fail, model_options, modelled, serve_meter
from controller.errors import ControllerError
from controller.meter.simulate import SimulatedMeter, SimulateOptions

__all__ = ["register"]


def register(actions: Any) -> None:
    simulate = actions.add_parser(
        "simulate",
        help="the real firmware in simavr (firmware/sim), its ADC fed by the same power model",
        epilog=example("h2iot meter simulate --watch-pid 4242 --duration 60"),
        formatter_class=FORMATTER,
    )
    model_options(simulate)
    simulate.add_argument("--truth", type=Path, help="write the modelled power (CSV) here")
    simulate.add_argument(
        "--tick-s", type=float, default=0.01, help="input and pacing period (default 0.01)"
    )
    simulate.set_defaults(handler=_simulate)


def _simulate(args: argparse.Namespace) -> int:
    try:
        meter = SimulatedMeter(SimulateOptions(**modelled(args)))
    except ControllerError as exc:
        return fail(exc)
    return serve_meter(meter, args.duration)
