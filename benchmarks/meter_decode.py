"""Meter decoding cost, measured (not a test): run `python benchmarks/meter_decode.py`.

1. Decoder throughput: streams framed as firmware 1.0.0 frames them (about 10 ms of samples per
   frame, at most 128 values) are fed to FrameDecoder in 4 KiB chunks; samples per second of
   CPU against what a 500000-baud link can carry at most (10 bits per byte, 100 % load).
2. Reader CPU: the reader thread, decoder and sample store read a pty fed by another process
   (a) at 95 % of the link in 1 ms pieces, as a USB serial bridge delivers a board's bytes, and
   (b) by `h2iot meter virtual` through a whole MeterSession; the CPU time of this process over
   wall time is the reader's cost, as % of one core.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import serial

from controller.meter.decoder import FrameDecoder
from controller.meter.device import samples_per_frame
from controller.meter.protocol import (
    OVERHEAD_BYTES,
    Frame,
    Samples,
    Status,
    encode_device_frame,
)
from controller.meter.reader import SerialReader
from controller.meter.samples import SampleStore
from controller.meter.session import MeterSession

BAUD = 500_000
LINK_BYTES_PER_S = BAUD / 10
CONFIGS = [(1000, 2), (5000, 2), (10_000, 1), (10_000, 2)]  # (rate Hz, channels)


def wire_stream(rate_hz: int, channels: int, seconds: float) -> tuple[bytes, int]:
    per_frame = samples_per_frame(rate_hz, channels, 128)
    rng = np.random.default_rng(0)
    frames = []
    seq = 0
    total = int(rate_hz * seconds)
    for first in range(0, total, per_frame):
        values = rng.integers(400, 700, size=(per_frame, channels), dtype=np.uint16)
        frames.append(encode_device_frame(Samples(seq, first, values)))
        seq += 1
        if (first + per_frame) % rate_hz < per_frame:
            frames.append(encode_device_frame(Status(seq, first + per_frame, 0, seq, 0, True)))
            seq += 1
    return b"".join(frames), total


def link_limit_samples_per_s(rate_hz: int, channels: int) -> float:
    per_frame = samples_per_frame(rate_hz, channels, 128)
    frame_bytes = OVERHEAD_BYTES + 5 + 2 * per_frame * channels
    return LINK_BYTES_PER_S / frame_bytes * per_frame


def decoder_throughput(rate_hz: int, channels: int, repeats: int) -> float:
    stream, total = wire_stream(rate_hz, channels, seconds=20)
    chunks = [stream[i : i + 4096] for i in range(0, len(stream), 4096)]
    best = float("inf")
    for _ in range(repeats):
        decoder = FrameDecoder()
        start = time.process_time()
        count = 0
        for chunk in chunks:
            for frame in decoder.feed(chunk):
                if isinstance(frame, Samples):
                    count += frame.count
        best = min(best, time.process_time() - start)
        assert count == total and decoder.stats.crc_failures == 0
    return total / best


def reader_cpu(rate_hz: int, channels: int, seconds: float, batch_s: float) -> tuple[float, int]:
    virtual = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "meter", "virtual", "--seed", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert virtual.stdout is not None
    port = virtual.stdout.readline().strip()
    try:
        with MeterSession.open(port, batch_s=batch_s) as meter:
            meter.identify()
            meter.set_rate(rate_hz)
            meter.set_channels((1 << channels) - 1)
            meter.start()
            time.sleep(0.5)
            cpu0, wall0 = time.process_time(), time.monotonic()
            time.sleep(seconds)
            cpu1, wall1 = time.process_time(), time.monotonic()
            final = meter.stop()
            received = meter.samples.received
            assert final.samples_taken == received + final.samples_dropped
            return 100 * (cpu1 - cpu0) / (wall1 - wall0), received
    finally:
        virtual.send_signal(signal.SIGTERM)
        virtual.wait()


# Writes a recorded stream to a pty in 1 ms pieces at the link's byte rate, as a USB serial
# bridge delivers a board's bytes: the reader cannot rely on bursts to batch its reads.
PACED_PRODUCER = """
import os, sys, time, tty
master, slave = os.openpty()
tty.setraw(slave)
print(os.ttyname(slave), flush=True)
data = open(sys.argv[1], "rb").read()
step = int(float(sys.argv[2]) / 1000)
start = time.monotonic()
for k, i in enumerate(range(0, len(data), step)):
    os.write(master, data[i : i + step])
    delay = start + (k + 1) / 1000 - time.monotonic()
    if delay > 0:
        time.sleep(delay)
time.sleep(1)
"""


def paced_reader_cpu(rate_hz: int, channels: int, seconds: float, batch_s: float) -> float:
    stream, _ = wire_stream(rate_hz, channels, seconds + 1)
    with tempfile.NamedTemporaryFile(suffix=".bin") as recording:
        recording.write(stream)
        recording.flush()
        producer = subprocess.Popen(
            [sys.executable, "-c", PACED_PRODUCER, recording.name, str(LINK_BYTES_PER_S * 0.95)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert producer.stdout is not None
        port = serial.Serial(producer.stdout.readline().strip(), BAUD, timeout=0.2)
        store = SampleStore()

        def keep(frames: list[Frame], t_ns: int) -> None:
            for frame in frames:
                if isinstance(frame, Samples):
                    store.add(frame, t_ns)

        reader = SerialReader(port, FrameDecoder(), keep, batch_s=batch_s)
        reader.start()
        time.sleep(0.5)
        cpu0, wall0 = time.process_time(), time.monotonic()
        time.sleep(seconds)
        cpu1, wall1 = time.process_time(), time.monotonic()
        reader.stop()
        port.close()
        producer.kill()
        producer.wait()
    return 100 * (cpu1 - cpu0) / (wall1 - wall0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="per reader measurement")
    parser.add_argument("--repeats", type=int, default=3, help="decoder runs, best kept")
    args = parser.parse_args()

    print("Decoder throughput (samples = sample instants; values = samples x channels)")
    print(f"{'rate x ch':>12} {'per frame':>9} {'link max/s':>11} {'decoded/s':>12} "
          f"{'values/s':>12} {'ratio':>8}")  # fmt: skip
    for rate, channels in CONFIGS:
        limit = link_limit_samples_per_s(rate, channels)
        decoded = decoder_throughput(rate, channels, args.repeats)
        print(
            f"{rate:>7} x {channels:<2} {samples_per_frame(rate, channels, 128):>9} "
            f"{limit:>11,.0f} {decoded:>12,.0f} {decoded * channels:>12,.0f} "
            f"{decoded / limit:>7,.0f}x"
        )

    print()
    print(
        f"Reader CPU, bytes trickling in 1 ms pieces at 95 % of {BAUD} baud, {args.seconds:g} s "
        "(% of one core; target <= 2 %)"
    )
    print(f"{'rate x ch':>12} {'batch ms':>9} {'CPU %':>7}")
    for batch_s in (0.0, 0.002, 0.005, 0.01):
        cpu = paced_reader_cpu(10_000, 2, args.seconds, batch_s)
        print(f"{10_000:>7} x {2:<2} {batch_s * 1000:>9g} {cpu:>7.2f}")

    print()
    print(f"Session reading the virtual meter, {args.seconds:g} s each (% of one core)")
    print(f"{'rate x ch':>12} {'batch ms':>9} {'CPU %':>7} {'samples/s':>10}")
    for rate, channels in ((1000, 2), (10_000, 2)):
        for batch_s in (0.0, 0.005, 0.01):
            cpu, received = reader_cpu(rate, channels, args.seconds, batch_s)
            print(
                f"{rate:>7} x {channels:<2} {batch_s * 1000:>9g} {cpu:>7.2f} "
                f"{received / (args.seconds + 0.5):>10,.0f}"
            )


if __name__ == "__main__":
    main()
