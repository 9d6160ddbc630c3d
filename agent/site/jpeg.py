"""A minimal baseline JPEG encoder (ITU-T T.81) for images of noise over a scene, sized to a byte
target.

No DCT is needed: the scan codes quantised coefficients directly (smooth DC from `scene`, random
AC from `coefficients`), and any such coefficients decode to a valid image. Components are
YCbCr without subsampling; a restart interval per row of blocks byte-aligns each row, so the
encoder knows every row's exact size and can stop when the target is reached: rows are added
while they fit, then a last row whose tail blocks carry no AC coefficients fills what is left.
The result is within about one block group (tens of bytes) below the target.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from agent.site._stream import ByteStream
from agent.site.coefficients import CHROMA, LUMA, CodedPool, draw_pool
from agent.site.huffman import HuffmanTable, build_table
from agent.site.scene import BlockLevels, Scene

BLOCK_PX = 8
MAX_SIDE_PX = 65535
POOL_BLOCKS = 1024
_MAX_LEVEL_DIFF = 255
# DC differences are small inside a row and about one block mean at each row start (the
# predictor restarts); category k codes differences of magnitude 2^(k-1) .. 2^k - 1.
_DC_FREQUENCIES = {0: 40, 1: 30, 2: 30, 3: 20, 4: 12, 5: 8, 6: 6, 7: 4, 8: 2, 9: 1, 10: 1, 11: 1}
_DC_MEAN_BITS = 4
_LUMA_QUANT = bytes([8] + [2 + index // 8 for index in range(1, 64)])
_CHROMA_QUANT = bytes([8] + [3 + index // 8 for index in range(1, 64)])
_SOI = b"\xff\xd8"
_EOI = b"\xff\xd9"


@dataclass(frozen=True)
class JpegImage:
    data: bytes
    width_px: int
    height_px: int


def _segment(marker: int, payload: bytes) -> bytes:
    return struct.pack(">HH", marker, len(payload) + 2) + payload


def _dc_codes(table: HuffmanTable) -> list[str]:
    """Code strings for every DC difference, indexed by difference + 255."""
    codes: list[str] = []
    for diff in range(-_MAX_LEVEL_DIFF, _MAX_LEVEL_DIFF + 1):
        size = abs(diff).bit_length()
        value = diff if diff >= 0 else diff + (1 << size) - 1
        codes.append(table.codes[size] + (format(value, f"0{size}b") if size else ""))
    return codes


def _pack(bits: str) -> bytes:
    """Bits to bytes, padded with ones and with every 0xFF stuffed, as an entropy segment."""
    bits += "1" * (-len(bits) % 8)
    return int(bits, 2).to_bytes(len(bits) // 8, "big").replace(b"\xff", b"\xff\x00")


class _RowCoder:
    """Codes one row of blocks (one restart interval) from its levels and pool picks."""

    def __init__(
        self, luma: CodedPool, chroma: CodedPool, dc_luma: HuffmanTable, dc_chroma: HuffmanTable
    ) -> None:
        self._luma = luma
        self._chroma = chroma
        self._dc_luma = _dc_codes(dc_luma)
        self._dc_chroma = _dc_codes(dc_chroma)

    @staticmethod
    def _differences(levels: list[int], codes: list[str]) -> list[str]:
        previous = [0, *levels[:-1]]  # the DC predictor restarts at zero in every interval
        return [
            codes[level - before + _MAX_LEVEL_DIFF]
            for before, level in zip(previous, levels, strict=True)
        ]

    def _dc(self, levels: BlockLevels) -> tuple[list[str], list[str], list[str]]:
        return (
            self._differences(levels.luma, self._dc_luma),
            self._differences(levels.blue, self._dc_chroma),
            self._differences(levels.red, self._dc_chroma),
        )

    def full(self, levels: BlockLevels, picks: list[int]) -> list[str]:
        """Each unit's bits: Y, Cb, Cr blocks, each a DC difference and a pooled AC part."""
        luma, blue, red = self._dc(levels)
        ac_luma = self._luma.blocks
        ac_chroma = self._chroma.blocks
        return [
            y + ac_luma[i] + b + ac_chroma[j] + r + ac_chroma[k]
            for y, b, r, i, j, k in zip(
                luma, blue, red, picks[0::3], picks[1::3], picks[2::3], strict=True
            )
        ]

    def flat(self, levels: BlockLevels) -> list[str]:
        """Each unit's bits with no AC coefficients: the scene alone."""
        luma, blue, red = self._dc(levels)
        eob_y = self._luma.end_of_block
        eob_c = self._chroma.end_of_block
        return [y + eob_y + b + eob_c + r + eob_c for y, b, r in zip(luma, blue, red, strict=True)]


def _fit(full: list[str], flat: list[str], room: int) -> bytes | None:
    """A last row that fits in `room` bytes, if any: as many full units as fit, then flat ones.

    Byte stuffing makes the size not quite monotonic in the number of full units, so the search
    may settle a unit short of the most that fit; every row it returns does fit.
    """
    best = _pack("".join(flat))
    if len(best) > room:
        return None
    low, high = 0, len(full)  # `low` full units fit; `high` do not
    while high - low > 1:
        middle = (low + high) // 2
        packed = _pack("".join(full[:middle] + flat[middle:]))
        if len(packed) <= room:
            low, best = middle, packed
        else:
            high = middle
    return best


def _headers(width_px: int, height_px: int, columns: int, tables: list[HuffmanTable]) -> bytes:
    app0 = _segment(0xFFE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    dqt = _segment(0xFFDB, b"\x00" + _LUMA_QUANT + b"\x01" + _CHROMA_QUANT)
    components = bytes([1, 0x11, 0, 2, 0x11, 1, 3, 0x11, 1])
    sof0 = _segment(0xFFC0, struct.pack(">BHHB", 8, height_px, width_px, 3) + components)
    # Table classes and ids: DC luma, AC luma, DC chroma, AC chroma.
    dht = _segment(
        0xFFC4,
        b"".join(
            bytes([class_id, *table.counts, *table.values])
            for class_id, table in zip((0x00, 0x10, 0x01, 0x11), tables, strict=True)
        ),
    )
    dri = _segment(0xFFDD, struct.pack(">H", columns))
    sos = _segment(0xFFDA, bytes([3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0]))
    return _SOI + app0 + dqt + sof0 + dht + dri + sos


def _picks(stream: ByteStream, count: int) -> list[int]:
    data = stream.take(2 * count)
    mask = POOL_BLOCKS - 1
    return [(high << 8 | low) & mask for high, low in zip(data[0::2], data[1::2], strict=True)]


def encode_jpeg(stream: ByteStream, target_bytes: int, aspect: tuple[int, int]) -> JpegImage:
    """A baseline JPEG of at most `target_bytes` (a little under), roughly `aspect` in shape."""
    luma = draw_pool(LUMA, stream.child("luma"), POOL_BLOCKS)
    chroma = draw_pool(CHROMA, stream.child("chroma"), POOL_BLOCKS)
    tables = [build_table(_DC_FREQUENCIES), luma.table, build_table(_DC_FREQUENCIES), chroma.table]
    budget = target_bytes - len(_headers(0, 0, 0, tables)) - len(_EOI)
    unit_bits = luma.mean_bits + 2 * chroma.mean_bits + 3 * _DC_MEAN_BITS
    units = max(1.0, budget * 8 / unit_bits)
    max_units_per_side = MAX_SIDE_PX // BLOCK_PX
    columns = min(max_units_per_side, max(1, round(math.sqrt(units * aspect[0] / aspect[1]))))
    scene = Scene(stream.child("scene"), columns, round(units / columns))
    coder = _RowCoder(luma, chroma, tables[0], tables[2])
    pick_stream = stream.child("picks")
    rows: list[bytes] = []
    used = 0
    while len(rows) < max_units_per_side:
        levels = scene.row(len(rows))
        full = coder.full(levels, _picks(pick_stream, 3 * columns))
        room = budget - used - (2 if rows else 0)  # a restart marker precedes every later row
        packed = _pack("".join(full))
        if len(packed) > room:
            last = _fit(full, coder.flat(levels), room)
            if last is not None:
                rows.append(last)
            break
        rows.append(packed)
        used += len(packed) + (2 if len(rows) > 1 else 0)
    if not rows:
        raise ValueError(f"{target_bytes} bytes cannot hold a {columns * BLOCK_PX} px wide JPEG")
    scan = bytearray(rows[0])
    for number, row in enumerate(rows[1:]):
        scan += bytes([0xFF, 0xD0 + number % 8]) + row
    width_px, height_px = columns * BLOCK_PX, len(rows) * BLOCK_PX
    data = _headers(width_px, height_px, columns, tables) + bytes(scan) + _EOI
    return JpegImage(data=data, width_px=width_px, height_px=height_px)
