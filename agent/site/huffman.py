"""Huffman tables for JPEG (ITU-T T.81 Annex K.2), built from symbol frequencies.

Code lengths are limited to 16 bits and no code is all ones, as baseline decoders require.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

MAX_CODE_BITS = 16
# Annex K reserves one code point so that no real code is all ones: a pseudo-symbol that is
# rarer than any real one sinks to the longest length and is dropped after length limiting.
_RESERVED = 256


@dataclass(frozen=True)
class HuffmanTable:
    """A DHT table: `counts[i]` codes of length i + 1, `values` in code order, and each code."""

    counts: tuple[int, ...]
    values: tuple[int, ...]
    codes: Mapping[int, str]  # symbol -> code as a string of '0'/'1'


def _code_sizes(frequencies: Mapping[int, int]) -> dict[int, int]:
    heap: list[tuple[int, int, list[int]]] = [
        (count, symbol, [symbol]) for symbol, count in frequencies.items()
    ]
    heap.append((0, _RESERVED, [_RESERVED]))
    heapq.heapify(heap)
    sizes = dict.fromkeys((symbol for _, symbol, _ in heap), 0)
    tiebreak = _RESERVED + 1
    while len(heap) > 1:
        count_a, _, members_a = heapq.heappop(heap)
        count_b, _, members_b = heapq.heappop(heap)
        for symbol in members_a + members_b:
            sizes[symbol] += 1
        heapq.heappush(heap, (count_a + count_b, tiebreak, members_a + members_b))
        tiebreak += 1
    return sizes


def _limit_lengths(counts: list[int]) -> None:
    """Annex K, figure K.3: move codes longer than 16 bits up the tree, keeping Kraft's sum."""
    longest = len(counts) - 1
    while longest > MAX_CODE_BITS:
        while counts[longest] > 0:
            shorter = longest - 2
            while counts[shorter] == 0:
                shorter -= 1
            counts[longest] -= 2
            counts[longest - 1] += 1
            counts[shorter + 1] += 2
            counts[shorter] -= 1
        longest -= 1


def build_table(frequencies: Mapping[int, int]) -> HuffmanTable:
    """The Huffman table for byte symbols with the given (positive) frequencies."""
    if not frequencies:
        raise ValueError("a Huffman table needs at least one symbol")
    if any(not 0 <= symbol <= 255 or count <= 0 for symbol, count in frequencies.items()):
        raise ValueError("Huffman symbols are bytes with positive frequencies")
    sizes = _code_sizes(frequencies)
    counts = [0] * (max(sizes.values()) + 1)
    for size in sizes.values():
        counts[size] += 1
    _limit_lengths(counts)
    longest = max(i for i, count in enumerate(counts) if count)
    counts[longest] -= 1  # the reserved pseudo-symbol's code
    # Frequent symbols first, so that length limiting only lengthens the rarest codes.
    ordered = sorted(frequencies, key=lambda symbol: (sizes[symbol], -frequencies[symbol], symbol))
    codes: dict[int, str] = {}
    code = 0
    position = 0
    for length in range(1, MAX_CODE_BITS + 1):
        for _ in range(counts[length] if length < len(counts) else 0):
            codes[ordered[position]] = format(code, f"0{length}b")
            position += 1
            code += 1
        code <<= 1
    padded = [counts[i] if i < len(counts) else 0 for i in range(1, MAX_CODE_BITS + 1)]
    return HuffmanTable(counts=tuple(padded), values=tuple(ordered), codes=codes)
