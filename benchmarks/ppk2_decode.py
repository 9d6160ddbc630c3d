"""PPK2 decoding cost, measured (not a test): run `python benchmarks/ppk2_decode.py`.

N seconds (default 5) of the PPK2's 100 kS/s stream, made by the emulated device
(controller.meter.ppk2.device) from two current traces, are decoded on one core by
Ppk2Decoder and by ppk2-api 0.9.2's `get_samples` (its conversion and spike filter, pure
Python), on the same bytes, fed in pieces of 10 ms (what a reader polling every 10 ms gets)
and whole. Reported: the best CPU time of `--repeats` runs each (process time), samples per
second of CPU, how many times real time that is, the ratio ppk2-api / ours, and the largest
difference between the two decodings (a check that both did the same work).

Traces: `steady`, a node drawing 180-260 mA of noise (range 3 throughout: no spike filter
work); `switching`, a duty-cycled sensor node (5 uA asleep, 20 mA awake, 120 mA radio bursts,
a change every 0.2-2 ms: the spike filter replaces about 1 % of the samples).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

try:
    from ppk2_api.ppk2_api import PPK2_API  # type: ignore[import-untyped]
except ImportError:  # main() says the comparison needs it
    PPK2_API = None

from controller.meter.ppk2 import (
    EXAMPLE_METADATA,
    SAMPLE_RATE_HZ,
    Ppk2Decoder,
    Ppk2Device,
    format_metadata,
)

VDD_MV = 3300
CHUNK_BYTES = 4 * SAMPLE_RATE_HZ // 100  # 10 ms of words


def steady(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    return rng.uniform(180_000, 260_000, n)


def switching(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    levels = np.array([5.0, 20_000.0, 120_000.0])
    lengths = rng.integers(20, 200, size=n // 20 + 1)
    states = rng.choice(levels.size, size=lengths.size, p=[0.5, 0.35, 0.15])
    trace = np.repeat(levels[states], lengths)[:n]
    return trace * rng.normal(1.0, 0.02, n)


TRACES: dict[str, Callable[[int, np.random.Generator], NDArray[np.float64]]] = {
    "steady": steady,
    "switching": switching,
}


def stream(trace: NDArray[np.float64]) -> bytes:
    device = Ppk2Device()
    device.receive(b"\x11\x02\x0d" + VDD_MV.to_bytes(2, "big") + b"\x0c\x01\x06")
    device.samples(trace.size, trace, 0)
    return b"".join(device.data_to_send())


def pieces(data: bytes, chunk: int | None) -> list[bytes]:
    if chunk is None:
        return [data]
    return [data[i : i + chunk] for i in range(0, len(data), chunk)]


def ours(chunks: list[bytes]) -> tuple[float, NDArray[np.float64]]:
    decoder = Ppk2Decoder(EXAMPLE_METADATA, VDD_MV)
    start = time.process_time()
    blocks = [decoder.feed(chunk) for chunk in chunks]
    blocks.append(decoder.flush())  # the last words wait for the stream's end
    elapsed = time.process_time() - start
    assert decoder.totals.lost_samples == 0 and decoder.totals.resyncs == 0
    return elapsed, np.concatenate([b.current_ua for b in blocks])


def theirs(chunks: list[bytes]) -> tuple[float, NDArray[np.float64]]:
    api = PPK2_API(None)  # serial.Serial(None) opens nothing: the conversion alone
    api._parse_metadata(format_metadata(EXAMPLE_METADATA).decode())
    api.current_vdd = VDD_MV  # what set_source_voltage stores (it would also write a command)
    samples: list[float] = []
    start = time.process_time()
    for chunk in chunks:
        samples += api.get_samples(chunk)[0]
    elapsed = time.process_time() - start
    return elapsed, np.array(samples)


def best(
    run: Callable[[list[bytes]], tuple[float, NDArray[np.float64]]],
    chunks: list[bytes],
    repeats: int,
) -> tuple[float, NDArray[np.float64]]:
    results = [run(chunks) for _ in range(repeats)]
    return min(r[0] for r in results), results[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="of 100 kS/s data")
    parser.add_argument("--repeats", type=int, default=3, help="runs per decoder, best kept")
    args = parser.parse_args()
    if PPK2_API is None:
        parser.exit(1, "ppk2-api is not installed (the comparison needs it)\n")

    n = int(args.seconds * SAMPLE_RATE_HZ)
    print(f"{args.seconds:g} s at 100 kS/s = {n:,} samples; CPU seconds, best of {args.repeats}")
    print(
        f"{'trace':>10} {'pieces':>7} {'ours s':>8} {'x real':>7} {'ppk2-api s':>11} "
        f"{'x real':>7} {'ratio':>7} {'max |diff| uA':>14}"
    )
    for name, make in TRACES.items():
        data = stream(make(n, np.random.default_rng(1)))
        for chunk, label in ((CHUNK_BYTES, "10 ms"), (None, "whole")):
            chunks = pieces(data, chunk)
            our_s, our_ua = best(ours, chunks, args.repeats)
            their_s, their_ua = best(theirs, chunks, args.repeats)
            assert our_ua.size == their_ua.size == n
            diff = float(np.abs(our_ua - their_ua).max())
            print(
                f"{name:>10} {label:>7} {our_s:>8.3f} {args.seconds / our_s:>7.0f} "
                f"{their_s:>11.3f} {args.seconds / their_s:>7.1f} {their_s / our_s:>6.1f}x "
                f"{diff:>14.2e}"
            )


if __name__ == "__main__":
    main()
