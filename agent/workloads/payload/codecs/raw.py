"""The raw encoding: the packed dataset as application/octet-stream, the lower bound on size and
(de)serialisation cost (agent/workloads/payload/dataset.py)."""

from __future__ import annotations

from agent.workloads.payload.dataset import Dataset, pack, unpack

CONTENT_TYPE = "application/octet-stream"


def encode(dataset: Dataset) -> tuple[str, bytes]:
    return CONTENT_TYPE, pack(dataset)


def decode(content_type: str, body: bytes | memoryview) -> Dataset:
    return unpack(body, "raw body")
