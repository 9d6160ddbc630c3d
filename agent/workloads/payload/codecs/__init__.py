"""The six encodings of the payload workload, each a pure module with `encode(dataset) ->
(content type, body)` and `decode(content type, body) -> dataset` (sans-IO: bytes in, values
out, DecodeError for anything else), and the registry mapping an encoding's name and its media
type to its module. A module is imported when first used, so cbor2 (the `payload` extra) loads
only where CBOR is spoken."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from agent.workloads.payload.dataset import Dataset
from agent.workloads.payload.errors import PayloadError

Encode = Callable[[Dataset], tuple[str, bytes]]
Decode = Callable[[str, "bytes | memoryview"], Dataset]


@dataclass(frozen=True)
class Encoding:
    name: str
    media_type: str  # the Content-Type without parameters: what the server dispatches on
    module: str
    soap: bool = False  # a SOAP 1.1 message: its request carries SOAPAction (section 6.1.1)

    def load(self) -> ModuleType:
        """The codec's module; PayloadError naming the extra where its library is missing (an
        SSH node gets the agent without extras)."""
        try:
            return importlib.import_module(f"{__name__}.{self.module}")
        except ImportError as exc:
            raise PayloadError(
                f"encoding {self.name} needs the payload extra (pip install 'h2iot[payload]'): "
                f"{exc}"
            ) from None

    @property
    def encode(self) -> Encode:
        encode: Encode = self.load().encode
        return encode

    @property
    def decode(self) -> Decode:
        decode: Decode = self.load().decode
        return decode


ENCODINGS: dict[str, Encoding] = {
    encoding.name: encoding
    for encoding in (
        Encoding("soap", "text/xml", "soap", soap=True),
        Encoding("swa", "multipart/related", "swa", soap=True),
        Encoding("dime", "application/dime", "dime", soap=True),
        Encoding("json", "application/json", "json_codec"),
        Encoding("cbor", "application/cbor", "cbor_codec"),
        Encoding("raw", "application/octet-stream", "raw"),
    )
}
BY_MEDIA_TYPE = {encoding.media_type: encoding for encoding in ENCODINGS.values()}


def media_type(content_type: str) -> str:
    """ "Text/XML; charset=utf-8" -> "text/xml"."""
    return content_type.split(";", 1)[0].strip().lower()
