"""The datasets a message carries, their packed binary form and their digest. Pure.

A matrix is `side` x `side` float64 values, row by row; a struct array is records of a string, a
32-bit integer and a boolean, as the reference's Java beans held. The packed form is the binary
body of `raw` and the attachment of `swa` and `dime`, so those three differ only in their
framing:

    matrix:  b"M", side (u32 LE), side*side float64 LE
    structs: b"S", count (u32 LE), per record: text length (u32 LE), UTF-8 text, i32 LE, u8 0|1

The digest the client sends is the sha256 of the packed form: one definition of "the same
values" for every encoding, so a decoding bug anywhere fails the trial.
"""

from __future__ import annotations

import hashlib
import random
import struct
import sys
from array import array
from dataclasses import dataclass

from agent.workloads.payload.errors import DecodeError
from agent.workloads.payload.limits import MAX_RECORDS, MAX_SIDE

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_HEAD = struct.Struct("<cI")
_LENGTH = struct.Struct("<I")
_NUMBER_FLAG = struct.Struct("<iB")
_MATRIX, _STRUCTS = b"M", b"S"
_LITTLE = sys.byteorder == "little"


@dataclass(frozen=True)
class Matrix:
    side: int
    values: array[float]  # typecode "d", side * side, row-major

    def __post_init__(self) -> None:
        if len(self.values) != self.side * self.side:
            raise DecodeError(f"matrix of side {self.side} holds {len(self.values)} values")


@dataclass(frozen=True)
class Record:
    text: str
    number: int  # int32
    flag: bool


@dataclass(frozen=True)
class Structs:
    records: tuple[Record, ...]


Dataset = Matrix | Structs


def value_count(dataset: Dataset) -> int:
    return len(dataset.values) if isinstance(dataset, Matrix) else len(dataset.records)


def little_endian_bytes(values: array[float]) -> bytes:
    if _LITTLE:
        return values.tobytes()
    swapped = array("d", values)
    swapped.byteswap()
    return swapped.tobytes()


def floats_from(data: bytes | memoryview) -> array[float]:
    """float64 LE bytes (a multiple of 8) as values."""
    values = array("d")
    values.frombytes(data)
    if not _LITTLE:
        values.byteswap()
    return values


def pack(dataset: Dataset) -> bytes:
    if isinstance(dataset, Matrix):
        return _HEAD.pack(_MATRIX, dataset.side) + little_endian_bytes(dataset.values)
    parts = [_HEAD.pack(_STRUCTS, len(dataset.records))]
    for record in dataset.records:
        text = record.text.encode()
        parts.append(_LENGTH.pack(len(text)))
        parts.append(text)
        parts.append(_NUMBER_FLAG.pack(record.number, record.flag))
    return b"".join(parts)


def unpack(data: bytes | memoryview, where: str) -> Dataset:
    """The packed form back into values; DecodeError naming `where` (the part it came from) if
    it is short, long or malformed."""
    view = memoryview(data)
    if len(view) < _HEAD.size:
        raise DecodeError(f"{where}: {len(view)} bytes, shorter than the packed header")
    kind, count = _HEAD.unpack_from(view)
    if kind == _MATRIX:
        if count > MAX_SIDE:
            raise DecodeError(f"{where}: matrix side {count} is over the limit {MAX_SIDE}")
        expected = _HEAD.size + 8 * count * count
        if len(view) != expected:
            raise DecodeError(
                f"{where}: matrix of side {count} needs {expected} bytes, got {len(view)}"
            )
        return Matrix(count, floats_from(view[_HEAD.size :]))
    if kind != _STRUCTS:
        raise DecodeError(f"{where}: packed kind {kind!r} is neither b'M' nor b'S'")
    return _unpack_records(view, count, where)


def _unpack_records(view: memoryview, count: int, where: str) -> Structs:
    if count > MAX_RECORDS:
        raise DecodeError(f"{where}: {count} records are over the limit {MAX_RECORDS}")
    # Each record takes at least 9 bytes: a claimed count beyond that is refused before any
    # allocation.
    if count > (len(view) - _HEAD.size) // (_LENGTH.size + _NUMBER_FLAG.size):
        raise DecodeError(f"{where}: {count} records cannot fit in {len(view)} bytes")
    records = []
    offset = _HEAD.size
    try:
        for index in range(count):
            (length,) = _LENGTH.unpack_from(view, offset)
            offset += _LENGTH.size
            end = offset + length
            if end + _NUMBER_FLAG.size > len(view):
                raise DecodeError(f"{where}: record {index} runs past the end")
            text = str(view[offset:end], "utf-8")
            number, flag = _NUMBER_FLAG.unpack_from(view, end)
            if flag > 1:
                raise DecodeError(f"{where}: record {index} flag byte is {flag}, not 0 or 1")
            records.append(Record(text, number, bool(flag)))
            offset = end + _NUMBER_FLAG.size
    except struct.error:
        raise DecodeError(f"{where}: record {len(records)} runs past the end") from None
    except UnicodeDecodeError as exc:
        raise DecodeError(
            f"{where}: record {len(records)} text is not UTF-8: {exc.reason}"
        ) from None
    if offset != len(view):
        raise DecodeError(f"{where}: {len(view) - offset} bytes after the last record")
    return Structs(tuple(records))


def digest(dataset: Dataset) -> str:
    """sha256 hex of the packed form."""
    return hashlib.sha256(pack(dataset)).hexdigest()


_WORDS = ("sensor", "node", "probe", "gateway", "meter", "relay", "valve", "pump")


def make_dataset(data: str, size: int, seed: int) -> Dataset:
    """The deterministic dataset of a trial: `size` is the matrix side or the record count."""
    rng = random.Random(f"h2iot-payload:{data}:{size}:{seed}")
    if data == "matrix":
        # Values of every magnitude, so text encodings write long and short numbers alike.
        values = array(
            "d", (rng.uniform(-1.0, 1.0) * 10.0 ** rng.randint(-8, 8) for _ in range(size * size))
        )
        return Matrix(size, values)
    records = tuple(
        Record(
            f"{rng.choice(_WORDS)}-{index}",
            rng.randint(INT32_MIN, INT32_MAX),
            rng.random() < 0.5,
        )
        for index in range(size)
    )
    return Structs(records)
