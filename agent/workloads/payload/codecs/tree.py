"""A dataset as the plain tree of maps, arrays, numbers, strings and booleans that JSON and CBOR
write, and back, checking every node's type. Pure.

    {"matrix": {"rows": [[float, ...], ...], "side": n}}
    {"records": [{"flag": bool, "text": str, "number": int32}, ...]}

Map keys are written in CBOR's deterministic order (RFC 8949 section 4.2.3: shorter first, then
bytewise), so strict decoders (DAG-CBOR's) take the CBOR as it is.
"""

from __future__ import annotations

from array import array
from itertools import chain
from typing import Any

from agent.workloads.payload.dataset import (
    INT32_MAX,
    INT32_MIN,
    Dataset,
    Matrix,
    Record,
    Structs,
)
from agent.workloads.payload.errors import DecodeError
from agent.workloads.payload.limits import MAX_RECORDS, MAX_SIDE

_NUMBER_TYPES = frozenset((float, int))
_RECORD_KEYS = frozenset(("text", "number", "flag"))


def to_tree(dataset: Dataset) -> dict[str, Any]:
    if isinstance(dataset, Matrix):
        side, values = dataset.side, dataset.values
        rows = [values[start : start + side].tolist() for start in range(0, side * side, side or 1)]
        return {"matrix": {"rows": rows, "side": side}}
    return {
        "records": [{"flag": r.flag, "text": r.text, "number": r.number} for r in dataset.records]
    }


def from_tree(tree: object, where: str) -> Dataset:
    """`where` names the format in errors ("JSON", "CBOR")."""
    if not isinstance(tree, dict) or len(tree) != 1:
        raise DecodeError(f"{where}: the top is not a map with one key, matrix or records")
    if "matrix" in tree:
        return _matrix(tree["matrix"], where)
    if "records" in tree:
        return _records(tree["records"], where)
    raise DecodeError(f"{where}: the top key is neither matrix nor records")


def _matrix(node: object, where: str) -> Matrix:
    if not isinstance(node, dict) or set(node) != {"side", "rows"}:
        raise DecodeError(f"{where}: matrix is not a map of side and rows")
    side, rows = node["side"], node["rows"]
    if type(side) is not int or not 0 <= side <= MAX_SIDE:
        raise DecodeError(f"{where}: matrix.side is not a count up to {MAX_SIDE}")
    if not isinstance(rows, list) or len(rows) != side:
        raise DecodeError(f"{where}: matrix.rows is not a list of {side} rows")
    kinds: set[type] = set()
    for index, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != side:
            raise DecodeError(f"{where}: matrix.rows[{index}] is not a list of {side} numbers")
        kinds.update(map(type, row))
    if not kinds <= _NUMBER_TYPES:
        names = ", ".join(sorted(kind.__name__ for kind in kinds - _NUMBER_TYPES))
        raise DecodeError(f"{where}: matrix.rows hold {names}, not numbers")
    try:
        values = array("d", chain.from_iterable(rows))
    except OverflowError:
        raise DecodeError(f"{where}: matrix.rows hold an integer too large for a double") from None
    return Matrix(side, values)


def _records(node: object, where: str) -> Structs:
    if not isinstance(node, list) or len(node) > MAX_RECORDS:
        raise DecodeError(f"{where}: records is not a list of up to {MAX_RECORDS}")
    records = []
    for index, item in enumerate(node):
        if not isinstance(item, dict) or item.keys() != _RECORD_KEYS:
            raise DecodeError(f"{where}: records[{index}] is not a map of text, number and flag")
        text, number, flag = item["text"], item["number"], item["flag"]
        if type(text) is not str or type(flag) is not bool or type(number) is not int:
            raise DecodeError(f"{where}: records[{index}] is not (string, integer, boolean)")
        if not INT32_MIN <= number <= INT32_MAX:
            raise DecodeError(f"{where}: records[{index}].number {number} is outside int32")
        if not text.isascii():
            _check_unicode(text, f"{where}: records[{index}].text")
        records.append(Record(text, number, flag))
    return Structs(tuple(records))


def _check_unicode(text: str, where: str) -> None:
    """JSON's escapes (and its bytes, which the json module decodes with surrogatepass) can
    make a lone surrogate: no UTF-8 can carry it, so the packed form, and the digest over it,
    could not be written."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise DecodeError(f"{where} holds {exc.object[exc.start]!r}, a lone surrogate") from None
