"""The soap encoding: a SOAP 1.1 envelope with every value as XML text (codecs/envelope.py)."""

from __future__ import annotations

from agent.workloads.payload.codecs import envelope
from agent.workloads.payload.dataset import Dataset
from agent.workloads.payload.errors import DecodeError

CONTENT_TYPE = 'text/xml; charset="utf-8"'


def encode(dataset: Dataset) -> tuple[str, bytes]:
    return CONTENT_TYPE, envelope.write_inline(dataset)


def decode(content_type: str, body: bytes | memoryview) -> Dataset:
    found = envelope.read(body)
    if isinstance(found, envelope.Reference):
        raise DecodeError(f"envelope: names an attachment ({found.href}) but a soap body has none")
    return found
