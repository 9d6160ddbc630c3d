"""The JPEG Huffman tables' code-length limiting (Annex K, figure K.3), which random frequencies
almost never reach: skewed frequencies (Fibonacci numbers, the worst case) give a Huffman tree
far deeper than the 16 bits a baseline decoder accepts."""

from __future__ import annotations

import itertools

import pytest

from agent.site.huffman import MAX_CODE_BITS, build_table


def _fibonacci(n: int) -> list[int]:
    numbers = [1, 1]
    while len(numbers) < n:
        numbers.append(numbers[-1] + numbers[-2])
    return numbers[:n]


@pytest.mark.parametrize("symbols", [18, 24, 40, 100])
def test_skewed_frequencies_are_limited_to_16_bits_and_stay_a_prefix_code(symbols: int) -> None:
    frequencies = dict(enumerate(reversed(_fibonacci(symbols))))  # symbol 0 the most frequent
    table = build_table(frequencies)
    lengths = {symbol: len(code) for symbol, code in table.codes.items()}
    assert max(lengths.values()) == MAX_CODE_BITS  # limited, and the limit is used
    assert sorted(table.codes) == sorted(frequencies)
    codes = sorted(table.codes.values())
    for shorter, longer in itertools.pairwise(codes):
        assert not longer.startswith(shorter)
    assert all(set(code) != {"1"} for code in codes)
    assert sum(2.0**-n for n in lengths.values()) < 1  # room left for the reserved all-ones
    # Counts per length agree with the codes, and a more frequent symbol never gets a longer
    # code: limiting lengthens only the rarest.
    assert list(table.counts) == [
        sum(1 for n in lengths.values() if n == k) for k in range(1, MAX_CODE_BITS + 1)
    ]
    for a, b in itertools.combinations(frequencies, 2):
        if frequencies[a] > frequencies[b]:
            assert lengths[a] <= lengths[b], (a, b)
    assert lengths[0] == 1


def test_lengths_within_the_limit_are_left_as_huffman_made_them() -> None:
    # 15 Fibonacci frequencies: a tree 15 deep (with the reserved code point), no limiting;
    # the two rarest (both 1) share the two deepest levels.
    table = build_table(dict(enumerate(reversed(_fibonacci(15)))))
    lengths = [len(table.codes[s]) for s in range(15)]
    assert lengths[:13] == list(range(1, 14))
    assert sorted(lengths[13:]) == [14, 15]
