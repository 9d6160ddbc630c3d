"""The cbor encoding (RFC 8949) with cbor2 (its C extension where installed), over the tree form
(codecs/tree.py). cbor2 checks a claimed length against the bytes it can read before allocating
(it reads long strings in bounded pieces and grows arrays as items arrive) and limits nesting, so
a hostile item costs no more memory than its body."""

from __future__ import annotations

import cbor2

from agent.workloads.payload.codecs.tree import from_tree, to_tree
from agent.workloads.payload.dataset import Dataset
from agent.workloads.payload.errors import DecodeError, EncodeError

CONTENT_TYPE = "application/cbor"


def encode(dataset: Dataset) -> tuple[str, bytes]:
    try:
        return CONTENT_TYPE, cbor2.dumps(to_tree(dataset))
    except cbor2.CBOREncodeError as exc:
        raise EncodeError(f"CBOR: {exc}") from None


def decode(content_type: str, body: bytes | memoryview) -> Dataset:
    try:
        tree = cbor2.loads(body)
    except cbor2.CBORDecodeError as exc:
        raise DecodeError(f"CBOR: {exc}") from None
    return from_tree(tree, "CBOR")
