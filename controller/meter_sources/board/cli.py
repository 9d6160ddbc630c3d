"""`h2iot meter info|read|calibrate`: the board sources' verbs, on any port speaking the
firmware's frames (a board, the virtual meter's pty or the simulator's)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller.cli._help import FORMATTER, example
from controller.cli._meter import fail, sensor_options
from controller.errors import ConfigError, ControllerError, MeterError
from controller.meter.calibrate import measure_zero, suspicious_channels
from controller.meter.calibration import Calibration, nominal
from controller.meter.protocol import McuId
from controller.meter.session import DEFAULT_BAUD, MeterSession

__all__ = ["register"]

DEFAULT_CALIBRATION = Path("meter-calibration.json")


def register(actions: Any) -> None:
    info = actions.add_parser(
        "info",
        help="the board's identity and configuration",
        epilog=example("h2iot meter info --port /dev/ttyACM0 --json"),
        formatter_class=FORMATTER,
    )
    _port_options(info)
    info.add_argument("--json", action="store_true", help="print the INFO fields as JSON")
    info.set_defaults(handler=_info)

    read = actions.add_parser(
        "read",
        help="live power and a link summary",
        epilog=example(
            "h2iot meter read --port /dev/ttyACM0 --seconds 30 --calibration meter-calibration.json"
        ),
        formatter_class=FORMATTER,
    )
    _port_options(read)
    read.add_argument("--seconds", type=float, default=5.0, help="how long (default 5)")
    read.add_argument("--rate", type=int, metavar="HZ", help="set the sample rate first")
    read.add_argument("--channels", metavar="MASK", help="set the inputs first: 0x03 or A0,A1")
    read.add_argument("--interval", type=float, default=1.0, help="seconds per live line")
    _calibration_options(read)
    read.set_defaults(handler=_read)

    calibrate = actions.add_parser(
        "calibrate",
        help="measure the zero offset with no load",
        epilog=example("h2iot meter calibrate --port /dev/ttyACM0 --out meter-calibration.json"),
        formatter_class=FORMATTER,
    )
    _port_options(calibrate)
    sensor_options(calibrate)
    calibrate.add_argument("--seconds", type=float, default=2.0, help="measuring time")
    calibrate.add_argument(
        "--out", type=Path, default=DEFAULT_CALIBRATION, help=f"default {DEFAULT_CALIBRATION}"
    )
    calibrate.set_defaults(handler=_calibrate)


def _port_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", required=True, help="serial device: board, virtual or sim pty")
    parser.add_argument("--baud", type=int, default=DEFAULT_BAUD, help="default 500000")


def _calibration_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calibration", type=Path, help="calibration file (default: nominal for --variant)"
    )
    sensor_options(parser)


def _info(args: argparse.Namespace) -> int:
    try:
        with _session(args) as meter:
            info = meter.identify()
    except ControllerError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps(asdict(info), indent=2))
        return 0
    mcu = McuId(info.mcu_id).name if info.mcu_id in set(McuId) else f"MCU {info.mcu_id}"
    inputs = ", ".join(
        [f"A{n}" for n in info.channels] + [f"INA219@{a:#04x}" for a in info.i2c_addresses]
    )
    print(f"board         {info.board} ({mcu}, {info.f_cpu_hz / 1e6:g} MHz) on {args.port}")
    print(f"firmware      {info.fw_version}, protocol {info.protocol_version}")
    print(f"ADC           {info.adc_bits} bits, reference {info.adc_ref_mv} mV")
    print(f"sampling      {info.sample_rate_hz} Hz, {inputs}, oversampling {info.oversampling}")
    print(f"link          {info.baud} baud; marker on digital pin {info.marker_pin}")
    return 0


def _read(args: argparse.Namespace) -> int:
    try:
        with _session(args) as meter:
            info = meter.identify()
            if args.rate is not None:
                meter.set_rate(args.rate)
            if args.channels is not None:
                meter.set_channels(_mask(args.channels))
            info = meter.identify()
            calibration = _load_calibration(args, info.channels)
            for n in info.channels:
                calibration.channel(n)
            meter.start()
            shown = 0
            started = time.monotonic()
            while (elapsed := time.monotonic() - started) < args.seconds:
                time.sleep(min(args.interval, max(0.0, args.seconds - elapsed)))
                end = meter.samples.next_index
                _live_line(meter, calibration, info.channels, shown, end)
                shown = end
            try:
                final = meter.stop()
            except MeterError:
                # A board that sent nothing after START may not answer STOP either: the
                # samples that never came are what the user needs to hear about.
                if not meter.samples.received:
                    raise _no_samples(meter, args.seconds) from None
                raise
            health = meter.health()
            window = meter.samples.all()
            if not len(window.indices):
                raise _no_samples(meter, args.seconds)
            jumped = meter.samples.jumped_frames
    except ControllerError as exc:
        return fail(exc)
    print(f"-- {args.port}: {info.board}, {info.sample_rate_hz} Hz configured")
    for column, n in enumerate(info.channels):
        power = calibration.power_mw(window.values[:, column], n)
        if len(power):
            energy = float(power.sum()) / info.sample_rate_hz
            print(
                f"A{n}  mean {power.mean():8.1f} mW  min {power.min():8.1f}  "
                f"max {power.max():8.1f}  energy {energy:10.1f} mJ"
            )
    received = len(window.indices)
    taken, dropped = final.samples_taken, final.samples_dropped
    # The board's counters and what arrived can disagree (a confused board): no count printed
    # goes below 0, and the disagreement is said in words.
    missing = max(0, taken - received)
    print(
        f"samples       {taken} taken, {received} received, {missing} missing: "
        f"{dropped} dropped by the meter (link too slow), "
        f"{max(0, missing - dropped)} lost on the link"
    )
    if taken < received or dropped > missing:
        print(
            f"note          the board's counters ({taken} taken, {dropped} dropped) disagree "
            f"with the {received} samples received"
        )
    achieved = received / health.elapsed_s
    print(f"sample rate   {achieved:.1f} Hz achieved over {health.elapsed_s:.2f} s")
    refused = f", {jumped} frames with implausible sample indices ignored" if jumped else ""
    print(
        f"link          {health.crc_failures} CRC failures, {health.frames_missed} frames missed "
        f"(sequence gaps), {health.bytes_discarded} bytes discarded{refused}"
    )
    return 0


def _no_samples(meter: MeterSession, seconds: float) -> MeterError:
    return MeterError(f"meter on {meter.name}: no samples arrived in {seconds:g} s after START")


def _calibrate(args: argparse.Namespace) -> int:
    try:
        with _session(args) as meter:
            calibration = measure_zero(meter, args.seconds, args.variant, args.supply_v)
        calibration.save(args.out)
    except ControllerError as exc:
        return fail(exc)
    except OSError as exc:
        return fail(ConfigError(f"--out {args.out}: cannot write: {exc.strerror}"))
    for channel in calibration.channels:
        zero_mv = channel.zero_code * calibration.lsb_mv
        print(
            f"A{channel.analog_input}: zero {channel.zero_code:.2f} codes ({zero_mv:.1f} mV), "
            f"noise {channel.zero_noise_code:.2f} codes, {channel.zero_samples} samples"
        )
    for channel in suspicious_channels(calibration):
        print(
            f"h2iot: warning: A{channel.analog_input} zero is far from mid-scale: "
            "was a load connected?",
            file=sys.stderr,
        )
    print(f"calibration ({args.variant}, {args.supply_v:g} V) written to {args.out}")
    return 0


def _session(args: argparse.Namespace) -> MeterSession:
    if not os.path.exists(args.port):
        raise ConfigError(f"--port {args.port}: no such device")
    return MeterSession.open(args.port, args.baud)


def _mask(text: str) -> int:
    try:
        if text.upper().startswith("A"):
            return sum(1 << int(part.strip()[1:]) for part in text.split(","))
        return int(text, 0)
    except ValueError:
        raise ConfigError(
            f"--channels {text!r}: expected a mask (0x03) or inputs (A0,A1)"
        ) from None


def _load_calibration(args: argparse.Namespace, inputs: tuple[int, ...]) -> Calibration:
    if args.calibration is not None:
        return Calibration.load(args.calibration)
    return nominal(inputs, args.variant, args.supply_v)


def _live_line(
    meter: MeterSession, calibration: Calibration, inputs: tuple[int, ...], first: int, end: int
) -> None:
    window = meter.samples.window(first, end)
    if not len(window.indices):
        print(f"t {first}..{end}: no samples")
        return
    parts = [
        f"A{n} {calibration.power_mw(window.values[:, c], n).mean():8.1f} mW"
        for c, n in enumerate(inputs)
    ]
    health = meter.health()
    print(
        f"sample {end:>8}  " + "  ".join(parts) + f"  ({health.sample_rate_hz:.0f} Hz, "
        f"{health.crc_failures} CRC, {health.frames_missed} gaps)",
        flush=True,
    )
