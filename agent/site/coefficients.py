"""Pseudo-random quantised DCT blocks, already Huffman-coded, for the noise in the site's images.

A block's AC part is a run of (zero-run, magnitude category, value bits) tokens drawn from a
fixed statistical model (dense, larger coefficients at low frequencies; sparser for chroma).
Each image draws a pool of such blocks from its own stream, builds the optimal AC Huffman table
for that pool (as `jpegtran -optimize` would), and then picks blocks from the pool: encoding a
block is a string lookup, which keeps a 7 MB site fast to build in CPython.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from agent.site._stream import ByteStream
from agent.site.huffman import HuffmanTable, build_table

EOB = 0x00
LAST_AC_INDEX = 63


def _weighted(weights: Mapping[int, int]) -> bytes:
    """A 256-entry lookup table that maps a uniform byte to a value with the given weights."""
    if sum(weights.values()) != 256:
        raise ValueError("weights of a byte lookup table must sum to 256")
    return b"".join(bytes([value]) * weight for value, weight in sorted(weights.items()))


@dataclass(frozen=True)
class BlockModel:
    """How many AC tokens a block has, their zero-runs, and their magnitude categories."""

    min_tokens: int
    extra_tokens: int  # tokens per block = min_tokens + (byte % extra_tokens)
    runs: bytes  # byte -> zero-run before the coefficient
    sizes: tuple[bytes, ...]  # per phase of `phase_tokens` tokens: byte -> magnitude category
    phase_tokens: int

    @property
    def bytes_per_block(self) -> int:
        return 1 + 3 * (self.min_tokens + self.extra_tokens)


LUMA = BlockModel(
    min_tokens=18,
    extra_tokens=24,
    runs=_weighted({0: 150, 1: 60, 2: 30, 3: 16}),
    sizes=(
        _weighted({2: 40, 3: 96, 4: 80, 5: 40}),
        _weighted({1: 64, 2: 96, 3: 64, 4: 32}),
        _weighted({1: 128, 2: 96, 3: 32}),
    ),
    phase_tokens=6,
)
CHROMA = BlockModel(
    min_tokens=3,
    extra_tokens=8,
    runs=_weighted({0: 96, 1: 64, 2: 48, 3: 32, 4: 16}),
    sizes=(_weighted({1: 96, 2: 112, 3: 48}), _weighted({1: 160, 2: 96})),
    phase_tokens=4,
)

_VALUE_BITS = [[format(value, f"0{size}b") for value in range(1 << size)] for size in range(16)]
_VALUE_BITS[0] = [""]


@dataclass(frozen=True)
class CodedPool:
    """Huffman-coded AC parts of pseudo-random blocks, plus the table that codes them."""

    table: HuffmanTable
    blocks: tuple[str, ...]  # each a string of '0'/'1', ending with EOB unless it fills index 63
    end_of_block: str  # the EOB code: the AC part of a block with no AC coefficients

    @property
    def mean_bits(self) -> float:
        return sum(map(len, self.blocks)) / len(self.blocks)


def _draw_tokens(model: BlockModel, data: bytes) -> list[tuple[int, str]]:
    """One block's tokens (Huffman symbol, value bits) from `model.bytes_per_block` bytes."""
    tokens: list[tuple[int, str]] = []
    wanted = model.min_tokens + data[0] % model.extra_tokens
    last_phase = len(model.sizes) - 1
    position = 0  # zig-zag index of the last coded coefficient; AC indexes run 1..63
    for number in range(wanted):
        offset = 1 + 3 * number
        run = model.runs[data[offset]]
        if position + run + 1 > LAST_AC_INDEX:
            break
        size = model.sizes[min(number // model.phase_tokens, last_phase)][data[offset + 1]]
        value = data[offset + 2] & ((1 << size) - 1)
        tokens.append(((run << 4) | size, _VALUE_BITS[size][value]))
        position += run + 1
    if position < LAST_AC_INDEX:
        tokens.append((EOB, ""))
    return tokens


def draw_pool(model: BlockModel, stream: ByteStream, count: int) -> CodedPool:
    """`count` pseudo-random blocks drawn from `stream`, coded with their own optimal table."""
    step = model.bytes_per_block
    data = stream.take(step * count)
    drawn = [_draw_tokens(model, data[i * step : (i + 1) * step]) for i in range(count)]
    frequencies = Counter(symbol for tokens in drawn for symbol, _ in tokens)
    frequencies[EOB] += 1  # flat blocks (no AC at all) need an EOB code even if no pool block ends
    table = build_table(frequencies)
    codes = table.codes
    blocks = tuple("".join(codes[symbol] + bits for symbol, bits in tokens) for tokens in drawn)
    return CodedPool(table=table, blocks=blocks, end_of_block=codes[EOB])
