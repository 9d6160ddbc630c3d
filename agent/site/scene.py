"""The picture under the noise: a landscape (sky, rolling horizon, ground) as per-block means.

The site's images are noise over this scene so that a person who opens one sees a picture, and
so that DC coefficients vary smoothly as in a photograph. Levels are block means minus 128, which
is the quantised DC coefficient when the DC quantiser is 8.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.site._stream import ByteStream

_LEVEL_LIMIT = 127


@dataclass(frozen=True)
class BlockLevels:
    """One row of blocks: the mean of each block minus 128, per component."""

    luma: list[int]
    blue: list[int]
    red: list[int]


def _wave(turns: float) -> float:
    """A sine-like wave of period 1 from parabolas.

    Only +, -, * and %, which IEEE 754 rounds the same everywhere, unlike `math.sin`, whose
    last bit may differ between C libraries: the site must be byte-identical on every node.
    """
    phase = turns % 1.0
    if phase < 0.5:
        return 16 * phase * (0.5 - phase)
    return -16 * (phase - 0.5) * (1 - phase)


def _clamp(level: float) -> int:
    return max(-_LEVEL_LIMIT, min(_LEVEL_LIMIT, round(level)))


class Scene:
    """A landscape `columns` blocks wide and about `rows` blocks high, shaped by `stream`."""

    def __init__(self, stream: ByteStream, columns: int, rows: int) -> None:
        shape = stream.take(4)
        waves = (1 + shape[0] % 3, 3 + shape[1] % 5)
        phases = (shape[2] / 256, shape[3] / 256)
        self._rows = max(1, rows)
        self._horizon = [
            self._rows
            * (
                0.55
                + 0.12 * _wave(waves[0] * column / columns + phases[0])
                + 0.04 * _wave(waves[1] * column / columns + phases[1])
            )
            for column in range(columns)
        ]

    def row(self, row: int) -> BlockLevels:
        height = row / self._rows
        sky = (_clamp(90 - 70 * height), _clamp(30 - 15 * height), _clamp(-12))
        luma: list[int] = []
        blue: list[int] = []
        red: list[int] = []
        for horizon in self._horizon:
            if row < horizon:
                level_y, level_b, level_r = sky
            else:
                depth = (row - horizon) / self._rows
                level_y = _clamp(-20 - 80 * depth)
                level_b = _clamp(-30 + 10 * depth)
                level_r = _clamp(-8 + 40 * depth)
            luma.append(level_y)
            blue.append(level_b)
            red.append(level_r)
        return BlockLevels(luma=luma, blue=blue, red=red)
