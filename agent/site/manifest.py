"""The site manifest: every file's path, size, sha256 and content type, as `DIR/manifest.json`.

Format (version 1), a JSON object:
`{"format_version": 1, "index": "index.html", "seed": 0, "total_bytes": N,
  "files": [{"path": "img/photo-1.jpg", "size_bytes": n, "sha256": "<64 hex>",
             "content_type": "image/jpeg"}, ...]}`
`files` lists every file of the site (the index too, but not the manifest itself) with relative
POSIX paths; `total_bytes` is the sum of their sizes. Unknown keys are ignored; a newer
`format_version` is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import SiteError

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
_SHA256_HEX_DIGITS = 64
_HEX_DIGITS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class SiteFile:
    path: str  # relative POSIX path, e.g. "img/photo-1.jpg"
    size_bytes: int
    sha256: str  # lowercase hex
    content_type: str


@dataclass(frozen=True)
class SiteManifest:
    index: str
    files: tuple[SiteFile, ...]
    seed: int
    total_bytes: int
    format_version: int = FORMAT_VERSION

    def by_path(self) -> dict[str, SiteFile]:
        return {file.path: file for file in self.files}

    def to_json(self) -> str:
        document = {
            "format_version": self.format_version,
            "index": self.index,
            "seed": self.seed,
            "total_bytes": self.total_bytes,
            "files": [
                {
                    "path": file.path,
                    "size_bytes": file.size_bytes,
                    "sha256": file.sha256,
                    "content_type": file.content_type,
                }
                for file in self.files
            ],
        }
        return json.dumps(document, indent=2) + "\n"


def is_site_path(path: str) -> bool:
    """A relative POSIX path that stays inside the site: no empty, `.` or `..` segment."""
    segments = path.split("/")
    return "\\" not in path and all(segment not in ("", ".", "..") for segment in segments)


class _Reader:
    """Typed access to a JSON object that names the file and key at fault when it is wrong."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str) -> SiteError:
        return SiteError(f"{self.source}: {message}")

    def get(self, document: dict[str, Any], key: str, kind: type, where: str = "") -> Any:
        name = f"{where}{key}"
        if key not in document:
            raise self.fail(f"missing key '{name}'")
        value = document[key]
        # bool is an int to Python but never a count or a seed in a manifest.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(f"key '{name}' must be {kind.__name__}, not {type(value).__name__}")
        return value

    def count(self, document: dict[str, Any], key: str, where: str = "") -> int:
        value: int = self.get(document, key, int, where)
        if value < 0:
            raise self.fail(f"key '{where}{key}' must not be negative, got {value}")
        return value

    def file(self, entry: object, number: int) -> SiteFile:
        where = f"files[{number}]."
        if not isinstance(entry, dict):
            raise self.fail(f"key 'files[{number}]' must be an object")
        path: str = self.get(entry, "path", str, where)
        if not is_site_path(path):
            raise self.fail(f"key '{where}path' is not a relative path inside the site: {path!r}")
        sha256: str = self.get(entry, "sha256", str, where)
        if len(sha256) != _SHA256_HEX_DIGITS or not set(sha256) <= _HEX_DIGITS:
            raise self.fail(f"key '{where}sha256' is not 64 lowercase hex digits: {sha256!r}")
        return SiteFile(
            path=path,
            size_bytes=self.count(entry, "size_bytes", where),
            sha256=sha256,
            content_type=self.get(entry, "content_type", str, where),
        )


def parse_manifest(text: str, source: str = MANIFEST_NAME) -> SiteManifest:
    """The manifest in `text`; a SiteError naming `source` and the key at fault otherwise."""
    reader = _Reader(source)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise reader.fail(f"not valid JSON ({where}: {error.msg})") from None
    if not isinstance(document, dict):
        raise reader.fail("must hold a JSON object")
    version = reader.count(document, "format_version")
    if version > FORMAT_VERSION:
        raise reader.fail(
            f"key 'format_version' is {version}, newer than this agent reads ({FORMAT_VERSION})"
        )
    entries: list[object] = reader.get(document, "files", list)
    files = tuple(reader.file(entry, number) for number, entry in enumerate(entries))
    paths: set[str] = set()
    for number, file in enumerate(files):
        if file.path in paths:
            raise reader.fail(f"key 'files[{number}].path' repeats {file.path!r}")
        paths.add(file.path)
    index: str = reader.get(document, "index", str)
    if index not in paths:
        raise reader.fail(f"key 'index' names {index!r}, which is not in 'files'")
    total = reader.count(document, "total_bytes")
    if total != sum(file.size_bytes for file in files):
        raise reader.fail(f"key 'total_bytes' is {total}, not the sum of the files' sizes")
    return SiteManifest(
        index=index,
        files=files,
        seed=reader.get(document, "seed", int),
        total_bytes=total,
        format_version=version,
    )


def load_manifest(directory: Path) -> SiteManifest:
    """The manifest of the site in `directory`; a one-line SiteError naming what is wrong."""
    path = Path(directory) / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise SiteError(f"{path}: cannot read the site manifest: {reason}") from None
    return parse_manifest(text, str(path))
