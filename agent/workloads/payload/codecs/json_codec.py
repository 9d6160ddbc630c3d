"""The json encoding (RFC 8259) with the standard library's json module, over the tree form
(codecs/tree.py). Non-finite numbers have no JSON form and are refused when writing."""

from __future__ import annotations

import json
import math

from agent.workloads.payload.codecs.tree import from_tree, to_tree
from agent.workloads.payload.dataset import Dataset, Matrix
from agent.workloads.payload.errors import DecodeError, EncodeError

CONTENT_TYPE = "application/json"


def encode(dataset: Dataset) -> tuple[str, bytes]:
    try:
        text = json.dumps(
            to_tree(dataset), allow_nan=False, separators=(",", ":"), ensure_ascii=False
        )
    except ValueError as exc:
        raise EncodeError(f"JSON: {exc}") from None
    return CONTENT_TYPE, text.encode()


def _refuse_constant(name: str) -> float:
    raise DecodeError(f"JSON: {name} is not a JSON number")


def decode(content_type: str, body: bytes | memoryview) -> Dataset:
    try:
        tree = json.loads(bytes(body), parse_constant=_refuse_constant)
    except RecursionError:
        raise DecodeError("JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, an integer of too many digits
        raise DecodeError(f"JSON: {exc}") from None
    dataset = from_tree(tree, "JSON")
    # A number too large for a double (1e999) parses as infinity, which JSON cannot mean.
    if (
        isinstance(dataset, Matrix)
        and dataset.values
        and not (math.isfinite(min(dataset.values)) and math.isfinite(max(dataset.values)))
    ):
        raise DecodeError("JSON: matrix.rows hold a number that is not a finite number")
    return dataset
