"""Media types of the files a site holds, by file name extension."""

from __future__ import annotations

from pathlib import PurePosixPath

DEFAULT_CONTENT_TYPE = "application/octet-stream"
_BY_SUFFIX = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}


def content_type_for(path: str) -> str:
    """The media type for `path` by its extension (case-insensitive); octet-stream if unknown."""
    return _BY_SUFFIX.get(PurePosixPath(path).suffix.lower(), DEFAULT_CONTENT_TYPE)
